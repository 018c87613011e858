"""Checking the stated parameters of registry records: the conversions against mpmath, the 2020 Census DHC person
tables (rho = 4.96, epsilon = 26.34 at delta = 1e-10: valid, tighter epsilon 25.41 by the optimal conversion,
26.33 by Bun-Steinke), and the synthetic records of tests/registry/records (written for these tests: rho only,
rho with epsilon and delta, per-table statements in the details, an epsilon below the conversion, an epsilon that
follows from a mu-GDP analysis, mu in the details, pure DP with a delta, mismatched variants, a delta formula)."""

from __future__ import annotations

import math
from pathlib import Path

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplens.registry.check import CheckStatus, check_record, check_records, record_files
from dplens.registry.statements import decimal_half_unit, parse_delta, read_statements
from dplens.registry.yamlio import read_yaml_document

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
MALFORMED = HERE / "malformed"


@pytest.fixture(autouse=True)
def _mpmath_digits():
    """The mpmath oracles' precision, set for each test (40 digits): it is process-wide state, and a module-level
    setting lasts only until another module's test changes it (a shuffled run caught this)."""
    with mpmath.workdps(40):
        yield


# ---- oracles -----------------------------------------------------------------------------------


def mp_cks(rho: float, delta: float) -> mpmath.mpf:
    """min over alpha > 1 of rho*alpha + log(1 - 1/alpha) - (log delta + log alpha)/(alpha - 1) (CKS 2020 Prop. 12
    on the zCDP curve), by golden-section search in log(alpha - 1) (the objective is unimodal there)."""
    rho, log_delta = mpmath.mpf(rho), mpmath.log(mpmath.mpf(delta))

    def f(t):
        alpha = 1 + mpmath.exp(t)
        return rho * alpha + mpmath.log(1 - 1 / alpha) - (log_delta + mpmath.log(alpha)) / (alpha - 1)

    lo, hi = mpmath.mpf(-30), mpmath.mpf(30)
    ratio = (mpmath.sqrt(5) - 1) / 2
    for _ in range(400):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if f(a) < f(b):
            hi = b
        else:
            lo = a
    return f((lo + hi) / 2)


def mp_bun_steinke(rho: float, delta: float) -> mpmath.mpf:
    rho = mpmath.mpf(rho)
    return rho + 2 * mpmath.sqrt(rho * mpmath.log(1 / mpmath.mpf(delta)))


def mp_gdp_epsilon(mu: float, delta: float) -> mpmath.mpf:
    """The epsilon with delta_mu(epsilon) = delta (Dong, Roth, Su 2022 Cor. 2.13), by bisection."""
    mu, delta = mpmath.mpf(mu), mpmath.mpf(delta)

    def profile(eps):
        return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)

    lo, hi = mpmath.mpf(0), mpmath.mpf(200)
    for _ in range(300):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if profile(mid) > delta else (lo, mid)
    return hi


def check_of(name: str):
    path = RECORDS / name
    return check_record(read_yaml_document(path), name=str(path))


# ---- the Census DHC person tables ---------------------------------------------------------------


def test_census_dhc_person_tables_are_valid_with_the_tighter_epsilon():
    result = check_of("zcdp_rho_epsilon_delta.yaml")  # rho = 4.96, epsilon = 26.34, delta = 1e-10
    assert result.status is CheckStatus.VALID
    (conversion,) = [c for c in result.checks if c.kind == "zcdp_conversion"]
    values = conversion.values
    # the research note's numbers: Bun-Steinke 26.33, Canonne-Kamath-Steinke 25.41
    assert round(values["epsilon_classic"], 2) == 26.33 and round(values["epsilon_optimal"], 2) == 25.41
    assert values["epsilon_stated"] == 26.34 >= values["epsilon_classic"] > values["epsilon_optimal"]
    # each value is an upper bound on the mpmath one, and tight
    for key, oracle in (("epsilon_optimal", mp_cks(4.96, 1e-10)), ("epsilon_classic", mp_bun_steinke(4.96, 1e-10))):
        assert values[key] >= oracle and values[key] - oracle < 1e-9 * oracle, key
    gaussian = mp_gdp_epsilon(math.sqrt(2 * 4.96), 1e-10)
    assert values["epsilon_gaussian"] >= gaussian and values["epsilon_gaussian"] - gaussian < 1e-8 * gaussian
    assert "valid" in conversion.message and "25.42" in conversion.message  # shown rounded up


def test_per_table_statements_in_the_details_are_checked_one_by_one():
    result = check_of("zcdp_details_per_table.yaml")
    by_label = {c.label: c for c in result.checks if c.label}
    assert set(by_label) == {"Person Tables", "Housing Unit Tables"}
    person = by_label["Person Tables"]
    assert person.status is CheckStatus.VALID and person.values["rho"] == 4.96
    assert person.values["epsilon_stated"] == 26.34 and person.values["delta"] == 1e-10
    assert "read from the text" in person.source
    housing = by_label["Housing Unit Tables"]  # 34.33 is Bun-Steinke rounded to nearest (34.3307): below it ...
    assert housing.values["epsilon_classic"] > 34.33
    assert housing.status is CheckStatus.VALID  # ... but above the optimal conversion (33.29): valid
    assert result.status is CheckStatus.VALID
    assert "Person Tables: rho = 4.96, stated epsilon = 26.34" in result.line()


def test_rho_without_epsilon_is_converted_at_the_default_delta_and_at_a_given_one():
    record = read_yaml_document(RECORDS / "zcdp_rho_only.yaml")
    derived = check_record(record, name="r")
    (conversion,) = derived.checks
    assert derived.status is CheckStatus.DERIVED and conversion.values["delta"] == 1e-10
    assert conversion.values["epsilon_optimal"] >= mp_cks(2.63, 1e-10)
    other = check_record(record, name="r", delta=1e-5).checks[0]
    assert other.values["delta"] == 1e-5 and other.values["epsilon_optimal"] < conversion.values["epsilon_optimal"]


def test_an_epsilon_below_the_conversion_needs_a_citation_and_names_the_gaussian_profile():
    result = check_of("zcdp_epsilon_below_conversion.yaml")  # rho = 0.0728, epsilon = 1.3 at 1e-5
    assert result.status is CheckStatus.NEEDS_CITATION
    (conversion,) = result.checks
    gaussian = mp_gdp_epsilon(math.sqrt(2 * 0.0728), 1e-5)
    assert conversion.values["epsilon_gaussian"] >= gaussian
    assert 1.3 < float(gaussian) < conversion.values["epsilon_optimal"]
    assert "mechanism-specific analysis must be cited" in conversion.message
    assert "Gaussian mechanism at this rho has exactly 1.476" in conversion.message


def test_an_epsilon_from_a_mu_gdp_analysis_named_in_the_details_is_valid():
    result = check_of("zcdp_epsilon_from_gdp.yaml")  # epsilon 1.453 < conversions of rho; mu = 0.376 explains it
    (conversion,) = result.checks
    assert result.status is CheckStatus.VALID and conversion.values["mu"] == 0.376
    assert conversion.values["epsilon_gdp"] >= mp_gdp_epsilon(0.376, 1e-5)
    assert conversion.values["epsilon_gdp"] <= 1.453 < conversion.values["epsilon_gaussian"]
    assert "follows from the mu-GDP analysis" in conversion.message
    # without the mu sentence the same numbers need a citation
    record = read_yaml_document(RECORDS / "zcdp_epsilon_from_gdp.yaml")
    del record["deployment"]["privacy_loss"]["privacy_parameters_details"]
    assert check_record(record, name="r").status is CheckStatus.NEEDS_CITATION


def test_mu_stated_in_the_details_is_converted():
    (gdp,) = check_of("gdp_mu_in_details.yaml").checks
    assert gdp.kind == "gdp_conversion" and gdp.status is CheckStatus.VALID
    assert gdp.values["epsilon_gdp"] >= mp_gdp_epsilon(0.376, 1e-5)
    record = read_yaml_document(RECORDS / "gdp_mu_in_details.yaml")
    record["deployment"]["privacy_loss"]["privacy_parameters"]["epsilon"] = 1.2
    assert check_record(record, name="r").checks[0].status is CheckStatus.NEEDS_CITATION


@pytest.mark.parametrize(
    ("name", "status", "words"),
    [
        ("pure_dp_with_delta.yaml", CheckStatus.INCONSISTENT, "pure DP stated with delta = 1.5e-07"),
        ("zcdp_variant_without_rho.yaml", CheckStatus.INCONSISTENT, "zero-concentrated DP without rho"),
        ("approximate_dp_without_delta.yaml", CheckStatus.INCONSISTENT, "approximate DP without delta"),
        ("approximate_dp_only.yaml", CheckStatus.NOT_CHECKABLE, "nothing dplens can re-derive"),
        ("delta_as_formula.yaml", CheckStatus.NOT_CHECKABLE, "delta is given as an expression ('n^{-2}')"),
        ("tier_one_no_parameters.yaml", CheckStatus.NOT_CHECKABLE, "no privacy parameters stated"),
    ],
)
def test_variants_and_parameters_that_do_not_fit(name, status, words):
    result = check_of(name)
    assert result.status is status
    assert words in result.line()


def test_values_out_of_range_are_inconsistent():
    base = {"deployment": {"privacy_loss": {"privacy_parameters": {}}}}
    for params in ({"epsilon": -1.0}, {"rho": float("nan")}, {"epsilon": 1.0, "delta": 1.5}, {"rho": float("inf")}):
        base["deployment"]["privacy_loss"]["privacy_parameters"] = params
        result = check_record(base, name="r")
        assert result.status is CheckStatus.INCONSISTENT, params
        assert all(c.kind == "range" for c in result.checks)


def test_check_records_reads_every_synthetic_record_and_summarises(tmp_path):
    result = check_records([RECORDS])
    assert not result.errors and len(result.records) == len(list(RECORDS.glob("*.yaml")))
    counts = result.to_dict()["counts"]
    assert counts == {"inconsistent": 3, "needs_citation": 1, "valid": 4, "derived": 1, "not_checkable": 3}
    with pytest.raises(ValueError, match=r"^delta must be in \(0, 1\); got 0"):
        check_records([RECORDS], delta=0)


def test_files_and_directories():
    files, errors = record_files([RECORDS / "zcdp_rho_only.yaml", MALFORMED, HERE / "nope.yaml"])
    assert files[0].name == "zcdp_rho_only.yaml" and len(files) == 1 + len(list(MALFORMED.glob("*.yaml")))
    assert errors == [(str(HERE / "nope.yaml"), f"registry record not found: {str(HERE / 'nope.yaml')!r}")]
    result = check_records([MALFORMED])
    assert not result.records and len(result.errors) == len(list(MALFORMED.iterdir()))
    assert all("\n" not in message for _, message in result.errors)


# ---- reading statements ------------------------------------------------------------------------


def test_statements_in_latex_unicode_and_words():
    cases = {
        r"Person Tables: \\(\rho\\) = 4.96 (corresponding to \\(\epsilon\\)=26.34 and \\(\delta = 10^{-10}\\).": (
            4.96,
            26.34,
            1e-10,
            None,
        ),
        "ρ = 0.5 gives ε ≈ 4.0 at δ = 1e-6": (0.5, 4.0, 1e-6, None),
        "protected under \\(\\mu\\)-GDP is about 0.376": (None, None, None, 0.376),
        "a guarantee of \\(\\epsilon = 0.66\\) and \\(\\delta = 2.1 × 10−29\\)": (None, 0.66, 2.1e-29, None),
        "with (\\(\\epsilon\\)=4, \\(\\delta\\)< 10-7)": (None, 4.0, 1e-7, None),
        "an epsilon of 1.844 was reported": (None, 1.844, None, None),
    }
    for text, (rho, epsilon, delta, mu) in cases.items():
        (statement,) = read_statements(text)
        assert (statement.rho, statement.epsilon, statement.delta, statement.mu) == (rho, epsilon, delta, mu), text


def test_statements_skip_other_quantities_and_prose():
    assert read_statements("\\(\\epsilon_{user}\\) = 0.45 and \\(\\epsilon_0\\) = 8") == []
    assert read_statements("where \\(\\epsilon \\prime \\prime\\) = 1.672") == []
    assert read_statements("the epsilon value is unknown; rho-zCDP was used") == []
    assert read_statements(None) == [] and read_statements(3) == []
    two = read_statements("First: \\(\\rho\\) = 1.\nSecond: \\(\\rho\\) = 2.")
    assert [(s.label, s.rho) for s in two] == [("First", 1.0), ("Second", 2.0)]


def test_delta_forms_and_rounding_units():
    assert parse_delta("10−5") == 1e-5 and parse_delta("10^-8") == 1e-8 and parse_delta(3e-7) == 3e-7
    assert parse_delta("4.08 \\times 10^{-8}") == pytest.approx(4.08e-8, rel=1e-15)
    assert parse_delta("n^{(-\\epsilon \\ln(n))}") is None and parse_delta(True) is None and parse_delta([]) is None
    assert decimal_half_unit("2.56") == pytest.approx(0.005) and decimal_half_unit("15") == 0.5
    assert decimal_half_unit("1e-05") == pytest.approx(0.5e-5) and decimal_half_unit(None) == 0.0


def test_a_stated_epsilon_within_rounding_of_the_stated_rho_says_so():
    # the 2020 redistricting person tables: rho = 2.56, epsilon = 17.14 at 1e-10, just below the optimal
    # conversion of 2.56 (17.158) but above that of 2.555, a rho that rounds to 2.56
    record = {
        "deployment": {
            "dp_variant": {"variant_name": "Zero-concentrated DP"},
            "privacy_loss": {"privacy_parameters": {"rho": 2.56, "epsilon": 17.14, "delta": 1e-10}},
        }
    }
    (conversion,) = check_record(record, name="r").checks
    assert conversion.status is CheckStatus.NEEDS_CITATION
    assert conversion.values["epsilon_optimal"] > 17.14 >= conversion.values["epsilon_optimal_rounding"]
    assert "within rounding: rho = 2.555" in conversion.message


# ---- properties ----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    rho=st.floats(min_value=1e-4, max_value=50.0),
    log_delta=st.floats(min_value=-30.0, max_value=-2.0),
    fraction=st.floats(min_value=0.5, max_value=1.5),
)
def test_the_status_follows_the_stated_epsilon(rho, log_delta, fraction):
    delta = 10.0**log_delta
    record = {
        "deployment": {
            "dp_variant": {"variant_name": "Zero-concentrated DP"},
            "privacy_loss": {"privacy_parameters": {"rho": rho, "delta": delta}},
        }
    }
    (derived,) = check_record(record, name="r").checks
    values = derived.values
    # the Gaussian's exact epsilon <= the optimal conversion <= the classic one
    assert (
        values["epsilon_gaussian"] <= values["epsilon_optimal"] * (1 + 1e-9) <= values["epsilon_classic"] * (1 + 1e-9)
    )
    stated = values["epsilon_optimal"] * fraction
    record["deployment"]["privacy_loss"]["privacy_parameters"]["epsilon"] = stated
    (conversion,) = check_record(record, name="r").checks
    expected = CheckStatus.VALID if stated >= values["epsilon_optimal"] else CheckStatus.NEEDS_CITATION
    assert conversion.status is expected
