"""What a release spent, from whatever describes it: an event, (event, count) entries, an ``Accountant``, a spec, an
Opacus accountant or history (via :func:`dplens.from_opacus`), or a file (a spec, an ``Accountant.to_json`` ledger,
or a compliance report's ``report.json``, whose ``mechanism.ledger`` is such a ledger).

The events are stored exactly (``event_to_dict``; :func:`decode_entries` is the inverse), so a stored release
composes to the same ε as the source it came from.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dplens.accountant import events as ev

__all__ = ["decode_entries", "encode_entries", "release_entries"]

_MAX_FILE_BYTES = 64 * 2**20


def encode_entries(entries: Sequence[tuple[ev.Event, int]]) -> tuple[str, str]:
    """Canonical JSON of the entries and its SHA-256 (the identity of a release's events).

    Example:
        >>> from dplens import Gaussian
        >>> text, sha = encode_entries([(Gaussian(noise_multiplier=2.0), 3)])
        >>> text[:40], len(sha)
        ('[{"count":3,"event":{"neighboring":"add_', 64)
    """
    text = json.dumps(
        [{"event": ev.event_to_dict(e), "count": c} for e, c in entries], sort_keys=True, separators=(",", ":")
    )
    return text, hashlib.sha256(text.encode()).hexdigest()


def decode_entries(text: str) -> tuple[tuple[ev.Event, int], ...]:
    """Inverse of :func:`encode_entries`.

    Example:
        >>> from dplens import Gaussian
        >>> entries = ((Gaussian(noise_multiplier=2.0), 3),)
        >>> decode_entries(encode_entries(entries)[0]) == entries
        True
    """
    return tuple((ev.event_from_dict(item["event"]), int(item["count"])) for item in json.loads(text))


def _from_file(path: Path) -> tuple[tuple[tuple[ev.Event, int], ...], str]:
    from dplens._files import read_input_bytes
    from dplens.accountant.compose import Accountant

    raw = read_input_bytes(path, what="release file", max_bytes=_MAX_FILE_BYTES)
    if path.suffix.lower() != ".toml":
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict) and data.get("format") == "dplens-ledger":
            return Accountant.from_json(raw.decode("utf-8")).ledger, f"ledger JSON {path}"
        if isinstance(data, dict) and data.get("format") == "dplens-report":
            ledger = (data.get("mechanism") or {}).get("ledger")
            if not isinstance(ledger, dict):
                raise ValueError(f"report {str(path)!r} has no mechanism.ledger")
            return Accountant.from_json(json.dumps(ledger)).ledger, f"report {path}"
    from dplens.spec import load_spec

    spec = load_spec(path)
    return spec.accountant().ledger, f"spec {path} (sha256 {spec.sha256[:12]})"


def release_entries(source: Any) -> tuple[tuple[tuple[ev.Event, int], ...], str]:
    """The (event, count) entries a release spent and a short description of where they came from.

    Example:
        >>> from dplens import Accountant, Gaussian
        >>> entries, where = release_entries(Accountant().compose(Gaussian(noise_multiplier=2.0), 3))
        >>> entries == ((Gaussian(noise_multiplier=2.0), 3),), where
        (True, 'Accountant')
    """
    from dplens.accountant.compose import Accountant

    if isinstance(source, ev.Event):
        return ((source, 1),), f"event {type(source).__name__}"
    if isinstance(source, Accountant):
        return source.ledger, "Accountant"
    if isinstance(source, str | os.PathLike):
        return _from_file(Path(source))
    if type(source).__name__ == "Spec" and hasattr(source, "entries"):
        return source.accountant().ledger, f"spec {source.source or '<dict>'}"
    if isinstance(source, list | tuple) and source and all(isinstance(x, tuple) and len(x) == 2 for x in source):
        acc = Accountant()
        for event, count in source:
            acc.compose(event, count)
        return acc.ledger, "entries"
    if hasattr(source, "history") or hasattr(source, "accountant") or isinstance(source, dict):
        from dplens.integrations.opacus_accountant import from_opacus

        return from_opacus(source).ledger, f"Opacus ({type(source).__name__})"
    raise ValueError(
        "a release must be an Event, (event, count) entries, an Accountant, a Spec, an Opacus accountant or "
        f"history, or a spec/ledger/report file; got {type(source).__name__}"
    )
