"""The report's NIST SP 800-226 section: each layer of the "differential privacy pyramid" and each privacy hazard,
with what dplens can honestly say about it.

NIST SP 800-226, *Guidelines for Evaluating Differential Privacy Guarantees* (Near, Darais, Lefkovitz, Howarth;
March 2025; doi 10.6028/NIST.SP.800-226) evaluates a DP claim as a pyramid: the privacy parameters (ε, δ and the
variant) on top, resting on the unit of privacy, then the algorithms and their correctness (and bias), then the
implementation (floating-point arithmetic, side channels such as timing), then the deployment's security, access
control, trust model and data collection exposure at the base; each layer is only as good as those below it. Along
the way it names *privacy hazards*: common pitfalls.

Every item gets one status, never more than the facts support:

- ``shown`` — shown by this report, and where (the accountant's certificate, the audit, a float check);
- ``declared`` — declared by the author (the spec's ``[deployment]`` table, ``--unit``), not checked by dplens;
- ``not_assessed`` — not assessed by dplens (e.g. timing side channels, access control);
- ``flagged`` — a hazard the facts show (a large ε, δ not well below 1/n, a record-level unit where a person may
  hold many records, a claim the accountant does not certify, an audit that refutes it).

The thresholds of the detectable hazards are dplens's (SP 800-226 sets no universal value):
:data:`LARGE_EPSILON` and :data:`DELTA_FACTOR`. The section classifies finished facts; it computes no privacy
quantity. Items cite the publication by the topic heading they answer (the privacy parameter ε, variants of DP,
the unit of privacy, algorithms, bias, floating point, timing side channels, security and access control, trust
models, data collection exposure), not by section number: the numbering was not checked against the publication's
text.

Example:
    >>> evaluation = evaluate_nist(
    ...     claim={"definition": "approx-DP", "epsilon": 12.0, "delta": 1e-5, "certified_by_accountant": True,
    ...            "privacy_unit": "one user", "neighbouring": "add_remove",
    ...            "neighbouring_description": "data sets that differ by adding or removing one user"},
    ...     accounting={"epsilon": 11.9, "delta": 1e-5, "tightest": "pld"},
    ...     deployment={"dataset_size": 1000}, unit_given=True)
    >>> evaluation.item("large_epsilon").status, evaluation.item("delta_vs_n").status
    (<NistStatus.FLAGGED: 'flagged'>, <NistStatus.SHOWN: 'shown'>)
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dplens._numbers import fmt_upper, from_json_number

__all__ = [
    "DELTA_FACTOR",
    "LARGE_EPSILON",
    "NIST_PUBLICATION",
    "NistEvaluation",
    "NistItem",
    "NistStatus",
    "evaluate_nist",
    "ledger_summary",
]

#: The publication, as the report cites it.
NIST_PUBLICATION = (
    "NIST SP 800-226, Guidelines for Evaluating Differential Privacy Guarantees (March 2025), "
    "doi 10.6028/NIST.SP.800-226"
)
#: ε above which the "large ε" hazard is flagged (e^10 ≈ 22 000: an output may be that many times likelier with a
#: person's data than without). A dplens threshold: SP 800-226 gives no universal value.
LARGE_EPSILON = 10.0
#: δ is "well below 1/n" when δ ≤ DELTA_FACTOR / n (n: the number of units in the data, when known). A dplens
#: threshold; δ ≥ 1/n is flagged separately (a mechanism publishing one random record in full is (0, 1/n)-DP).
DELTA_FACTOR = 0.1

_SECTIONS = {
    "epsilon": "'The privacy parameter ε' (top of the pyramid)",
    "variants": "'Variants of differential privacy' (top of the pyramid)",
    "unit": "'The unit of privacy' (top of the pyramid)",
    "algorithms": "'Differentially private algorithms' (algorithms layer)",
    "ml": "'Differentially private algorithms': machine learning (algorithms layer)",
    "bias": "'Bias' (systemic, human and statistical bias)",
    "floats": "'Floating-point arithmetic' (implementation layer)",
    "side_channels": "'Timing side channels' (implementation layer)",
    "security": "'Security and access control' (deployment layer)",
    "trust": "'Trust models' (local and central models; deployment layer)",
    "collection": "'Data collection exposure' (base of the pyramid)",
    "composition": "'Composition and the privacy budget' (top of the pyramid)",
}
# dplens's default unit (dplens.reports.defaults.DEFAULT_PRIVACY_UNIT) is a record
_SUB_PERSON = re.compile(
    r"\b(records?|rows?|examples?|events?|transactions?|visits?|trips?|items?|samples?|quer(?:y|ies)|"
    r"contributions?|observations?|tuples?|days?|weeks?|months?|quarters?|years?|hours?|sessions?|"
    r"aggregate(?:-level)?)\b",
    re.IGNORECASE,
)
_PERSON = re.compile(
    r"\b(persons?|people|individuals?|users?|patients?|households?|accounts?|devices?|customers?|respondents?|"
    r"employees?|students?|members?|subjects?|businesses|business|establishments?|births?|housing)\b",
    re.IGNORECASE,
)
_TRAINING_TYPES = frozenset(
    {
        "dp_sgd",
        "random_allocation",
        "dp_sgd_training",
        "poisson_subsampled_gaussian",
        "feature_dp_sgd",
        "dp_ftrl",
        "truncated_subsampled_gaussian",
        "sampled_without_replacement_gaussian",
        "sampled_with_replacement_gaussian",
        "single_epoch_tree_aggregation",
    }
)


# Training types whose accounting assumes Poisson sampling without saying which sampler ran.
_POISSON_TYPES = frozenset({"dp_sgd_training", "poisson_subsampled_gaussian", "feature_dp_sgd"})


class NistStatus(enum.Enum):
    """What the report can say about an item of SP 800-226."""

    SHOWN = "shown"
    DECLARED = "declared"
    NOT_ASSESSED = "not_assessed"
    FLAGGED = "flagged"

    @property
    def label(self) -> str:
        return {
            NistStatus.SHOWN: "shown by this report",
            NistStatus.DECLARED: "declared by the author",
            NistStatus.NOT_ASSESSED: "not assessed by dplens",
            NistStatus.FLAGGED: "hazard flagged",
        }[self]


@dataclass(frozen=True, slots=True, kw_only=True)
class NistItem:
    """One layer of the pyramid or one hazard: its status, where the report shows it, and the finding in words."""

    key: str
    kind: str  # "layer" | "hazard"
    title: str
    section: str
    status: NistStatus
    finding: str
    where: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "title": self.title,
            "section": self.section,
            "status": self.status.value,
            "status_label": self.status.label,
            "finding": self.finding,
            "where": self.where,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NistItem:
        return cls(
            key=data["key"],
            kind=data["kind"],
            title=data["title"],
            section=data["section"],
            status=NistStatus(data["status"]),
            finding=data["finding"],
            where=data.get("where", ""),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class NistEvaluation:
    """The NIST SP 800-226 section: the pyramid's layers (top first), then the hazards."""

    items: tuple[NistItem, ...]
    publication: str = NIST_PUBLICATION
    thresholds: dict[str, float] = field(default_factory=dict)

    def item(self, key: str) -> NistItem:
        """The item named ``key`` (``KeyError`` if none)."""
        for item in self.items:
            if item.key == key:
                return item
        raise KeyError(key)

    @property
    def layers(self) -> tuple[NistItem, ...]:
        return tuple(i for i in self.items if i.kind == "layer")

    @property
    def hazards(self) -> tuple[NistItem, ...]:
        return tuple(i for i in self.items if i.kind == "hazard")

    @property
    def flagged(self) -> tuple[NistItem, ...]:
        return tuple(i for i in self.items if i.status is NistStatus.FLAGGED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "publication": self.publication,
            "thresholds": dict(self.thresholds),
            "items": [i.to_dict() for i in self.items],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NistEvaluation:
        return cls(
            items=tuple(NistItem.from_dict(i) for i in data["items"]),
            publication=data["publication"],
            thresholds={k: float(v) for k, v in data["thresholds"].items()},
        )


# --------------------------------------------------------------------------------------------
# The facts
# --------------------------------------------------------------------------------------------


def _unit_level(text: str) -> str:
    """'sub-person' (a record, an event, a user-day: one person may hold many), 'person', or 'unknown'."""
    if _SUB_PERSON.search(text):
        return "sub-person"
    if _PERSON.search(text):
        return "person"
    return "unknown"


def _dataset_size(components: Sequence[Mapping[str, Any]], deployment: Mapping[str, Any]) -> int | None:
    size = deployment.get("dataset_size")
    if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
        return size
    sizes = [c["dataset_size"] for c in components if isinstance(c.get("dataset_size"), int) and c["dataset_size"] > 0]
    return max(sizes) if sizes else None


def _is_training(components: Sequence[Mapping[str, Any]], deployment: Mapping[str, Any]) -> bool:
    return deployment.get("data_product_type") == "Machine learning model" or any(
        c.get("type") in _TRAINING_TYPES for c in components
    )


def _flatten(components: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The components with the runs inside wrappers (``repeat_and_select``, ``group_privacy``) beside them."""
    out: list[Mapping[str, Any]] = []
    for component in components:
        out.append(component)
        inner = component.get("mechanism")
        if component.get("type") in ("repeat_and_select", "group_privacy") and isinstance(inner, Mapping):
            out += _flatten([inner])
    return out


def _declared(deployment: Mapping[str, Any], key: str) -> str | None:
    value = deployment.get(key)
    return value if isinstance(value, str) and value.strip() else None


def _float_evidence(additional: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out = []
    for extra in additional:
        result = extra.get("result", {})
        if isinstance(result, Mapping):
            out += [e for e in result.get("float_evidence", ()) if isinstance(e, Mapping)]
    return out


# --------------------------------------------------------------------------------------------
# The items
# --------------------------------------------------------------------------------------------


# Each item's kind, title and NIST topic heading, in the order the section lists them (layers top first, then
# hazards); the functions below decide each item's status and finding.
_ITEMS: dict[str, tuple[str, str, str]] = {
    "privacy_parameters": (
        "layer",
        "Privacy parameters (ε, δ) and the DP variant",
        f"{_SECTIONS['epsilon']}; {_SECTIONS['variants']}",
    ),
    "neighbouring_relation": ("layer", "Unit of privacy: which data sets are neighbours", _SECTIONS["unit"]),
    "unit_of_privacy": ("layer", "Unit of privacy: what one unit is in the world", _SECTIONS["unit"]),
    "algorithm_analysis": ("layer", "Algorithms: the privacy analysis of the mechanisms", _SECTIONS["algorithms"]),
    "batch_sampling": ("layer", "Machine learning: the batch sampler the training's ε assumes", _SECTIONS["ml"]),
    "algorithm_test": ("layer", "Correctness: an empirical test of the mechanism", _SECTIONS["algorithms"]),
    "bias": ("layer", "Bias and utility of the released outputs", _SECTIONS["bias"]),
    "floating_point": ("layer", "Implementation: floating-point arithmetic", _SECTIONS["floats"]),
    "side_channels": ("layer", "Implementation: timing and other side channels", _SECTIONS["side_channels"]),
    "security": ("layer", "Security and access control of the raw data", _SECTIONS["security"]),
    "trust_model": ("layer", "Trust model", _SECTIONS["trust"]),
    "data_collection": ("layer", "Data collection exposure", _SECTIONS["collection"]),
    "large_epsilon": ("hazard", "A large ε", _SECTIONS["epsilon"]),
    "delta_vs_n": ("hazard", "δ not well below 1/n", _SECTIONS["variants"]),
    "delta_exceeds_n": (
        "hazard",
        "An approximate-DP claim whose δ allows publishing a record in full (δ ≥ 1/n)",
        _SECTIONS["variants"],
    ),
    "unit_contributions": ("hazard", "A record-level unit where one person may hold many records", _SECTIONS["unit"]),
    "releases_over_time": ("hazard", "Releases over time: privacy loss across releases", _SECTIONS["composition"]),
    "preprocessing": (  # a training's is under machine learning (_SECTIONS["ml"])
        "hazard",
        "Data-dependent pre-processing and hyperparameter tuning outside the accounting",
        _SECTIONS["algorithms"],
    ),
}


def _item(key: str, status: NistStatus, finding: str, where: str = "", *, section: str | None = None) -> NistItem:
    """The item ``key`` of :data:`_ITEMS` with its status, finding and where the report shows it."""
    kind, title, heading = _ITEMS[key]
    return NistItem(
        key=key, kind=kind, title=title, section=section or heading, status=status, finding=finding, where=where
    )


def _risk_words(accounting: Mapping[str, Any]) -> str:
    """The accountant's attack risk in one clause (empty without one): what ε means for a membership attack."""
    from dplens.reports.risk_card import short_risk

    risk = accounting.get("attack_risk")
    return f"; in terms of attacks: {short_risk(risk)}" if risk else ""


def _parameters(claim: Mapping[str, Any], accounting: Mapping[str, Any]) -> NistItem:
    certificate = (
        f"the accountant certifies ε ≤ {fmt_upper(accounting['epsilon'])} at δ = {accounting['delta']:g} "
        f"(an upper bound; tightest route: {accounting['tightest']}){_risk_words(accounting)}"
    )
    sections = "Claim, Attack risk and Accounting" if accounting.get("attack_risk") else "Claim and Accounting"
    where = f"{sections} sections (the accountant's certificate)"
    claimed = (
        f"the claim is {claim['definition']} with ε = {fmt_upper(claim.get('epsilon'))}, "
        f"δ = {claim.get('delta') or 0:g}"
    )
    if claim.get("certified_by_accountant") is False:
        finding = f"{claimed}, which the accountant does NOT certify: {certificate}."
        return _item("privacy_parameters", NistStatus.FLAGGED, finding, where)
    return _item("privacy_parameters", NistStatus.SHOWN, f"{claimed}; {certificate}.", where)


def _relation(claim: Mapping[str, Any]) -> NistItem:
    finding = (
        f"the accounting is under {claim['neighbouring']} adjacency: {claim['neighbouring_description']}; the "
        "same noise gives a different ε under another relation."
    )
    where = "Accounting section (the neighbouring relation of the composed events)"
    return _item("neighbouring_relation", NistStatus.SHOWN, finding, where)


def _unit(
    claim: Mapping[str, Any], deployment: Mapping[str, Any], unit_given: bool, scope: Mapping[str, Any] | None = None
) -> NistItem:
    label = _declared(deployment, "privacy_unit")
    said = "; ".join(dict.fromkeys(t for t in (claim["privacy_unit"] if unit_given else None, label) if t))
    accounted = None if scope is None else scope.get("unit")
    if accounted is not None:
        one_each = deployment.get("records_per_person") == 1
        return _unit_accounted(claim, said, accounted, scope, one_each=one_each)
    if unit_given or label:
        return _item(
            "unit_of_privacy",
            NistStatus.DECLARED,
            f"the author states the unit as: {said}. dplens cannot check what one unit is in the data.",
            "spec [deployment] privacy_unit / dplens report --unit",
        )
    finding = (
        f"no unit was stated: the report assumes '{claim['privacy_unit']}' (state it with --unit or "
        "[deployment] privacy_unit)."
    )
    return _item("unit_of_privacy", NistStatus.NOT_ASSESSED, finding)


def _unit_accounted(
    claim: Mapping[str, Any], said: str, accounted: str, scope: Mapping[str, Any], *, one_each: bool = False
) -> NistItem:
    """The unit the DP-SGD tables are accounted for (issue 49): shown; flagged when the author states a person-level
    unit for an example-level ε (a user-level claim must never rest on the per-example number)."""
    where = "Privacy unit and tuning section (the spec's dp_sgd privacy_unit, accounted)"
    stated = f" The author states the unit as: {said}." if said else ""
    if accounted == "user":
        finding = f"the ε is accounted for {scope['unit_words']} (dp_sgd privacy_unit = 'user').{stated}"
        return _item("unit_of_privacy", NistStatus.SHOWN, finding, where)
    if said and _unit_level(said) == "person" and not one_each:
        finding = (
            f"the unit is stated as '{said}', but the DP-SGD ε is accounted for one training example: it is NOT a "
            "guarantee for a person who contributes several examples (state privacy_unit = 'user' with "
            "max_examples_per_user, or user_sampling with users; max_examples_per_user = 1 if each holds one)."
        )
        return _item("unit_of_privacy", NistStatus.FLAGGED, finding, where)
    mixed = " (the spec mixes user- and example-level tables)" if scope.get("mixed") else ""
    each = " The author declares one example per person ([deployment] records_per_person = 1)." if one_each else ""
    finding = f"the DP-SGD ε is accounted for one training example{mixed}.{stated}{each}"
    return _item("unit_of_privacy", NistStatus.SHOWN, finding, where)


def _analysis(components: Sequence[Mapping[str, Any]], accounting: Mapping[str, Any]) -> NistItem:
    finding = (
        f"the {len(components)} mechanism component(s) described in the spec are accounted by dplens's routes "
        f"(tightest: {accounting['tightest']}); dplens does not check that the deployed code implements this "
        "description."
    )
    return _item("algorithm_analysis", NistStatus.SHOWN, finding, "Mechanism and Accounting sections")


def _sampling(components: Sequence[Mapping[str, Any]]) -> NistItem:
    """Machine learning: the batch sampler the ε is accounted for (it can change ε many times over)."""
    where = "Mechanism section (sampling assumption)"
    stated = sorted({str(c.get("sampling", "poisson")) for c in components if c.get("type") == "dp_sgd"})
    stated += ["random allocation"] if any(c.get("type") == "random_allocation" for c in components) else []
    assumed = sorted({str(c.get("type")) for c in components if c.get("type") in _POISSON_TYPES})
    if assumed:
        finding = (
            f"the training ({', '.join(assumed)}) is accounted for Poisson sampling; the ε does not hold for a "
            "training that shuffled fixed-size batches or used another sampler (Chua et al. 2024) — state the "
            "sampler that ran (a dp_sgd mechanism with sampling = …)."
        )
        return _item("batch_sampling", NistStatus.FLAGGED, finding, where)
    finding = (
        f"the training's batches are drawn by {', '.join(stated)} sampling and ε is accounted for that sampler "
        "(an upper bound; the lower end is certified where the sampler's pair is attained, else the best known "
        "attack's)."
    )
    return _item("batch_sampling", NistStatus.SHOWN, finding, where)


def _test(
    audit: Mapping[str, Any] | None, additional: Sequence[Mapping[str, Any]], not_audited: str | None
) -> NistItem:
    verdicts = ([audit["verdict"]] if audit else []) + [a.get("verdict") for a in additional]
    if "VIOLATION" in verdicts:
        return _item(
            "algorithm_test",
            NistStatus.FLAGGED,
            "an audit gives a valid lower bound on ε above the claim: the mechanism leaks more than claimed.",
            "Audit evidence section",
        )
    if audit is not None and audit["verdict"] == "CONSISTENT":
        finding = (
            f"the audit ({audit['trials']} trials per side) found no evidence against the claim: ε ≥ "
            f"{audit['epsilon_lower_bound']:.4g} at {audit['confidence']:.0%} confidence. It tests dplens's "
            "implementation of the spec's mechanisms, not the deployed code, and cannot prove a claim."
        )
        return _item("algorithm_test", NistStatus.SHOWN, finding, "Audit evidence section")
    if "CONSISTENT" in verdicts:
        return _item(
            "algorithm_test",
            NistStatus.SHOWN,
            "the additional audit(s) found no evidence against the claim (see their sections).",
            "additional audit sections",
        )
    reason = (
        "the audit was inconclusive (too few trials for this claim)" if verdicts else f"not audited ({not_audited})"
    )
    return _item("algorithm_test", NistStatus.NOT_ASSESSED, f"{reason}.")


def _implementation_words(section: Mapping[str, Any]) -> str:
    counts = {v: sum(c["verdict"] == v for c in section["checks"]) for v in ("PASS", "DEVIATION", "VIOLATION")}
    excluded = [c["name"] for c in section["checks"] if c.get("excluded_from_overall")]
    uncounted = f"; not counted, under an assumption the user stated: {', '.join(excluded)}" if excluded else ""
    return (
        f"dplens check-dp-sgd ran the DP-SGD step that ran ({section['subject']}) against the declared mechanism: "
        f"{len(section['checks'])} implementation checks ({counts['PASS']} PASS, {counts['DEVIATION']} DEVIATION, "
        f"{counts['VIOLATION']} VIOLATION{uncounted}), an assumption-free audit (ε ≥ "
        f"{section['audit']['epsilon_lower_bound']:.4g}) and a model-based bound (ε ≥ "
        f"{section['model_based']['epsilon_lower_bound']:.4g}, valid only under its assumptions); verdict "
        f"{section['verdict']}"
    )


def _implementation_test(item: NistItem, section: Mapping[str, Any] | None) -> NistItem:
    """The correctness item once the implementation evidence is in: it tests the code that ran, not dplens's own
    mechanisms."""
    if section is None or item.status is NistStatus.FLAGGED:
        return item
    where = "Implementation evidence section"
    if section["report_status"] == "VIOLATION":
        finding = f"{_implementation_words(section)}: the code that ran does not implement the accounted mechanism."
        return _item("algorithm_test", NistStatus.FLAGGED, finding, where)
    finding = f"{_implementation_words(section)}. A PASS does not prove the code correct."
    if item.status is NistStatus.SHOWN:
        return _item("algorithm_test", NistStatus.SHOWN, f"{item.finding} {finding}", f"{item.where}; {where}")
    return _item("algorithm_test", NistStatus.SHOWN, finding, where)


def _implementation_sampling(item: NistItem, section: Mapping[str, Any] | None) -> NistItem:
    """The batch-sampling item once the implementation evidence is in: its sampling-law check, when the loader that
    ran was given, tests the sampler the ε assumes."""
    if section is None:
        return item
    law = next((c for c in section["checks"] if c["name"] == "sampling_law"), None)
    where = "Implementation evidence section (sampling_law check)"
    declared = section["declared"]["sampler"]
    if law is None:
        finding = (
            f"{item.finding} The implementation evidence did not test the loader (dplens formed the batches by the "
            f"declared {declared!r} sampler)."
        )
        return _item("batch_sampling", item.status, finding, item.where)
    if law["verdict"] == "VIOLATION":
        finding = f"the loader that ran does not follow the declared {declared!r} sampler: {law['finding']}"
        return _item("batch_sampling", NistStatus.FLAGGED, finding, where)
    if law["verdict"] == "PASS":
        finding = (
            f"the loader that ran was tested against the declared {declared!r} sampler the ε is accounted for and "
            f"showed no departure: {law['finding']}"
        )
        return _item("batch_sampling", NistStatus.SHOWN, finding, where)
    finding = f"{item.finding} The sampling-law check of the loader was {law['verdict']}: {law['finding']}"
    return _item("batch_sampling", item.status, finding, item.where)


def _bias() -> NistItem:
    finding = "dplens measures privacy, not the accuracy or bias the noise introduces."
    return _item("bias", NistStatus.NOT_ASSESSED, finding)


def _floats(additional: Sequence[Mapping[str, Any]], deployment: Mapping[str, Any]) -> NistItem:
    evidence = _float_evidence(additional)
    if evidence:
        leaking = [
            e
            for e in evidence
            if (e.get("unreachable_from_neighbour") or 0) + (e.get("unreachable_from_data") or 0) > 0
        ]
        where = "float check of the target audit"
        if leaking:
            finding = f"the float check found outputs that identify the input: {leaking[0].get('sentence', '')}"
            return _item("floating_point", NistStatus.FLAGGED, finding, where)
        finding = "the float check of the audited code found no output that identifies the input."
        return _item("floating_point", NistStatus.SHOWN, finding, where)
    declared = _declared(deployment, "floating_point")
    if declared:
        return _item("floating_point", NistStatus.DECLARED, declared, "spec [deployment] floating_point")
    finding = (
        "no float check of the deployed code ran (a spec audit samples dplens's own mechanisms; "
        "`dplens audit --target` checks code for float leaks)."
    )
    return _item("floating_point", NistStatus.NOT_ASSESSED, finding)


def _declared_item(key: str, deployment: Mapping[str, Any], absent: str) -> NistItem:
    declared = _declared(deployment, key)
    if declared:
        return _item(key, NistStatus.DECLARED, declared, f"spec [deployment] {key}")
    return _item(key, NistStatus.NOT_ASSESSED, absent)


def _trust(deployment: Mapping[str, Any]) -> NistItem:
    model = _declared(deployment, "model_name")
    if model:
        actors = _declared(deployment, "actors")
        text = f"{model} model" + (f"; actors: {' '.join(actors.split())}" if actors else "")
        return _item("trust_model", NistStatus.DECLARED, text, "spec [deployment] model_name, actors")
    finding = "who sees the raw data (central, local, shuffle model) is not stated ([deployment] model_name)."
    return _item("trust_model", NistStatus.NOT_ASSESSED, finding)


def _large_epsilon(claim: Mapping[str, Any], accounting: Mapping[str, Any], threshold: float) -> NistItem:
    epsilon = claim.get("epsilon")
    if not isinstance(epsilon, int | float) or math.isnan(epsilon):
        epsilon = accounting["epsilon"]
    if epsilon > threshold:
        finding = (
            f"ε = {fmt_upper(epsilon)} exceeds {threshold:g} (dplens's threshold): an output may be up to e^ε ≈ "
            f"{fmt_upper(math.exp(min(epsilon, 700.0)))} times likelier with one unit's data than without it"
            f"{_risk_words(accounting)}."
        )
        return _item("large_epsilon", NistStatus.FLAGGED, finding, "Claim section")
    finding = f"ε = {fmt_upper(epsilon)} is at most {threshold:g} (a dplens threshold, not one set by SP 800-226)."
    return _item("large_epsilon", NistStatus.SHOWN, finding, "Claim section")


def _delta_items(claim: Mapping[str, Any], n: int | None, factor: float) -> tuple[NistItem, NistItem]:
    delta = claim.get("delta") or 0.0
    if delta == 0:
        text = "the claim is pure DP (δ = 0)."
        return (
            _item("delta_vs_n", NistStatus.SHOWN, text, "Claim section"),
            _item("delta_exceeds_n", NistStatus.SHOWN, text, "Claim section"),
        )
    if n is None:
        text = f"δ = {delta:g}, but the number of units n is unknown (state [deployment] dataset_size)."
        return _item("delta_vs_n", NistStatus.NOT_ASSESSED, text), _item(
            "delta_exceeds_n", NistStatus.NOT_ASSESSED, text
        )
    where = "Claim section and the data size (spec)"
    ratio = f"δ = {delta:g} with n = {n} (δ·n = {delta * n:.3g})"
    first = (
        _item("delta_vs_n", NistStatus.FLAGGED, f"{ratio}: δ is not below {factor:g}/n.", where)
        if delta * n > factor
        else _item("delta_vs_n", NistStatus.SHOWN, f"{ratio}: δ ≤ {factor:g}/n.", where)
    )
    in_full = (
        f"{ratio}: δ ≥ 1/n, so the claim is met by a mechanism that publishes one random record in full; the "
        "data size does not warrant this δ."
    )
    second = (
        _item("delta_exceeds_n", NistStatus.FLAGGED, in_full, where)
        if delta * n >= 1
        else _item("delta_exceeds_n", NistStatus.SHOWN, f"{ratio}: δ < 1/n.", where)
    )
    return first, second


def _contributions(
    claim: Mapping[str, Any],
    deployment: Mapping[str, Any],
    unit_given: bool,
    training: bool,
    scope: Mapping[str, Any] | None = None,
) -> NistItem:
    per_person = deployment.get("records_per_person")
    if scope is not None and scope.get("unit") == "user":
        finding = (
            f"the ε covers all of a user's examples together ({scope['unit_words']}); dplens cannot check that one "
            "person is one user (a person with several accounts is several users)."
        )
        return _item("unit_contributions", NistStatus.SHOWN, finding, "Privacy unit and tuning section")
    label = _declared(deployment, "privacy_unit")
    texts = list(dict.fromkeys(t for t in ((claim["privacy_unit"] if unit_given else None), label) if t))
    texts = texts or [claim["privacy_unit"]]
    unit = " / ".join(texts)
    levels = {_unit_level(t) for t in texts}
    level = "sub-person" if "sub-person" in levels else "person" if "person" in levels else "unknown"
    if per_person == 1:
        return _item(
            "unit_contributions",
            NistStatus.DECLARED,
            f"the author declares that each person holds at most one unit ('{unit}').",
            "spec [deployment] records_per_person",
        )
    where = "Claim section (unit of privacy)" + (" and spec [deployment] records_per_person" if per_person else "")
    if level == "sub-person" or isinstance(per_person, int):
        many = (
            f"each person may hold up to {per_person} units"
            if isinstance(per_person, int)
            else "a person may hold many"
        )
        context = "in a training run " if training else ""
        finding = (
            f"the unit is '{unit}' {context}and {many}: the guarantee covers one unit, and all of a person's units "
            "together only by group privacy (a weaker guarantee that grows with their number)."
        )
        return _item("unit_contributions", NistStatus.FLAGGED, finding, where)
    if level == "person":
        finding = (
            f"the unit is stated at the person level ('{unit}'); dplens cannot check each person's contribution bound."
        )
        return _item(
            "unit_contributions", NistStatus.DECLARED, finding, "Claim section / spec [deployment] privacy_unit"
        )
    finding = f"dplens cannot tell whether the unit '{unit}' is a person or a part of one."
    return _item("unit_contributions", NistStatus.NOT_ASSESSED, finding)


def ledger_summary(budget_ledger: Mapping[str, Any]) -> str:
    """The budgets of a report's budget-ledger section in words: spend, target and rule of each (every ε an upper
    bound, remaining a lower bound, as the ledger states them)."""
    parts = []
    for budget in budget_ledger.get("budgets", ()):
        total = budget.get("releases_count", 0)
        # spent and remaining are the current period's, so the count beside them is too
        current = budget.get("current_period")
        in_current = sum(p.get("releases", 0) for p in budget.get("periods", ()) if p.get("period") == current)
        if budget.get("period") in (None, "none"):
            period = f" over {total} release(s)"
        else:
            period = (
                f" per {budget['period']} (current period {current}: {in_current} release(s); {total} in all periods)"
            )
        spent, target, remaining = (
            fmt_upper(from_json_number(budget[key])) for key in ("spent_epsilon", "target_epsilon", "remaining_epsilon")
        )
        parts.append(
            f"budget '{budget['name']}' ({budget.get('mode', '?')}, {budget.get('theorem') or budget.get('rule')}): "
            f"spent ε ≤ {spent} of {target} at δ = {budget.get('delta', 0):g}{period}, remaining ≥ {remaining}"
        )
    return f"budget ledger {budget_ledger.get('ledger', '')}: " + "; ".join(parts)


def _releases(deployment: Mapping[str, Any], budget_ledger: Mapping[str, Any] | None = None) -> NistItem:
    release = _declared(deployment, "release_type")
    if budget_ledger and budget_ledger.get("budgets"):
        where = "Budget ledger section (dplens report --ledger)"
        return _item("releases_over_time", NistStatus.SHOWN, f"{ledger_summary(budget_ledger)}.", where)
    if release == "One release":
        finding = "one release: the report's accounting covers the whole data product."
        return _item("releases_over_time", NistStatus.DECLARED, finding, "spec [deployment] release_type")
    if release == "Many releases":
        finding = (
            "many releases: this report accounts one release; the privacy loss across releases (the budget "
            "over time) is not shown here."
        )
        return _item("releases_over_time", NistStatus.NOT_ASSESSED, finding, "spec [deployment] release_type")
    return _item("releases_over_time", NistStatus.NOT_ASSESSED, "the release type is not stated.")


def _preprocessing(deployment: Mapping[str, Any], training: bool, scope: Mapping[str, Any] | None = None) -> NistItem:
    declared = _declared(deployment, "preprocessing_and_hyperparameter_tuning")
    section = _SECTIONS["ml"] if training else None
    if scope is not None and scope.get("includes_tuning"):
        from dplens.reports.scope import tuning_words

        searches = "; ".join(tuning_words(row) for row in scope["tuning"])
        extra = f" Declared by the author: {' '.join(declared.split())}" if declared else ""
        finding = f"the ε includes the hyperparameter search: {searches}.{extra}"
        where = "Privacy unit and tuning section (the spec's repeat_and_select, accounted)"
        return _item("preprocessing", NistStatus.SHOWN, finding, where, section=section)
    if declared:
        return _item(
            "preprocessing",
            NistStatus.DECLARED,
            " ".join(declared.split()),
            "spec [deployment] preprocessing_and_hyperparameter_tuning",
            section=section,
        )
    finding = "dplens accounts the spec's mechanisms only; pre-processing or tuning on the data outside them is not."
    return _item("preprocessing", NistStatus.NOT_ASSESSED, finding, section=section)


def evaluate_nist(
    *,
    claim: Mapping[str, Any],
    accounting: Mapping[str, Any],
    audit: Mapping[str, Any] | None = None,
    additional_audits: Sequence[Mapping[str, Any]] = (),
    components: Sequence[Mapping[str, Any]] = (),
    deployment: Mapping[str, Any] | None = None,
    unit_given: bool = False,
    scope: Mapping[str, Any] | None = None,
    not_audited_reason: str | None = None,
    large_epsilon: float = LARGE_EPSILON,
    delta_factor: float = DELTA_FACTOR,
    budget_ledger: Mapping[str, Any] | None = None,
    implementation_evidence: Mapping[str, Any] | None = None,
) -> NistEvaluation:
    """The NIST SP 800-226 section from a report's facts (the JSON forms of its sections).

    Args:
        claim, accounting, audit: the report's claim, accounting and audit sections (``to_dict()`` forms).
        additional_audits: the report's additional audits (``{"kind", "verdict", "result"}``).
        components: the spec's mechanism tables (their types say whether this is a training; ``dataset_size``).
        deployment: the spec's ``[deployment]`` table (``Deployment.to_dict()``), or None.
        unit_given: whether the author stated the unit of privacy (``--unit``); else the report's unit is dplens's
            default.
        large_epsilon, delta_factor: the thresholds of the detectable hazards.
        budget_ledger: the report's budget-ledger section (``dplens report --ledger DB``: every budget's spend across
            releases, computed by the ledger), which shows the privacy loss across releases.
        scope: the report's privacy-scope section (:func:`dplens.reports.scope.privacy_scope`): the unit the DP-SGD
            tables are accounted for (shown) and the tuning the ε includes (shown).
        implementation_evidence: the report's implementation evidence section (:mod:`dplens.reports.implementation`):
            it shows the correctness test of the code that ran and, with the loader's sampling-law check, the sampler.
    """
    deployment = dict(deployment or {})
    flat = _flatten(components)
    training = _is_training(flat, deployment)
    n = _dataset_size(flat, deployment)
    well, full = _delta_items(claim, n, delta_factor)
    training_types = any(c.get("type") in _TRAINING_TYPES for c in flat)
    sampling = (_implementation_sampling(_sampling(flat), implementation_evidence),) if training_types else ()
    items = (
        _parameters(claim, accounting),
        _relation(claim),
        _unit(claim, deployment, unit_given, scope),
        _analysis(components, accounting),
        *sampling,
        _implementation_test(_test(audit, additional_audits, not_audited_reason), implementation_evidence),
        _bias(),
        _floats(additional_audits, deployment),
        _declared_item(
            "side_channels",
            deployment,
            "dplens does not measure running time or other side channels of the deployed code.",
        ),
        _declared_item(
            "security", deployment, "who can read the raw data and how it is stored are outside what dplens sees."
        ),
        _trust(deployment),
        _declared_item(
            "data_collection",
            deployment,
            "how the data were collected, and who saw them before the DP mechanism, is not stated.",
        ),
        _large_epsilon(claim, accounting, large_epsilon),
        well,
        full,
        _contributions(claim, deployment, unit_given, training, scope),
        _releases(deployment, budget_ledger),
        _preprocessing(deployment, training, scope),
    )
    return NistEvaluation(
        items=items, thresholds={"large_epsilon": float(large_epsilon), "delta_factor": float(delta_factor)}
    )
