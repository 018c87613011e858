"""The report section of a target audit: everything the issue asks for is rendered, escaped, from to_dict()."""

from __future__ import annotations

import pytest

from dplens.auditing.target_game import audit_target
from dplens.reports.target_audit import render_target_audit


def _textbook(data, rng):
    return float(sum(data)) + rng.laplace(0.0, 1.0)


def test_fragment_carries_target_pair_scores_evidence_verdict_and_reproducibility():
    result = audit_target(_textbook, ([1, 1, 1], [1, 1]), claim_epsilon=1.0, trials=3_000, seed=0).to_dict()
    html = render_target_audit(result)
    assert html.startswith('<section class="target-audit verdict-violation">')
    assert "_textbook" in html and "[1, 1, 1]" in html
    for score in result["scores"]:
        assert score["name"] in html
    assert "unreachable from the neighbour&#x27;s query value" in html
    assert "VIOLATION" in html and "replays from its seed" in html


def test_fragment_escapes_user_text_and_refuses_other_documents():
    def count(data, rng):
        return float(len(data)) + rng.laplace(0.0, 1.0)

    result = audit_target(count, (["<b>x</b>"], []), claim_epsilon=1.0, trials=500, seed=0).to_dict()
    html = render_target_audit(result)
    assert "<b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    with pytest.raises(ValueError, match="target audit"):
        render_target_audit({"format": "something else"})
