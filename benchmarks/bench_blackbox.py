"""Black-box audits on the DP-tester benchmark: dplens's bound against the best published one, per mechanism.

    python benchmarks/bench_blackbox.py [--trials N ...] [--only NAME ...] [--workers W] [--seed S]
        [--confidence C] [--relation-search] [--json FILE] [--compare FILE] [--label TEXT] [--write [PATH]]

Runs :func:`dplens.auditing.target_game.audit_target` on every mechanism of ``examples/targets/blackbox_suite.py``
(the DP-Sniper and StatDP evaluations, issue 23), each on the input pair of its best published result, at each
``--trials`` per side (default 10⁶ and 10⁷), and prints a Markdown section: mechanism, dplens's bound, the best
published bound (source), the ratio, the verdict at the mechanism's claim, and the seconds of the audit (pilot,
checks, scoring and counting included). Progress goes to stderr, one line per audit.

``--relation-search`` adds, for every mechanism whose input is a vector of query answers, an audit with
``{"data": …, "relation": "query_vector"}`` instead of the fixed neighbour (searched pairs, final audit on fresh
trials) at the same total budget (the search's share, ``SEARCH_FRACTION`` of the final trials, is taken out of
``--trials``) and reports its bound next to the fixed pair's; when the installed dplens does not know that relation the
column says so. ``--json FILE`` saves the raw numbers; ``--compare FILE`` adds a column with an earlier run's bound
(the "before" column of issue 23). ``--write`` appends the section to ``benchmarks/RESULTS.md`` (or PATH).

The published bounds are DP-Sniper's (confidence 0.9, 2·10⁸ samples per side for the final estimate) or StatDP's
verified ones; dplens's are at ``--confidence`` (default 0.95) with the stated trials.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "targets"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
QUERY_VECTOR = "query_vector"


def _suite():
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    import blackbox_suite

    return blackbox_suite


def _vector_input(row: Any) -> bool:
    return len(row.data) > 1


def audit_row(row: Any, *, trials: int, seed: int, workers: int, confidence: float, relation: bool = False):
    """One audit of a suite row: a dict with the bound, verdict, seconds (or the error in one line)."""
    from dplens.auditing.target_game import audit_target

    pair = {"data": list(row.data), "relation": QUERY_VECTOR} if relation else row.pair()
    if relation:  # the same total budget: the search's share (25 % of the counted trials) comes out of the trials
        from dplens.auditing import target_game

        trials = max(1, round(trials / (1.0 + getattr(target_game, "SEARCH_FRACTION", 0.0))))
    start = time.perf_counter()
    try:
        result = audit_target(
            row.target,
            pair,
            claim_epsilon=row.claim_epsilon,
            trials=trials,
            seed=seed,
            workers=workers,
            confidence=confidence,
        )
    except Exception as err:  # e.g. a relation this dplens does not know yet: one row's failure is reported
        message = str(err).splitlines()[0] if str(err) else ""
        return {"error": f"{type(err).__name__}: {message}", "seconds": time.perf_counter() - start}
    out = {
        "bound": result.epsilon_lower_bound,
        "verdict": result.verdict.value,
        "best_score": result.best_score,
        "ceiling": result.ceiling,
        "seconds": time.perf_counter() - start,
        "pilot_trials": result.pilot_trials,
        "trials": trials,
    }
    if relation and result.pairs_tried:
        out["pairs_tried"] = len(result.pairs_tried)
        out["neighbour"] = result.pair.get("neighbour")
    return out


def _fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.4g}" if value < 100 else f"{value:.1f}"


def _ratio(ours: float, theirs: float) -> str:
    if theirs <= 0:
        return "—"
    return f"{ours / theirs:.2f}×"


def _short_source(source: str) -> str:
    return source.split(" (")[0]


def table(rows: list[Any], results: dict[str, dict[str, Any]], trials: int, before: dict[str, Any] | None) -> list[str]:
    head = "| mechanism | claim ε | private | dplens bound | best published (source) | ratio | verdict at claim | s |"
    rule = "|---|---|---|---|---|---|---|---|"
    if before is not None:
        head = head.replace("| dplens bound |", "| before | dplens bound |")
        rule += "---|"
    relation = any("relation" in results[row.name] for row in rows)
    if relation:
        head += " query_vector bound | vs fixed pair | s (search) |"
        rule += "---|---|---|"
    lines = [head, rule]
    behind = 0
    for row in rows:
        res = results[row.name]["fixed"]
        if "error" in res:
            lines.append(f"| {row.name} | {row.claim_epsilon:.4g} | {row.private} | error: {res['error']} |")
            continue
        bound = res["bound"]
        behind += bound < row.published_bound
        cells = [
            row.name,
            f"{row.claim_epsilon:.4g}",
            "yes" if row.private else "no",
        ]
        if before is not None:
            old = before.get(row.name, {}).get("fixed", {}).get("bound")
            cells.append(_fmt(old) if old is not None else "—")
        cells += [
            f"**{_fmt(bound)}**" if bound >= row.published_bound else _fmt(bound),
            f"{row.published_bound:.4g}{'' if row.reachable() else ' †'} ({_short_source(row.published_source)})",
            _ratio(bound, row.published_bound),
            res["verdict"],
            f"{res['seconds']:.1f}",
        ]
        if relation:
            searched = results[row.name].get("relation")
            if searched is None:
                cells += ["—", "—", "—"]
            elif "error" in searched:
                cells += [f"not run: {searched['error'][:80]}", "—", f"{searched['seconds']:.1f}"]
            else:
                cells += [_fmt(searched["bound"]), _ratio(searched["bound"], bound), f"{searched['seconds']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    done = [row for row in rows if "bound" in results[row.name]["fixed"]]
    near = [row for row in done if results[row.name]["fixed"]["bound"] >= 0.9 * row.published_bound]
    below = ", ".join(row.name for row in done if row not in near)
    lines.append(
        f"Behind the best published bound on {behind} of {len(rows)} mechanisms at {trials:,} trials per side; "
        f"≥ 0.9× of it on {len(near)} of {len(done)}" + (f" (below 0.9×: {below})." if below else ".")
    )
    unreachable = [row for row in rows if not row.reachable()]
    if unreachable:
        lines.append(
            "† above the exact ε of the audited pair ("
            + ", ".join(f"{row.name}: {row.pair_epsilon:.5f}" for row in unreachable)
            + "): a valid bound reaches it only by chance."
        )
    if relation:
        searched = [
            row
            for row in done
            if row.name.startswith(("SVT", "ReportNoisyMax")) and "bound" in results[row.name].get("relation", {})
        ]
        good = [
            row
            for row in searched
            if results[row.name]["relation"]["bound"] >= 0.8 * results[row.name]["fixed"]["bound"]
        ]
        lines.append(
            "query_vector on the sparse-vector and report-noisy-max rows: ≥ 0.8× of the fixed best pair on "
            f"{len(good)} of {len(searched)}."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="suite rows to run (default: all 22)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--relation-search", action="store_true", help="also audit with relation query_vector")
    parser.add_argument("--json", metavar="FILE", help="save the raw results")
    parser.add_argument("--compare", metavar="FILE", help="an earlier --json file: its bounds as a 'before' column")
    parser.add_argument("--label", default="", help="a label for the section heading")
    parser.add_argument("--write", nargs="?", const=str(RESULTS), metavar="PATH", help="append the section")
    args = parser.parse_args(argv)

    suite = _suite()
    if args.only:
        unknown = [name for name in args.only if name not in suite.BY_NAME]
        if unknown:
            print(f"--only: unknown mechanism(s) {unknown}; known: {sorted(suite.BY_NAME)}", file=sys.stderr)
            return 2
        rows = [suite.BY_NAME[name] for name in args.only]
    else:
        rows = list(suite.SUITE)
    if any(t < 1 for t in args.trials) or args.workers < 1:
        print(f"--trials and --workers must be >= 1; got {args.trials}, {args.workers}", file=sys.stderr)
        return 2
    before = None
    if args.compare:
        earlier = json.loads(Path(args.compare).read_text())
        before = earlier.get("results") or next(iter(earlier["runs"].values()))["results"]
    json_path = Path(args.json).resolve() if args.json else None
    write_path = Path(args.write).resolve() if args.write else None
    os.chdir(EXAMPLES)  # worker processes import blackbox_suite:NAME from the current directory

    command = shlex.join(["python", "benchmarks/bench_blackbox.py", *(argv if argv is not None else sys.argv[1:])])
    sections: list[str] = []
    raw: dict[str, Any] = {"command": command, "confidence": args.confidence, "runs": {}}
    for trials in args.trials:
        results: dict[str, dict[str, Any]] = {}
        started = time.perf_counter()
        for i, row in enumerate(rows, 1):
            entry = {
                "fixed": audit_row(row, trials=trials, seed=args.seed, workers=args.workers, confidence=args.confidence)
            }
            fixed = entry["fixed"]
            print(
                f"[{i}/{len(rows)}] {trials:.0e} {row.name:<20} "
                + (
                    f"bound {fixed['bound']:.4f} ({fixed['verdict']}, {fixed['best_score']})"
                    if "bound" in fixed
                    else f"error {fixed['error']}"
                )
                + f"  {fixed['seconds']:.1f} s  (published {row.published_bound:.4g})",
                file=sys.stderr,
                flush=True,
            )
            if args.relation_search and _vector_input(row):
                entry["relation"] = audit_row(
                    row,
                    trials=trials,
                    seed=args.seed,
                    workers=args.workers,
                    confidence=args.confidence,
                    relation=True,
                )
                searched = entry["relation"]
                print(
                    "      query_vector: "
                    + (f"bound {searched['bound']:.4f}" if "bound" in searched else f"error {searched['error']}")
                    + f"  {searched['seconds']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
            results[row.name] = entry
        total = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        raw["runs"][str(trials)] = {"results": results, "seconds": total}
        label = f", {args.label}" if args.label else ""
        lines = [
            f"### Black-box suite (issue 23), {trials:,} trials per side{label} ({time.strftime('%Y-%m-%d')}, "
            f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__})",
            "",
            f"Command: `{command}`",
            "",
            f"Confidence {args.confidence}, seed {args.seed}, {args.workers} worker(s); the whole suite took "
            f"{total:.0f} s; peak RSS {peak:.0f} MiB (main), {children:.0f} MiB (largest worker). The published "
            "bounds are DP-Sniper's (confidence 0.9, 2·10⁸ samples per side) or StatDP's verified ones "
            "(examples/targets/blackbox_suite.py lists each source); **bold**: dplens ≥ the published bound.",
            "",
            *table(rows, results, trials, before),
            "",
        ]
        section = "\n".join(lines)
        sections.append(section)
        print(section, flush=True)
    if json_path is not None:
        out = raw if len(args.trials) > 1 else {**raw, "results": raw["runs"][str(args.trials[0])]["results"]}
        json_path.write_text(json.dumps(out, indent=1, default=str))
    if write_path is not None:
        with open(write_path, "a", encoding="utf-8") as handle:
            handle.write("\n" + "\n".join(sections))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
