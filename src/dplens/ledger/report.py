"""The cumulative section a compliance report shows for a budget ledger (``dplens report SPEC --ledger DB``).

The ledger computes it (status and the spend after each release, by each budget's rule); the report layer only
renders the dict (:attr:`dplens.reports.model.Report.budget_ledger`).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ledger_section"]


#: The tuning studies a report's ledger section names (the count covers them all).
_STUDIES_SHOWN = 100


def ledger_section(location: str | os.PathLike, *, points: int = 30, timeout: float = 60.0) -> dict[str, Any]:
    """Every budget of the ledger at ``location``: target, spent and remaining per period, and the spent ε after up
    to ``points`` evenly spaced releases of each period (the figure of spend over time). Every ε is an upper bound;
    remaining is a lower bound.

    Example:
        >>> import dplens, pathlib, tempfile
        >>> from dplens.ledger import Ledger
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "l.db"
        >>> with Ledger.open(path, create=True) as book:
        ...     _ = book.create_budget(unit="one person", epsilon=1.0, delta=1e-6)
        ...     _ = book.charge(dplens.Gaussian(noise_multiplier=20.0), release="q1")
        >>> section = ledger_section(path)
        >>> section["budgets"][0]["periods"][0]["history"][0]["release"]
        'q1'
    """
    from dplens.ledger.core import Ledger
    from dplens.ledger.model import _num
    from dplens.ledger.rules import budget_rule

    path_is_file = "://" not in os.fspath(location)
    read_only = path_is_file and os.path.isfile(location) and not (os.stat(location).st_mode & 0o222)
    with Ledger.open(location, read_only=read_only, timeout=timeout) as ledger:
        status = ledger.status()
        budgets = []
        for item in status.budgets:
            budget = item.budget
            rule = budget_rule(budget)
            periods = []
            for period in item.periods:
                row = period.to_dict()
                row.pop("largest")
                row["largest"] = [r.to_dict() for r in period.largest]
                row["history"] = [
                    point | {"spent_epsilon": _num(point["spent_epsilon"])}
                    for point in ledger.spend_history(budget.name, period.period, points=points)
                ]
                periods.append(row)
            budgets.append(
                {
                    "name": budget.name,
                    "unit": budget.unit,
                    "neighbouring": budget.neighbouring,
                    "mode": budget.mode.value,
                    "rule": rule.kind,
                    "theorem": rule.theorem,
                    "target_epsilon": budget.target.epsilon,
                    "delta": budget.target.delta,
                    "rho": budget.target.rho,
                    "mu": budget.target.mu,
                    "period": budget.period.value,
                    "current_period": item.current_period,
                    "spent_epsilon": _num(item.spent_epsilon),
                    "remaining_epsilon": _num(item.remaining_epsilon),
                    "releases_count": len(item.releases),
                    "chargers": dict(item.chargers),
                    "periods": periods,
                    "tuning_studies": len(item.studies),  # releases that are tuning studies (issue 49)
                    "tuning_study_releases": {  # the first 100 of them, with their runs and distribution
                        name: [dict(r) for r in rows] for name, rows in list(item.studies.items())[:_STUDIES_SHOWN]
                    },
                }
            )
    return {
        "ledger": status.location,
        "schema_version": status.schema_version,
        "time_utc": status.time_utc,
        "is_upper_bound": True,
        "budgets": budgets,
    }
