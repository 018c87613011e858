"""Black-box audits on the DP-tester benchmark: dplens's bound against the best published one, per mechanism.

    python benchmarks/bench_blackbox.py [--trials N ...] [--only NAME ...] [--workers W] [--seed S] [--seeds K]
        [--confidence C] [--relation-search] [--scores-only] [--json FILE] [--compare FILE] [--label TEXT]
        [--write [PATH]]

Runs :func:`dplens.auditing.target_game.audit_target` on every mechanism of ``examples/targets/blackbox_suite.py``
(the DP-Sniper and StatDP evaluations, issue 23), each on the input pair of its best published result, at each
``--trials`` per side (default 10⁶ and 10⁷), and prints a Markdown section: mechanism, dplens's bound, the best
published bound (source), the ratio, the verdict at the mechanism's claim, and the seconds of the audit (pilot,
checks, scoring and counting included). Progress goes to stderr, one line per audit.

Beside the published bound stands the *oracle*'s (``examples/targets/blackbox_oracle.py``, for the rows whose
output distributions are computed exactly): the bound an auditor who knew both distributions could expect at the
same trials and confidence. Where it is below the target (0.9× or 1× the published bound), no valid test of this
kind reaches the target except by luck, and the summary says so. ``--seeds K`` audits every row K times (seeds
SEED … SEED+K−1) and judges the median; ``--scores-only`` adds, for the rows whose floats leak, the bound of the
scores alone (float checks off), which is what compares the learned scores with the published testers there.

``--identical BEFORE AFTER`` compares two ``--json`` files of the same command (e.g. before and after a
restructuring) audit by audit — bound, verdict, best score, ceiling, pilot and trials must be equal to the last bit
— and prints (``--write``: puts in RESULTS.md between its markers) how many are.

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
import re
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


def oracle_bounds(rows: list[Any], trials: int, confidence: float) -> dict[str, float]:
    """The oracle's expected bound (examples/targets/blackbox_oracle.py) of every row with exact distributions."""
    import blackbox_oracle

    out = {}
    for row in rows:
        if row.name in blackbox_oracle.DISTRIBUTIONS:
            p, q = blackbox_oracle.DISTRIBUTIONS[row.name](row)
            out[row.name] = blackbox_oracle.expected_bound(p, q, trials, confidence)[0]
    return out


def audit_row(
    row: Any,
    *,
    trials: int,
    seed: int,
    workers: int,
    confidence: float,
    relation: bool = False,
    float_checks: bool = True,
):
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
            float_checks=float_checks,
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


def _judged_bound(entry: dict[str, Any]) -> float:
    """The bound the table judges: the median over seeds when several ran, else the one audit's."""
    bounds = entry.get("seed_bounds")
    return float(np.median(bounds)) if bounds else entry["fixed"]["bound"]


def _verdicts(res: dict[str, Any], entry: dict[str, Any], seeds: int) -> str:
    if seeds <= 1:
        return res["verdict"]
    return f"{res['verdict']} ({entry['seed_verdicts'].count(res['verdict'])} of {seeds} seeds)"


def table(
    rows: list[Any],
    results: dict[str, dict[str, Any]],
    trials: int,
    before: dict[str, Any] | None,
    oracle: dict[str, float] | None = None,
) -> list[str]:
    oracle = oracle or {}
    seeds = max((len(results[row.name].get("seed_bounds", [])) for row in rows), default=0)
    scores_only = any("scores_only" in results[row.name] for row in rows)
    relation = any("relation" in results[row.name] for row in rows)
    head = ["mechanism", "claim ε", "private"]
    if before is not None:
        head.append("before")
    head.append("dplens bound")
    if seeds > 1:
        head.append(f"median of {seeds} seeds (min–max)")
    head += ["best published (source)", "ratio", "oracle at N (ratio)", "verdict at claim", "s"]
    if scores_only:
        head.append("scores alone (float check off)")
    if relation:
        head += ["query_vector bound", "vs fixed pair", "s (search)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        entry = results[row.name]
        res = entry["fixed"]
        if "error" in res:
            lines.append(f"| {row.name} | {row.claim_epsilon:.4g} | {row.private} | error: {res['error']} |")
            continue
        bound = res["bound"]
        judged = _judged_bound(entry)
        cells = [row.name, f"{row.claim_epsilon:.4g}", "yes" if row.private else "no"]
        if before is not None:
            old = before.get(row.name, {}).get("fixed", {}).get("bound")
            cells.append(_fmt(old) if old is not None else "—")
        cells.append(f"**{_fmt(bound)}**" if bound >= row.published_bound else _fmt(bound))
        if seeds > 1:
            spread = entry.get("seed_bounds", [])
            cells.append(f"{_fmt(judged)} ({_fmt(min(spread))}–{_fmt(max(spread))})" if spread else "—")
        best = oracle.get(row.name)
        cells += [
            f"{row.published_bound:.4g}{'' if row.reachable() else ' †'} ({_short_source(row.published_source)})",
            _ratio(judged, row.published_bound),
            f"{_fmt(best)} ({_ratio(judged, best)})" if best is not None else "—",
            _verdicts(res, entry, seeds),
            f"{res['seconds']:.1f}",
        ]
        if scores_only:
            alone = entry.get("scores_only")
            cells.append(f"{_fmt(alone['bound'])} ({_ratio(alone['bound'], row.published_bound)})" if alone else "")
        if relation:
            searched = entry.get("relation")
            if searched is None:
                cells += ["—", "—", "—"]
            elif "error" in searched:
                cells += [f"not run: {searched['error'][:80]}", "—", f"{searched['seconds']:.1f}"]
            else:
                found = float(np.median(entry["relation_seed_bounds"])) if "relation_seed_bounds" in entry else None
                shown = _fmt(searched["bound"]) + (f" (median {_fmt(found)})" if found is not None else "")
                versus = _ratio(found, judged) if found is not None else _ratio(searched["bound"], bound)
                cells += [shown, versus, f"{searched['seconds']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    done = [row for row in rows if "bound" in results[row.name]["fixed"]]
    judged = {row.name: _judged_bound(results[row.name]) for row in done}
    what = f"the median of {seeds} seeds" if seeds > 1 else "dplens's bound"
    for share in (1.0, 0.9):
        target = {row.name: share * row.published_bound for row in done}
        met = [row.name for row in done if judged[row.name] >= target[row.name]]
        # Out of reach: even an auditor who knew the exact distributions expects less than the target at N.
        out = [row.name for row in done if row.name not in met and oracle.get(row.name, math.inf) < target[row.name]]
        near_oracle = [name for name in out if judged[name] >= share * oracle[name]]
        rest = [row.name for row in done if row.name not in met and row.name not in out]
        lines.append(
            f"≥ {share:g}× the best published bound at {trials:,} trials per side ({what}): "
            f"{len(met)} of {len(done)}. "
            + (
                f"Out of reach for any valid test of this kind (the oracle expects less than {share:g}× published): "
                f"{len(out)} ({', '.join(out)}), of which ≥ {share:g}× the oracle: {len(near_oracle)}"
                + (f" ({', '.join(near_oracle)})" if near_oracle else "")
                + ". "
                if out
                else ""
            )
            + (f"Below and reachable: {', '.join(rest)}." if rest else "No reachable row below.")
        )
    unreachable = [row for row in rows if not row.reachable()]
    if unreachable:
        lines.append(
            "† above the exact ε of the audited pair ("
            + ", ".join(f"{row.name}: {row.pair_epsilon:.5f}" for row in unreachable)
            + "): a valid bound reaches it only by chance."
        )
    if oracle:
        lines.append(
            "Oracle: the bound an auditor who knew both exact output distributions could expect at this N and "
            "confidence (examples/targets/blackbox_oracle.py: the exact conditional test on the best likelihood-ratio "
            "event at its expected counts, all of α on it, nothing spent on finding it)."
        )
    if relation:
        searched = [
            row
            for row in done
            if row.name.startswith(("SVT", "ReportNoisyMax")) and "bound" in results[row.name].get("relation", {})
        ]

        def _searched(row: Any) -> float:
            bounds = results[row.name].get("relation_seed_bounds")
            return float(np.median(bounds)) if bounds else results[row.name]["relation"]["bound"]

        good = [row for row in searched if _searched(row) >= 0.8 * judged[row.name]]
        lines.append(
            "query_vector on the sparse-vector and report-noisy-max rows: ≥ 0.8× of the fixed best pair on "
            f"{len(good)} of {len(searched)}" + (f" (medians of {seeds} seeds compared)." if seeds > 1 else ".")
        )
    return lines


_IDENTICAL_FIELDS = ("bound", "verdict", "best_score", "ceiling", "pilot_trials", "trials")


def identical(before: dict[str, Any], after: dict[str, Any]) -> tuple[int, list[str]]:
    """How many audits of two runs' results agree in every field of ``_IDENTICAL_FIELDS``, and the ones that do not."""
    same, differ = 0, []
    for name, entry in before.items():
        for kind in ("fixed", "relation", "scores_only"):
            old, new = entry.get(kind), after.get(name, {}).get(kind)
            if old is None and new is None:
                continue
            if old is not None and new is not None and all(old.get(k) == new.get(k) for k in _IDENTICAL_FIELDS):
                same += 1
            else:
                differ.append(f"{name} ({kind})")
    return same, differ


def identical_section(before_path: str, after_path: str, command: str) -> str:
    runs = [json.loads(Path(p).read_text()) for p in (before_path, after_path)]
    before, after = (run.get("results") or next(iter(run["runs"].values()))["results"] for run in runs)
    same, differ = identical(before, after)
    shown = [re.sub(r"--json (\S+)", lambda m: f"--json {Path(m.group(1)).name}", run["command"]) for run in runs]
    return "\n".join(
        [
            f"#### The same bounds before and after a change (issue 30) ({time.strftime('%Y-%m-%d')})",
            "",
            f"Command: `{command}`",
            "",
            f"Runs compared: `{shown[0]}` (before) and `{shown[1]}` (after), each saved with "
            "`--json`. Every audit (fixed pair, query-vector search, scores alone) compared in its bound, verdict, "
            f"best score, ceiling, pilot and trials, to the last bit: **{same} of {same + len(differ)} identical**"
            + (f"; different: {', '.join(differ)}." if differ else ".")
            + f" The whole suite took {_seconds(runs[0])} before and {_seconds(runs[1])} after (shared machine).",
            "",
        ]
    )


def _seconds(run: dict[str, Any]) -> str:
    seconds = [entry.get("seconds") for entry in run.get("runs", {}).values()]
    return f"{sum(s for s in seconds if s):.0f} s" if any(seconds) else "—"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="suite rows to run (default: all 22)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds", type=int, default=1, help="audits per row (seeds SEED, SEED+1, …): the table judges their median"
    )
    parser.add_argument(
        "--scores-only", action="store_true", help="also audit the float-leaking rows with the float checks off"
    )
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--relation-search", action="store_true", help="also audit with relation query_vector")
    parser.add_argument("--json", metavar="FILE", help="save the raw results")
    parser.add_argument("--compare", metavar="FILE", help="an earlier --json file: its bounds as a 'before' column")
    parser.add_argument("--label", default="", help="a label for the section heading")
    parser.add_argument("--write", nargs="?", const=str(RESULTS), metavar="PATH", help="append the section")
    parser.add_argument("--identical", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two --json files")
    args = parser.parse_args(argv)
    if args.identical:
        command = shlex.join(["python", "benchmarks/bench_blackbox.py", *(argv if argv is not None else sys.argv[1:])])
        section = identical_section(*args.identical, command)
        print(section)
        if args.write:
            from results_md import write_section  # benchmarks/ is sys.path[0] when run as a script

            write_section(Path(args.write), "bench_blackbox_identical", section)
        return 0

    suite = _suite()
    if args.only:
        unknown = [name for name in args.only if name not in suite.BY_NAME]
        if unknown:
            print(f"--only: unknown mechanism(s) {unknown}; known: {sorted(suite.BY_NAME)}", file=sys.stderr)
            return 2
        rows = [suite.BY_NAME[name] for name in args.only]
    else:
        rows = list(suite.SUITE)
    if any(t < 1 for t in args.trials) or args.workers < 1 or args.seeds < 1:
        print(
            f"--trials, --workers and --seeds must be >= 1; got {args.trials}, {args.workers}, {args.seeds}",
            file=sys.stderr,
        )
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
            if args.seeds > 1 and "bound" in entry.get("relation", {}):
                searched = [entry["relation"]] + [
                    audit_row(
                        row, trials=trials, seed=args.seed + k, workers=args.workers, confidence=args.confidence,
                        relation=True,
                    )
                    for k in range(1, args.seeds)
                ]  # fmt: skip
                entry["relation_seed_bounds"] = [e["bound"] for e in searched if "bound" in e]
            if args.seeds > 1 and "bound" in fixed:
                extra = [
                    audit_row(row, trials=trials, seed=args.seed + k, workers=args.workers, confidence=args.confidence)
                    for k in range(1, args.seeds)
                ]
                others = [e for e in extra if "bound" in e]
                entry["seed_bounds"] = [fixed["bound"], *(e["bound"] for e in others)]
                entry["seed_verdicts"] = [fixed["verdict"], *(e["verdict"] for e in others)]
                print(
                    f"      {args.seeds} seeds: median {np.median(entry['seed_bounds']):.4f} "
                    f"({min(entry['seed_bounds']):.4f}–{max(entry['seed_bounds']):.4f})",
                    file=sys.stderr,
                    flush=True,
                )
            if args.scores_only and row.float_leak:
                entry["scores_only"] = audit_row(
                    row, trials=trials, seed=args.seed, workers=args.workers, confidence=args.confidence,
                    float_checks=False,
                )  # fmt: skip
                alone = entry["scores_only"]
                print(
                    "      scores alone: "
                    + (f"bound {alone['bound']:.4f}" if "bound" in alone else f"error {alone['error']}"),
                    file=sys.stderr,
                    flush=True,
                )
            results[row.name] = entry
        total = time.perf_counter() - started
        first_pass = sum(results[row.name]["fixed"]["seconds"] for row in rows)
        oracle = oracle_bounds(rows, trials, args.confidence)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        raw["runs"][str(trials)] = {"results": results, "seconds": total, "oracle": oracle}
        label = f", {args.label}" if args.label else ""
        lines = [
            f"### Black-box suite (issue 23), {trials:,} trials per side{label} ({time.strftime('%Y-%m-%d')}, "
            f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__})",
            "",
            f"Command: `{command}`",
            "",
            f"Confidence {args.confidence}, seed {args.seed}, {args.workers} worker(s); the whole suite took "
            f"{total:.0f} s ({first_pass:.0f} s for one audit per row); peak RSS {peak:.0f} MiB (main), "
            f"{children:.0f} MiB (largest worker). The published "
            "bounds are DP-Sniper's (confidence 0.9, 2·10⁸ samples per side) or StatDP's verified ones "
            "(examples/targets/blackbox_suite.py lists each source); **bold**: dplens ≥ the published bound.",
            "",
            *table(rows, results, trials, before, oracle),
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
