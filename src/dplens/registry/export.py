"""What a DP Deployments Registry record states beyond a report, computed below the report layer.

The privacy quantities a record states beyond the report's are computed here, by the accountant (the report layer
computes none): ρ of the composition when it is ρ-zCDP; and the ``[deployment]`` table a record is built from.
:func:`dplens.reports.registry_entry.export_entry` then renders the record from the report (the record builder reads
the report, so it lives in the report layer, above this package), validates it against dplens's schema
(:mod:`dplens.registry.schema`) and :func:`~dplens.reports.registry_entry.write_entry` writes it atomically.

Example:
    >>> import dplens
    >>> spec = dplens.parse_spec({"mechanism": [{"type": "gaussian", "noise_multiplier": 2.0, "count": 4}]})
    >>> report = dplens.build_report(spec=spec, accounting=spec.accountant().summary(1e-5), title="Counts",
    ...                              not_audited_reason="example")
    >>> composed_rho(report.mechanism.ledger)  # four Gaussians with sigma = 2: rho = 4 / (2 * 2^2), exactly
    0.5
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dplens.registry.deployment import Deployment, merge_deployment_tables, parse_deployment

__all__ = ["composed_rho", "resolve_deployment"]


def _event_rho(event: Any) -> Fraction | None:
    """ρ of one event, exactly (as a fraction of its float parameters), if it is ρ-zCDP by a closed form; else None.

    A Gaussian with noise multiplier σ (noise / sensitivity) is 1/(2σ²)-zCDP (Bun & Steinke 2016, arXiv 1605.02065,
    Prop. 1.6); a discrete Gaussian with scale σ on a query of ℓ2-sensitivity Δ is Δ²/(2σ²)-zCDP (Canonne, Kamath,
    Steinke 2020, arXiv 2004.00010, Thm. 14); a ``ZcdpMechanism`` with ξ = 0 states its ρ; self-composition multiplies
    and composition adds ρ (Bun & Steinke 2016, Lemma 1.7).
    """
    from dplens.accountant import events as ev
    from dplens.accountant.discrete import DiscreteGaussian

    match event:
        case ev.Gaussian():
            return 1 / (2 * Fraction(event.noise_multiplier) ** 2)
        case DiscreteGaussian():
            return Fraction(event.sensitivity) ** 2 / (2 * Fraction(event.sigma) ** 2)
        case ev.ZcdpMechanism() if event.xi == 0:
            return Fraction(event.rho)
        case ev.NoOp():
            return Fraction(0)
        case ev.SelfComposed():
            inner = _event_rho(event.event)
            return None if inner is None else inner * event.count
        case ev.Composed():
            parts = [_event_rho(e) for e in event.events]
            return None if any(p is None for p in parts) else sum(parts, Fraction(0))
    return None


def composed_rho(ledger: Mapping[str, Any]) -> float | None:
    """ρ of a ledger (``Accountant.to_json`` form, as a report records it) when every event is ρ-zCDP by a closed
    form; None otherwise (e.g. subsampled mechanisms, whose zCDP bound is not their best description). Summed
    exactly and returned as the nearest float at or above the exact value (an upper bound with no rounding error)."""
    from dplens.accountant.compose import Accountant

    if not ledger or not ledger.get("entries"):
        return None
    accountant = Accountant.from_json(json.dumps(dict(ledger)))
    total = Fraction(0)
    for event, count in accountant.ledger:
        rho = _event_rho(event)
        if rho is None:
            return None
        total += rho * count
    value = float(total)
    return value if Fraction(value) >= total else math.nextafter(value, math.inf)


def resolve_deployment(report: Any, override: Mapping[str, Any] | None = None) -> Deployment:
    """The report's ``[deployment]`` table with ``override``'s keys on top (e.g. ``--deployment FILE``), validated.

    Raises:
        ValueError: neither gives a table ("the report has no [deployment] table…"), or a key is invalid.
    """
    recorded = getattr(report, "deployment", None)
    if recorded is None and not override:
        raise ValueError(
            "the report has no [deployment] table: a registry record needs name, data_curators, description, "
            "intended_use, data_product_type, data_product_region and publication_date (add [deployment] to the spec "
            "or give --deployment FILE)"
        )
    return parse_deployment(merge_deployment_tables(recorded, override))
