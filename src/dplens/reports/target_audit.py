"""The report section of a target audit (user code audited with ``dplens audit --target``).

Renders the JSON of :class:`dplens.auditing.target_game.TargetAuditResult` (its ``to_dict()``) as an HTML
fragment: what was audited, the pair, every score tried (each with its share of the significance), the float
evidence in words, the verdict and what the reproducibility flag means for the result. It computes no privacy
quantity. The lead wires it into ``dplens report``.
"""

from __future__ import annotations

import html
import math
from typing import Any

__all__ = ["render_target_audit"]


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "∞"
    if isinstance(value, float) and not math.isfinite(value):
        return "∞" if value > 0 else "−∞"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return html.escape(str(value))


def _text(value: Any) -> str:
    return html.escape(str(value))


def render_target_audit(result: dict[str, Any]) -> str:
    """An HTML fragment (a ``<section>``) for a target audit's ``to_dict()``.

    Raises ``ValueError`` when ``result`` is not a target audit result.

    Example:
        >>> fragment = render_target_audit({
        ...     "format": "dplens-target-audit", "verdict": "VIOLATION", "verdict_reason": "claim violated",
        ...     "epsilon_lower_bound": 9.2, "epsilon_claimed": 1.0, "delta": 0.0, "confidence": 0.95,
        ...     "trials": 100000, "target": {"name": "mechanisms.textbook_laplace", "call": "f(data, rng)"},
        ...     "pair": {"description": "D vs D'", "data": "[1, 1]", "neighbour": "[1]"}, "scores": [],
        ...     "float_evidence": [], "reproducible": True, "reproducibility_note": "reproducible"})
        >>> "VIOLATION" in fragment and "mechanisms.textbook_laplace" in fragment
        True
    """
    if not isinstance(result, dict) or result.get("format") != "dplens-target-audit":
        raise ValueError("result must be the to_dict() of a target audit (format 'dplens-target-audit')")
    verdict = str(result.get("verdict", "INCONCLUSIVE"))
    target = result.get("target", {})
    pair = result.get("pair", {})
    level = f"{float(result.get('confidence', 0.95)):.0%}"
    parts = [
        f'<section class="target-audit verdict-{_text(verdict.lower())}">',
        "<h2>Audit of a target (user code)</h2>",
        f'<p class="verdict"><strong>{_text(verdict)}</strong>: {_text(result.get("verdict_reason", ""))}</p>',
        "<h3>What was audited</h3>",
        "<dl>",
        f"<dt>Target</dt><dd><code>{_text(target.get('name', '?'))}</code> — {_text(target.get('call', ''))}</dd>",
    ]
    if target.get("path"):
        parts.append(f"<dt>Import path</dt><dd><code>{_text(target['path'])}</code></dd>")
    parts += [
        f"<dt>Pair</dt><dd>{_text(pair.get('description', ''))}: D = <code>{_text(pair.get('data', ''))}</code>, "
        f"D′ = <code>{_text(pair.get('neighbour', ''))}</code></dd>",
        f"<dt>Claim</dt><dd>ε = {_number(result.get('epsilon_claimed'))}, δ = {_number(result.get('delta'))}</dd>",
        f"<dt>Result</dt><dd>ε ≥ <strong>{_number(result.get('epsilon_lower_bound'))}</strong> (a valid {level} "
        f"lower bound from {_text(result.get('trials'))} trials per side; best score: "
        f"{_text(result.get('best_score', ''))}); measurability ceiling {_number(result.get('ceiling'))}</dd>",
        "</dl>",
    ]
    scores = result.get("scores", [])
    if scores:
        parts += [
            "<h3>Scores tried</h3>",
            "<p>Each score was fixed on an independent pilot before the counted trials. Every (score, threshold, "
            "direction) is one hypothesis of a single weighted Bonferroni procedure whose weights the pilot fixed "
            "(the shares below add up to the significance), so the largest bound is valid.</p>",
            "<table><thead><tr><th>score</th><th>tests</th><th>share of α</th><th>ε lower bound</th>"
            "<th>direction</th></tr></thead><tbody>",
        ]
        for score in scores:
            parts.append(
                f"<tr><td>{_text(score.get('name'))}</td><td>{_text(score.get('hypotheses'))}</td>"
                f"<td>{_number(score.get('significance'), 3)}</td><td>{_number(score.get('epsilon_lower_bound'))}</td>"
                f"<td>{_text(score.get('direction'))}</td></tr>"
            )
        parts.append("</tbody></table>")
    evidence = result.get("float_evidence", [])
    parts.append("<h3>Floating-point evidence</h3>")
    if evidence:
        parts.append("<ul>")
        parts += [f"<li>{_text(e.get('sentence', ''))}</li>" for e in evidence]
        parts.append("</ul>")
    else:
        note = result.get("probe", {}).get("note", "")
        parts.append(f"<p>No float check ran{': ' + _text(note) if note else ''}.</p>")
    pairs = result.get("pairs_tried", [])
    if pairs:
        parts.append("<h3>Pairs tried (search; estimates, not bounds)</h3><ul>")
        parts += [f"<li>{_text(p.get('change'))}: estimate {_number(p.get('estimate'), 3)}</li>" for p in pairs]
        parts.append("</ul>")
    reproducible = bool(result.get("reproducible"))
    parts += [
        "<h3>Reproducibility</h3>",
        f'<p class="reproducible-{str(reproducible).lower()}">{_text(result.get("reproducibility_note", ""))}</p>',
        "</section>",
    ]
    return "\n".join(parts)
