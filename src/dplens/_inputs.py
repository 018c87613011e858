"""The front door: what a user hands dplens, turned into typed values, in one place.

Every public entry point passes what it was given through here first: the functions of :mod:`dplens` (``audit``,
``calibrate``, ``attack_risk``, ``generate_report``, ``sweep``), :meth:`dplens.ledger.Ledger.charge`, and each
subcommand of the ``dplens`` command, which calls the same Python function a user would. The libraries below take
only typed values: a :class:`~dplens.spec.Spec`, an :class:`~dplens.accountant.compose.Accountant` and its events, a
mechanism object, a target. Nothing below this module guesses what a value is from its type's name.

What is recognised, and as what (checked in this order):

============================================  ==================================================================
given                                         becomes
============================================  ==================================================================
a :class:`~dplens.spec.Spec`                  itself
a path (``str`` or path-like) to a file       the spec it holds (:func:`dplens.spec.load_spec`); for a release,
                                              also an ``Accountant.to_json`` ledger or a report's ``report.json``
``"module:name"`` (no such file exists)       a target to import (:func:`dplens.auditing.targets.load_target`)
an object with ``sample`` and                 a mechanism (:mod:`dplens.mechanisms`), audited by the
``worst_case_pair``                           distinguishing game
a :class:`~dplens.auditing.targets.Target`,   a target: user code audited as a black box
a callable, an object with ``release`` or
``randomise``
an Opacus accountant, ``PrivacyEngine``,      a ledger of the training (:func:`dplens.from_opacus`)
state dict or history
an :class:`~dplens.accountant.compose.        its ledger (a release)
Accountant`, an event, ``(event, count)``
entries
============================================  ==================================================================

Example:
    >>> from dplens import Accountant, Gaussian
    >>> audit_subject("examples/dp_sgd_mnist.toml").kind, audit_subject("my_module:release").kind
    (<SubjectKind.SPEC: 'spec'>, <SubjectKind.TARGET: 'target'>)
    >>> entries, where = release_entries(Accountant().compose(Gaussian(noise_multiplier=2.0), 3))
    >>> entries == ((Gaussian(noise_multiplier=2.0), 3),), where
    (True, 'Accountant')
"""

from __future__ import annotations

import enum
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AuditSubject", "SubjectKind", "audit_subject", "is_target_path", "release_entries", "spec_of"]

_TARGET_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

#: Largest release file (spec, ledger JSON, report) read by :func:`release_entries`.
_MAX_RELEASE_FILE_BYTES = 64 * 2**20


def is_target_path(value: Any) -> bool:
    """``"module:name"`` (and not a file that exists): a target to import, not a spec."""
    return isinstance(value, str) and bool(_TARGET_PATH.match(value)) and not Path(value).exists()


def spec_of(subject: Any) -> Any:
    """The :class:`~dplens.spec.Spec` that ``subject`` is or names (a path is loaded), else None."""
    from dplens.spec import Spec, load_spec

    if isinstance(subject, Spec):
        return subject
    if isinstance(subject, str | os.PathLike) and not is_target_path(subject):
        return load_spec(subject)
    return None


class SubjectKind(enum.Enum):
    """What an audit's subject is, and so which audit runs."""

    SPEC = "spec"  # the spec's game (dplens.auditing.spec_games.audit_spec_game)
    MECHANISM = "mechanism"  # the distinguishing game on a dplens mechanism object
    TARGET = "target"  # user code, audited as a black box (dplens.auditing.target_game.audit_target)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditSubject:
    """An audit's subject as a typed value: its kind and the value to audit (a parsed spec for ``SPEC``)."""

    kind: SubjectKind
    value: Any


def _is_target(subject: Any) -> bool:
    from dplens.auditing.targets import Target

    if isinstance(subject, Target) or is_target_path(subject) or callable(subject):
        return True
    return any(hasattr(subject, name) for name in ("release", "randomise"))


def audit_subject(subject: Any) -> AuditSubject:
    """Say what ``subject`` is for an audit (the table above); a spec path is loaded here.

    Raises:
        ValueError: ``subject`` is none of a spec, a spec path, a mechanism or a target (named and echoed).
    """
    if isinstance(subject, str) and is_target_path(subject):
        return AuditSubject(kind=SubjectKind.TARGET, value=subject)
    spec = spec_of(subject)
    if spec is not None:
        return AuditSubject(kind=SubjectKind.SPEC, value=spec)
    if hasattr(subject, "sample") and hasattr(subject, "worst_case_pair"):
        return AuditSubject(kind=SubjectKind.MECHANISM, value=subject)
    if _is_target(subject):
        return AuditSubject(kind=SubjectKind.TARGET, value=subject)
    raise ValueError(f"subject must be a spec, a spec path, a mechanism or a callable target; got {subject!r}")


def _release_file(path: Path) -> tuple[tuple[Any, ...], str]:
    """A release's entries from a file: an ``Accountant.to_json`` ledger, a report's ``report.json``, or a spec."""
    from dplens._files import read_input_bytes
    from dplens.accountant.compose import Accountant

    raw = read_input_bytes(path, what="release file", max_bytes=_MAX_RELEASE_FILE_BYTES)
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


def _is_entries(source: Any) -> bool:
    return (
        isinstance(source, list | tuple) and bool(source) and all(isinstance(x, tuple) and len(x) == 2 for x in source)
    )


def release_entries(source: Any) -> tuple[tuple[tuple[Any, int], ...], str]:
    """The (event, count) entries a release spent and a short description of where they came from.

    ``source`` is an event, (event, count) entries, an ``Accountant``, a spec, an Opacus accountant, ``PrivacyEngine``,
    state dict or history (via :func:`dplens.from_opacus`), or a file: a spec, an ``Accountant.to_json`` ledger, or a
    compliance report's ``report.json`` (whose ``mechanism.ledger`` is such a ledger).

    Example:
        >>> from dplens import Gaussian
        >>> entries, where = release_entries([(Gaussian(noise_multiplier=2.0), 3)])
        >>> entries == ((Gaussian(noise_multiplier=2.0), 3),), where
        (True, 'entries')
    """
    from dplens.accountant import events as ev
    from dplens.accountant.compose import Accountant
    from dplens.spec import Spec

    if isinstance(source, ev.Event):
        return ((source, 1),), f"event {type(source).__name__}"
    if isinstance(source, Accountant):
        return source.ledger, "Accountant"
    if isinstance(source, str | os.PathLike):
        return _release_file(Path(source))
    if isinstance(source, Spec):
        return source.accountant().ledger, f"spec {source.source or '<dict>'}"
    if _is_entries(source):
        accountant = Accountant()
        for event, count in source:
            accountant.compose(event, count)
        return accountant.ledger, "entries"
    if hasattr(source, "history") or hasattr(source, "accountant") or isinstance(source, dict):
        from dplens.integrations.opacus_accountant import from_opacus

        return from_opacus(source).ledger, f"Opacus ({type(source).__name__})"
    raise ValueError(
        "a release must be an Event, (event, count) entries, an Accountant, a Spec, an Opacus accountant or "
        f"history, or a spec/ledger/report file; got {type(source).__name__}"
    )
