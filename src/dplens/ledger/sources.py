"""How a release's events are stored: canonical JSON and its SHA-256.

What a release spent is read from whatever describes it (an event, entries, an ``Accountant``, a spec, an Opacus
accountant, a file) at the front door, :func:`dplens._inputs.release_entries`, re-exported here. The events are stored
exactly (``event_to_dict``; :func:`decode_entries` is the inverse), so a stored release
composes to the same ε as the source it came from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from dplens._inputs import release_entries
from dplens.accountant import events as ev

__all__ = ["decode_entries", "encode_entries", "release_entries"]


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
