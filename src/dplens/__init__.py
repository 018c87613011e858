"""dplens: differential-privacy accounting, empirical auditing and compliance reports.

The public API is exported here lazily (PEP 562): ``import dplens`` loads neither numpy nor scipy, and each name
imports its module on first use.

Example:
    >>> import dplens
    >>> step = dplens.PoissonSampled(sampling_rate=256 / 60000, event=dplens.Gaussian(noise_multiplier=1.1))
    >>> accountant = dplens.Accountant().compose(step, count=14063)
    >>> round(accountant.epsilon(1e-5, method=dplens.Method.RDP), 4)
    2.5966
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dplens._version import __version__

# name → "module:attribute"; the module is imported on first access of the name.
_EXPORTS: dict[str, str] = {
    # accounting
    "Accountant": "dplens.accountant.compose:Accountant",
    "EpsilonResult": "dplens.accountant.compose:EpsilonResult",
    "Method": "dplens.accountant.compose:Method",
    "CalibrationResult": "dplens.accountant.calibrate:CalibrationResult",
    "RiskCalibrationResult": "dplens.accountant.calibrate:RiskCalibrationResult",
    "RiskTarget": "dplens.accountant.calibrate:RiskTarget",
    "AttackRisk": "dplens.accountant.risk:AttackRisk",
    "RdpConversion": "dplens.accountant.curves:RdpConversion",
    "RdpCurve": "dplens.accountant.curves:RdpCurve",
    "PrivacyProfile": "dplens.accountant.curves:PrivacyProfile",
    "TradeOff": "dplens.accountant.curves:TradeOff",
    "Zcdp": "dplens.accountant.curves:Zcdp",
    "Tcdp": "dplens.accountant.curves:Tcdp",
    "Gdp": "dplens.accountant.curves:Gdp",
    "dp_sgd_epsilon": "dplens.accountant.dp_sgd:dp_sgd_epsilon",
    "dp_sgd_noise_multiplier": "dplens.accountant.dp_sgd:dp_sgd_noise_multiplier",
    "DpSgdPrivacy": "dplens.accountant.dp_sgd:DpSgdPrivacy",
    "UserLevelRun": "dplens.accountant.user_level:UserLevelRun",
    "user_level_epsilon": "dplens.accountant.user_level:user_level_epsilon",
    "user_level_noise_multiplier": "dplens.accountant.user_level:user_level_noise_multiplier",
    "user_epsilons": "dplens.accountant.user_level:user_epsilons",
    "AdaptiveClipping": "dplens.accountant.adaptive_clipping:AdaptiveClipping",
    "tuning_epsilon": "dplens.accountant.tuning:tuning_epsilon",
    # events
    "Event": "dplens.accountant.events:Event",
    "NeighboringRelation": "dplens.accountant.events:NeighboringRelation",
    "NoOp": "dplens.accountant.events:NoOp",
    "NonPrivate": "dplens.accountant.events:NonPrivate",
    "Gaussian": "dplens.accountant.events:Gaussian",
    "Laplace": "dplens.accountant.events:Laplace",
    "RandomizedResponse": "dplens.accountant.events:RandomizedResponse",
    "PoissonSampled": "dplens.accountant.events:PoissonSampled",
    "SampledWithoutReplacement": "dplens.accountant.events:SampledWithoutReplacement",
    "SelfComposed": "dplens.accountant.events:SelfComposed",
    "ZcdpMechanism": "dplens.accountant.events:ZcdpMechanism",
    "MixtureOfGaussians": "dplens.accountant.events:MixtureOfGaussians",
    "SingleEpochTreeAggregation": "dplens.accountant.events:SingleEpochTreeAggregation",
    "TruncatedSubsampledGaussian": "dplens.accountant.events:TruncatedSubsampledGaussian",
    "ReplaceOneNoise": "dplens.accountant.events:ReplaceOneNoise",
    "DiscreteLaplace": "dplens.accountant.discrete:DiscreteLaplace",
    "DiscreteGaussian": "dplens.accountant.discrete:DiscreteGaussian",
    "ApproxDp": "dplens.accountant.approx_dp:ApproxDp",
    "GroupPrivacy": "dplens.accountant.group:GroupPrivacy",
    "ExponentialMechanism": "dplens.accountant.selection:ExponentialMechanism",
    "ReportNoisyMax": "dplens.accountant.selection:ReportNoisyMax",
    "PermuteAndFlip": "dplens.accountant.selection:PermuteAndFlip",
    "SelectionNoise": "dplens.accountant.selection:SelectionNoise",
    "RepeatAndSelect": "dplens.accountant.selection:RepeatAndSelect",
    "SampledWithReplacement": "dplens.accountant.with_replacement:SampledWithReplacement",
    "Composed": "dplens.accountant.events:Composed",
    "event_from_dict": "dplens.accountant.events:event_from_dict",
    "event_to_dict": "dplens.accountant.events:event_to_dict",
    "from_dp_accounting": "dplens.accountant.events:from_dp_accounting",
    "to_dp_accounting": "dplens.accountant.events:to_dp_accounting",
    # specs
    "Spec": "dplens.spec:Spec",
    "Claim": "dplens.spec:Claim",
    "load_spec": "dplens.spec:load_spec",
    "parse_spec": "dplens.spec:parse_spec",
    # top-level functions
    "calibrate": "dplens._api:calibrate",
    "attack_risk": "dplens._api:attack_risk",
    "audit": "dplens._api:audit",
    "sweep": "dplens._api:sweep",
    "check_dp_sgd": "dplens._api:check_dp_sgd",
    "SweepResult": "dplens.accountant.sweep:SweepResult",
    # audits
    "AuditResult": "dplens.auditing.games:AuditResult",
    "Verdict": "dplens.auditing.games:Verdict",
    "TargetAuditResult": "dplens.auditing.target_game:TargetAuditResult",
    "batched": "dplens.auditing.targets:batched",
    "audit_scores": "dplens.auditing.scores:audit_scores",
    "ScoresAuditResult": "dplens.auditing.scores:ScoresAuditResult",
    "OneRunAuditResult": "dplens.auditing.scores:OneRunAuditResult",
    "ScoreAuditor": "dplens.auditing.score_auditor:ScoreAuditor",
    # integrations (torch and opacus imported only where needed: the [torch] extra)
    "OpacusAccountant": "dplens.integrations.opacus_accountant:OpacusAccountant",
    "from_opacus": "dplens.integrations.opacus_accountant:from_opacus",
    # reports
    "build_report": "dplens.reports.build:build_report",
    "generate_report": "dplens._api:generate_report",
    "AuditMode": "dplens._api:AuditMode",
    "Report": "dplens.reports.model:Report",
}

__all__ = [
    "Accountant",
    "AdaptiveClipping",
    "ApproxDp",
    "AttackRisk",
    "AuditMode",
    "AuditResult",
    "CalibrationResult",
    "Claim",
    "Composed",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DpSgdPrivacy",
    "EpsilonResult",
    "Event",
    "ExponentialMechanism",
    "Gaussian",
    "Gdp",
    "GroupPrivacy",
    "Laplace",
    "Method",
    "MixtureOfGaussians",
    "NeighboringRelation",
    "NoOp",
    "NonPrivate",
    "OneRunAuditResult",
    "OpacusAccountant",
    "PermuteAndFlip",
    "PoissonSampled",
    "PrivacyProfile",
    "RandomizedResponse",
    "RdpConversion",
    "RdpCurve",
    "RepeatAndSelect",
    "ReplaceOneNoise",
    "Report",
    "ReportNoisyMax",
    "RiskCalibrationResult",
    "RiskTarget",
    "SampledWithReplacement",
    "SampledWithoutReplacement",
    "ScoreAuditor",
    "ScoresAuditResult",
    "SelectionNoise",
    "SelfComposed",
    "SingleEpochTreeAggregation",
    "Spec",
    "SweepResult",
    "TargetAuditResult",
    "Tcdp",
    "TradeOff",
    "TruncatedSubsampledGaussian",
    "UserLevelRun",
    "Verdict",
    "Zcdp",
    "ZcdpMechanism",
    "__version__",
    "attack_risk",
    "audit",
    "audit_scores",
    "batched",
    "build_report",
    "calibrate",
    "check_dp_sgd",
    "dp_sgd_epsilon",
    "dp_sgd_noise_multiplier",
    "event_from_dict",
    "event_to_dict",
    "from_dp_accounting",
    "from_opacus",
    "generate_report",
    "load_spec",
    "parse_spec",
    "sweep",
    "to_dp_accounting",
    "tuning_epsilon",
    "user_epsilons",
    "user_level_epsilon",
    "user_level_noise_multiplier",
]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'dplens' has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value  # later accesses skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from dplens._api import AuditMode, attack_risk, audit, calibrate, check_dp_sgd, generate_report, sweep
    from dplens.accountant.adaptive_clipping import AdaptiveClipping
    from dplens.accountant.approx_dp import ApproxDp
    from dplens.accountant.calibrate import CalibrationResult, RiskCalibrationResult, RiskTarget
    from dplens.accountant.compose import Accountant, EpsilonResult, Method
    from dplens.accountant.curves import Gdp, PrivacyProfile, RdpConversion, RdpCurve, Tcdp, TradeOff, Zcdp
    from dplens.accountant.discrete import DiscreteGaussian, DiscreteLaplace
    from dplens.accountant.dp_sgd import DpSgdPrivacy, dp_sgd_epsilon, dp_sgd_noise_multiplier
    from dplens.accountant.events import (
        Composed,
        Event,
        Gaussian,
        Laplace,
        MixtureOfGaussians,
        NeighboringRelation,
        NonPrivate,
        NoOp,
        PoissonSampled,
        RandomizedResponse,
        ReplaceOneNoise,
        SampledWithoutReplacement,
        SelfComposed,
        SingleEpochTreeAggregation,
        TruncatedSubsampledGaussian,
        ZcdpMechanism,
        event_from_dict,
        event_to_dict,
        from_dp_accounting,
        to_dp_accounting,
    )
    from dplens.accountant.group import GroupPrivacy
    from dplens.accountant.risk import AttackRisk
    from dplens.accountant.selection import (
        ExponentialMechanism,
        PermuteAndFlip,
        RepeatAndSelect,
        ReportNoisyMax,
        SelectionNoise,
    )
    from dplens.accountant.sweep import SweepResult
    from dplens.accountant.tuning import tuning_epsilon
    from dplens.accountant.user_level import (
        UserLevelRun,
        user_epsilons,
        user_level_epsilon,
        user_level_noise_multiplier,
    )
    from dplens.accountant.with_replacement import SampledWithReplacement
    from dplens.auditing.games import AuditResult, Verdict
    from dplens.auditing.score_auditor import ScoreAuditor
    from dplens.auditing.scores import OneRunAuditResult, ScoresAuditResult, audit_scores
    from dplens.auditing.target_game import TargetAuditResult
    from dplens.auditing.targets import batched
    from dplens.integrations.opacus_accountant import OpacusAccountant, from_opacus
    from dplens.reports.build import build_report
    from dplens.reports.model import Report
    from dplens.spec import Claim, Spec, load_spec, parse_spec
