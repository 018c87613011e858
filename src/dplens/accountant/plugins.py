"""Plug-ins: mechanisms outside the core that register their events, spec types, audit mechanisms and reproductions.

The core (events, curves, RDP, PLD, composition, calibration) knows no plug-in by name. A plug-in package exports
``PLUGINS``, a tuple of :class:`Plugin` declarations that name its modules as strings, so declaring costs no import:
a plug-in's modules (and their numpy/scipy) are imported only when a spec, a ledger or an audit uses one of its
types. On import, a plug-in's ``accounting`` module registers its events (:func:`dplens.accountant.events.
register_event`) and its interpreters on the core's ``singledispatch`` functions (``rdp.rdp_curve``,
``pld.privacy_profile``).

Hooks the auditing layer asks for by kind, never by plug-in name: :func:`audit_mechanism_builder` (the runnable
mechanism of a plug-in event) and :func:`attribute_inference_bounds` (the success bounds an attribute-inference audit
compares its attack with: feature DP's Theorem 4).

dplens's own research mechanisms are the plug-ins of :mod:`dplens.research`; another package can add its own by
appending its name to :data:`PLUGIN_PACKAGES`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = [
    "PLUGIN_PACKAGES",
    "Plugin",
    "attribute_inference_bounds",
    "audit_mechanism_builder",
    "import_accounting_modules",
    "load_event_type",
    "plugins",
    "reproductions",
    "spec_type_builder",
    "spec_type_names",
]

#: Packages whose ``PLUGINS`` are read (in order).
PLUGIN_PACKAGES: list[str] = ["dplens.research"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plugin:
    """One plug-in: where its pieces live, named lazily.

    Args:
        name: a short name (``"gaussmix"``).
        accounting: the module defining the plug-in's events, spec builders (``SPEC_TYPES``) and interpreters.
        events: the class names of its events (for :func:`~dplens.accountant.events.event_from_dict`).
        spec_types: the spec ``type`` names its ``SPEC_TYPES`` builds.
        audit_mechanisms: event class name → ``"module:function"``; ``function(event, count)`` returns the runnable
            mechanism an audit of ``count`` runs of the event uses.
        reproduction: ``(name, module)`` of its ``dplens reproduce`` entry (``module.run(out_dir, *, quick)``).
        attribute_inference: the module holding the attribute-inference success bounds the attribute audit uses
            (:func:`attribute_inference_bounds`): ``baseline_success(prior)`` and the maximum success an (ε, δ),
            μ-GDP or privacy-profile claim allows against a baseline, ``attribute_inference_bound_dp(*, epsilon,
            delta, baseline)``, ``attribute_inference_bound_gdp(*, mu, baseline)`` and
            ``attribute_inference_bound_profile(profile, *, baseline)``.
    """

    name: str
    accounting: str
    events: tuple[str, ...] = ()
    spec_types: tuple[str, ...] = ()
    audit_mechanisms: dict[str, str] = field(default_factory=dict)
    reproduction: tuple[str, str] | None = None
    attribute_inference: str | None = None


def plugins() -> tuple[Plugin, ...]:
    """Every declared plug-in, in :data:`PLUGIN_PACKAGES` order (declarations only: nothing heavy is imported)."""
    found: list[Plugin] = []
    for package in PLUGIN_PACKAGES:
        found.extend(getattr(importlib.import_module(package), "PLUGINS", ()))
    return tuple(found)


def _import(name: str) -> ModuleType:
    return importlib.import_module(name)


def load_event_type(name: str) -> bool:
    """Import the plug-in that declares event class ``name`` (registering it); False if no plug-in does."""
    for plugin in plugins():
        if name in plugin.events:
            _import(plugin.accounting)
            return True
    return False


def import_accounting_modules() -> list[ModuleType]:
    """Import every plug-in's accounting module (registering all their events); returns the modules."""
    return [_import(plugin.accounting) for plugin in plugins()]


def spec_type_names() -> list[str]:
    """The spec types the plug-ins declare."""
    return [name for plugin in plugins() for name in plugin.spec_types]


def spec_type_builder(type_name: str) -> Any | None:
    """The builder of plug-in spec type ``type_name`` (its accounting module imported), or None."""
    for plugin in plugins():
        if type_name in plugin.spec_types:
            module = _import(plugin.accounting)
            builders = getattr(module, "SPEC_TYPES", {})
            if type_name not in builders:
                raise ValueError(f"plug-in {plugin.name!r} declares spec type {type_name!r} but does not build it")
            return builders[type_name]
    return None


def audit_mechanism_builder(event_type_name: str) -> Any | None:
    """``function(event, count)`` giving the runnable mechanism of a plug-in event for audits, or None."""
    for plugin in plugins():
        target = plugin.audit_mechanisms.get(event_type_name)
        if target is not None:
            module_name, _, attribute = target.partition(":")
            return getattr(_import(module_name), attribute)
    return None


def attribute_inference_bounds() -> ModuleType:
    """The module of the first plug-in declaring ``attribute_inference`` (imported), for the attribute audit."""
    for plugin in plugins():
        if plugin.attribute_inference is not None:
            return _import(plugin.attribute_inference)
    raise LookupError(
        f"no plug-in declares attribute_inference bounds (plug-in packages: {PLUGIN_PACKAGES!r}); the attribute "
        "audit needs one"
    )


def reproductions() -> dict[str, str]:
    """``dplens reproduce`` name → module, for every plug-in with a reproduction."""
    return {plugin.reproduction[0]: plugin.reproduction[1] for plugin in plugins() if plugin.reproduction}
