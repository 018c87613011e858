"""The five research mechanisms of the seed papers, each a plug-in of the core in one folder.

Each folder holds the mechanism's events and accounting (``accounting.py``), its runnable sampler
(``mechanism.py``) and the reproduction of the paper's results (``reproduction.py``):

- ``gaussmix``: the Gaussian mixing mechanism (seed 004, Lev et al.), RDP φ(α), exact χ² profile, Theorem 1.
- ``feature_dp``: feature-level DP with the subsampled Gaussian (seed 003, Mahloujifar et al.).
- ``corrdp``: correlation-aware DP with per-coordinate noise (seed 000, Wang, Zhang, Cummings).
- ``bcdp``: Bayesian coordinate DP (seed 002, Aliakbarpour et al.).
- ``dp_ftrl``: correlated-noise ν-DP-FTRL (seed 001, Choquette-Choo et al.).

The declarations below name modules as strings (:class:`~dplens.accountant.plugins.Plugin`): nothing is imported
until a spec, a ledger or an audit uses one of a plug-in's types.
"""

from __future__ import annotations

from dplens.accountant.plugins import Plugin

PLUGINS = (
    Plugin(
        name="gaussmix",
        accounting="dplens.research.gaussmix.accounting",
        events=("GaussMix", "ModifiedGaussMix"),
        spec_types=("gaussmix", "modified_gaussmix"),
        audit_mechanisms={"GaussMix": "dplens.research.gaussmix.mechanism:audit_mechanism"},
        reproduction=("gaussmix", "dplens.research.gaussmix.reproduction"),
    ),
    Plugin(
        name="feature_dp",
        accounting="dplens.research.feature_dp.accounting",
        events=("FeatureDpSgd",),
        spec_types=("feature_dp_sgd",),
        audit_mechanisms={"FeatureDpSgd": "dplens.research.feature_dp.mechanism:audit_mechanism"},
        reproduction=("feature-dp", "dplens.research.feature_dp.reproduction"),
        attribute_inference="dplens.research.feature_dp.accounting",
    ),
    Plugin(
        name="corrdp",
        accounting="dplens.research.corrdp.accounting",
        events=("CorrDpLaplace",),
        spec_types=("corrdp_laplace",),
        audit_mechanisms={"CorrDpLaplace": "dplens.research.corrdp.mechanism:audit_mechanism"},
        reproduction=("corrdp", "dplens.research.corrdp.reproduction"),
    ),
    Plugin(
        name="bcdp",
        accounting="dplens.research.bcdp.accounting",
        events=("CoordinateDpRelease",),
        spec_types=("bcdp_mean", "coordinate_dp_release"),
        reproduction=("bcdp", "dplens.research.bcdp.reproduction"),
    ),
    Plugin(
        name="dp_ftrl",
        accounting="dplens.research.dp_ftrl.accounting",
        events=("DpFtrl",),
        spec_types=("dp_ftrl",),
        audit_mechanisms={"DpFtrl": "dplens.research.dp_ftrl.mechanism:audit_mechanism"},
        reproduction=("dp-ftrl", "dplens.research.dp_ftrl.reproduction"),
    ),
)
