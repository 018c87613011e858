"""A budget ledger's status in terms of attack risk (``dplens budget status --risk``): display only.

For each budget and period: what the releases charged so far allow an attacker (the largest membership-attack TPR
at each FPR and the largest advantage, upper bounds read off the trade-off curve by the accountant,
:func:`dplens.accountant.risk.attack_risk`), and what the whole budget allows once it is spent (the trade-off curve
of its (ε, δ) target, Dong, Roth, Su 2022 Prop. 2.5, or of its μ-GDP target). A planned budget's spend is the
composition of its period's releases (the tightest route); an adaptive budget's is the (ε, δ) its privacy filter
certifies, read as a trade-off curve (the filter guarantees no more). Nothing here charges or changes the ledger.

Example:
    >>> import dplens, pathlib, tempfile
    >>> from dplens.ledger import Ledger
    >>> with Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db", create=True) as book:
    ...     _ = book.create_budget(unit="one person", epsilon=2.0, delta=1e-6)
    ...     _ = book.charge(dplens.Gaussian(noise_multiplier=4.0), release="q1")
    ...     view = status_risk(book, book.status(), fprs=(0.01,))
    >>> period = view["budgets"][0]["periods"][0]
    >>> round(period["spent"]["tpr_upper"]["0.01"], 4), round(view["budgets"][0]["budget"]["tpr_upper"]["0.01"], 4)
    (0.0189, 0.0739)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["status_risk"]


def _compact(risk: Any) -> dict[str, Any]:
    data = risk.to_dict()
    keep = ("tpr_upper", "tpr_lower", "advantage_upper", "advantage_lower", "method", "details")
    return {key: data[key] for key in keep} | {"is_upper_bound": True}


def _ceiling(target: Any, fprs: Sequence[float]) -> Any:
    """What the budget's target allows when it is fully spent."""
    from dplens.accountant.compose import Accountant
    from dplens.accountant.events import Gaussian
    from dplens.accountant.risk import attack_risk, budget_risk

    if target.mu is not None and target.mu > 0:  # μ-GDP: the Gaussian mechanism with σ = 1/μ is exactly μ-GDP
        return attack_risk(Accountant().compose(Gaussian(noise_multiplier=1.0 / target.mu)), fprs=fprs, method="exact")
    return budget_risk(target.epsilon, target.delta, fprs=fprs)


def status_risk(ledger: Any, status: Any, *, fprs: Sequence[float] | None = None) -> dict[str, Any]:
    """Every budget of ``status`` (``Ledger.status()``) as attack risk: per period the spend so far, and the budget.

    Returns a JSON-ready dict: ``fprs`` and, per budget, ``budget`` (what the target allows) and ``periods`` (each
    with ``spent`` and the ``source`` of that number); every TPR and advantage is an upper bound.
    """
    from dplens.accountant.risk import DEFAULT_FPRS
    from dplens.ledger.rules import budget_rule

    fprs = tuple(DEFAULT_FPRS if fprs is None else fprs)
    budgets = []
    for item in status.budgets:
        rule = budget_rule(item.budget)
        risks = [(period.period, *rule.spent_risk(ledger, item.budget.name, period, fprs)) for period in item.periods]
        budgets.append(
            {
                "name": item.budget.name,
                "current_period": item.current_period,
                "budget": _compact(_ceiling(item.budget.target, fprs)),
                "periods": [{"period": p, "spent": _compact(spent), "source": src} for p, spent, src in risks],
            }
        )
    return {"fprs": list(fprs), "budgets": budgets}
