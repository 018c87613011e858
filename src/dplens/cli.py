"""The ``dplens`` command (see DESIGN.md, "CLI contract").

Errors in the input (a bad spec, a bad flag value) print one line on stderr and exit with status 2:
no traceback, no partial output file.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from dplens import __version__

# The parser and the error paths load no numpy (``dplens --help`` costs only Python's start-up): every command
# imports what it uses when it runs. The choices below are the values of the library's enums (a test checks them).
METHODS = ("rdp", "pld", "exact", "best")
CONVERSIONS = ("optimal", "classic")

EXIT_USAGE = 2


class CliError(Exception):
    """A user error: reported as one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + message
        raise CliError(message)


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1); got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1); got {text!r}")
    return value


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a confidence in [0.5, 1); got {text!r}") from None
    if not 0.5 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a confidence in [0.5, 1); got {text!r}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0; got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0; got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}")
    return value


def _fmt(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.6g}"


def _emit(payload: dict[str, Any], as_json: bool, text: str) -> None:
    if as_json:
        print(json.dumps(payload, sort_keys=True, default=_json_default))
    else:
        print(text)


def _json_default(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "value"):
        return value.value
    if isinstance(value, float) and math.isinf(value):
        return "Infinity"
    raise TypeError(f"not JSON serialisable: {value!r}")


# --------------------------------------------------------------------------------------------
# account
# --------------------------------------------------------------------------------------------


def _cmd_account(args: argparse.Namespace) -> int:
    from dplens.accountant.compose import Method
    from dplens.accountant.curves import RdpConversion
    from dplens.spec import load_spec

    spec = load_spec(args.spec)
    acc = spec.accountant()
    method = Method(args.method)
    conversion = RdpConversion(args.conversion)
    if args.delta is not None:
        result = acc.epsilon_result(args.delta, method=method, conversion=conversion)
        payload = {
            "epsilon": result.epsilon,
            "delta": args.delta,
            "method": result.method.value,
            "details": result.details,
            "neighboring": acc.neighboring.value,
            "spec_sha256": spec.sha256,
        }
        if result.optimal_order is not None and math.isfinite(result.optimal_order):
            payload["optimal_order"] = result.optimal_order
        if result.discretisation:
            payload["discretisation"] = result.discretisation
        if result.routes:
            payload["routes"] = [r.to_dict() for r in result.routes]
        lines = [f"epsilon = {_fmt(result.epsilon)}  (delta = {args.delta:g}, method = {result.method.value})"]
        lines += [f"  {r.method.value:>5}: epsilon = {_fmt(r.epsilon)}  [{r.details}]" for r in result.routes]
        lines.append(f"  neighbouring relation: {acc.neighboring.value}; every epsilon above is an upper bound")
        _emit(payload, args.json, "\n".join(lines))
    else:
        delta = acc.delta(args.epsilon, method=method)
        payload = {
            "epsilon": args.epsilon,
            "delta": delta,
            "method": method.value,
            "neighboring": acc.neighboring.value,
            "spec_sha256": spec.sha256,
        }
        _emit(payload, args.json, f"delta = {delta:.6g}  (epsilon = {args.epsilon:g}, method = {method.value})")
    return 0


# --------------------------------------------------------------------------------------------
# calibrate
# --------------------------------------------------------------------------------------------


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from dplens._api import calibrate_spec
    from dplens.spec import load_spec

    spec = load_spec(args.spec)
    result = calibrate_spec(
        spec,
        param=args.param,
        target_epsilon=args.target_epsilon,
        delta=args.delta,
        method=args.method,
        bracket=tuple(args.bracket) if args.bracket is not None else None,
    )
    payload = result.to_dict() | {"spec_sha256": spec.sha256}
    text = (
        f"{args.param} = {result.value:.8g}  gives epsilon = {_fmt(result.epsilon)} <= {args.target_epsilon:g} "
        f"at delta = {args.delta:g}  [{result.details}]"
    )
    _emit(payload, args.json, text)
    return 0


# --------------------------------------------------------------------------------------------
# dp-sgd
# --------------------------------------------------------------------------------------------


def _cmd_dp_sgd(args: argparse.Namespace) -> int:
    from dplens.accountant.dp_sgd import dp_sgd_epsilon, dp_sgd_noise_multiplier

    run = dict(dataset_size=args.dataset_size, batch_size=args.batch_size, epochs=args.epochs, delta=args.delta)
    if args.target_epsilon is not None:
        method = "pld" if args.method == "best" else args.method
        result = dp_sgd_noise_multiplier(**run, target_epsilon=args.target_epsilon, method=method)
        text = (
            f"noise_multiplier = {result.noise_multiplier:.6g}  gives epsilon = {_fmt(result.epsilon)} <= "
            f"{args.target_epsilon:g} at delta = {args.delta:g}"
        )
    else:
        result = dp_sgd_epsilon(**run, noise_multiplier=args.noise_multiplier, method=args.method)
        text = f"epsilon = {_fmt(result.epsilon)}  (delta = {args.delta:g}, method = {result.method})"
    text += (
        f"\n  {result.steps} steps of Poisson sampling at q = {result.sampling_rate:.6g} (add/remove adjacency; "
        "shuffled batches are not Poisson sampling); every epsilon is an upper bound"
    )
    _emit(result.to_dict(), args.json, text)
    return 0


# --------------------------------------------------------------------------------------------
# audit
# --------------------------------------------------------------------------------------------


def _audit_text(result: Any) -> str:
    """The human-readable audit summary: the bound, the claim, the ceiling, labelled estimates, the verdict."""
    level = f"{result.confidence:.0%}"
    point = result.operating_point
    lines = [
        f"epsilon >= {result.epsilon_lower_bound:.6g}  (valid {level} lower bound, delta = {result.delta:g}, "
        f"{result.trials} trials per side, direction {result.bound_direction})",
        f"  claimed epsilon: {result.epsilon_claimed:.6g}  [{result.claim_source}]",
        f"  measurability ceiling: {result.ceiling:.6g}  (no audit of this size can certify more)",
        f"  operating point: threshold {point.get('threshold', float('nan')):.6g}, "
        f"FP {point.get('false_positives')} / {point.get('negatives')}, "
        f"FN {point.get('false_negatives')} / {point.get('positives')}",
        f"  score: {result.score}; method: {result.method}",
    ]
    for estimate in result.estimates:
        value = estimate.get("epsilon")
        shown = "inf" if value is None or (isinstance(value, float) and math.isinf(value)) else f"{value:.6g}"
        lines.append(f"  ESTIMATE ({estimate['name']}): epsilon ~ {shown}  [{estimate['assumption']}]")
    lines.append(f"verdict: {result.verdict.value}. {result.verdict_reason}")
    return "\n".join(lines)


def _cmd_audit(args: argparse.Namespace) -> int:
    from dplens.auditing.games import audit_spec
    from dplens.spec import load_spec

    spec = load_spec(args.spec)
    if args.delta is not None and not 0 <= args.delta < 1:
        raise ValueError(f"--delta must be in [0, 1); got {args.delta!r}")
    if args.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0; got {args.seed!r}")
    result = audit_spec(
        spec,
        trials=args.trials,
        delta=args.delta,
        confidence=args.confidence,
        seed=args.seed,
        workers=args.workers,
        scheduler=args.scheduler,
        checkpoint=args.checkpoint,
        progress=not args.quiet,
    )
    payload = result.to_dict() | {"spec_sha256": spec.sha256}
    _emit(payload, args.json, _audit_text(result))
    return 0


# --------------------------------------------------------------------------------------------
# report and demo
# --------------------------------------------------------------------------------------------


def _spec_title(path: str, default: str) -> str:
    """The spec's optional top-level ``name`` (already validated by ``load_spec``), else ``default``."""
    import tomllib

    try:
        raw = Path(path).read_bytes()
        data = tomllib.loads(raw.decode("utf-8")) if path.lower().endswith(".toml") else json.loads(raw)
    except (OSError, ValueError):
        return default
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name.strip() else default


def _progress(quiet: bool):
    if quiet:
        return None
    return lambda message: print(f"[report] {message}", file=sys.stderr, flush=True)


def _cmd_report(args: argparse.Namespace) -> int:
    from dplens.reports.build import AuditMode, generate_report
    from dplens.reports.defaults import DEFAULT_TRIALS
    from dplens.spec import load_spec

    spec = load_spec(args.spec)
    if args.no_audit and args.trials is not None:
        raise ValueError("--no-audit and --trials exclude each other")
    if args.no_audit:
        mode = AuditMode.OFF
    elif args.trials is not None:
        mode = AuditMode.REQUIRED  # the user asked for an audit: failing to run it is an error
    else:
        mode = AuditMode.AUTO
    if args.delta is not None and not 0 <= args.delta < 1:
        raise ValueError(f"--delta must be in [0, 1); got {args.delta!r}")
    files = generate_report(
        spec,
        Path(args.output),
        title=args.title or _spec_title(args.spec, Path(args.spec).stem),
        delta=args.delta,
        audit_mode=mode,
        trials=args.trials or DEFAULT_TRIALS,
        confidence=args.confidence,
        seed=args.seed,
        workers=args.workers,
        privacy_unit=args.unit,
        progress=_progress(args.quiet),
        command=["dplens", *getattr(args, "argv", [])],
    )
    report = files.report
    print(f"verdict: {report.verdict.status.value}. {report.verdict.sentence}")
    print(f"dplens report: wrote {files.html.resolve()}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from dplens.demo import run_demo

    return run_demo(Path(args.output), progress=not args.quiet)


# --------------------------------------------------------------------------------------------
# reproduce
# --------------------------------------------------------------------------------------------


def _available_reproductions() -> dict[str, Any]:
    import importlib

    out = {}
    from dplens.accountant import plugins

    for name, module_name in plugins.reproductions().items():
        try:
            out[name] = importlib.import_module(module_name)
        except ImportError:
            continue
    return out


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from dplens.reports.reproductions_index import write_index

    available = _available_reproductions()
    if args.name != "all" and args.name not in available:
        raise ValueError(f"unknown reproduction {args.name!r}; available: {sorted(available)} or 'all'")
    names = sorted(available) if args.name == "all" else [args.name]
    root = Path(args.output)
    for name in names:
        print(f"[reproduce] {name} ...", flush=True)
        written = available[name].run(root / name, quick=args.quick)
        print(f"[reproduce] {name}: {len(written)} files in {(root / name).resolve()}", flush=True)
    if args.name == "all":
        index = write_index(root, names)
        print(f"[reproduce] index: {index.resolve()}")
    return 0


# --------------------------------------------------------------------------------------------
# Parser and entry point
# --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dplens", description="Differential-privacy accounting, auditing and reports.")
    parser.add_argument("--version", action="version", version=f"dplens {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    methods = list(METHODS)
    account = sub.add_parser("account", help="epsilon for a delta, or delta for an epsilon")
    account.add_argument("spec", help="TOML or JSON spec file")
    target = account.add_mutually_exclusive_group(required=True)
    target.add_argument("--delta", type=_probability, help="report epsilon at this delta")
    target.add_argument("--epsilon", type=_non_negative, help="report delta at this epsilon")
    account.add_argument("--method", choices=methods, default="best")
    account.add_argument(
        "--conversion",
        choices=list(CONVERSIONS),
        default="optimal",
        help="RDP to (epsilon, delta) conversion; 'classic' reproduces legacy numbers",
    )
    account.add_argument("--json", action="store_true", help="print one JSON object")
    account.set_defaults(func=_cmd_account)

    cal = sub.add_parser("calibrate", help="smallest noise (or largest budget) meeting a target epsilon")
    cal.add_argument("spec")
    cal.add_argument("--param", required=True, help="parameter to calibrate, e.g. noise_multiplier, steps")
    cal.add_argument("--target-epsilon", type=_non_negative, required=True)
    cal.add_argument("--delta", type=_probability, required=True)
    cal.add_argument("--method", choices=methods, default="pld")
    cal.add_argument("--bracket", type=float, nargs=2, metavar=("LOW", "HIGH"))
    cal.add_argument("--json", action="store_true")
    cal.set_defaults(func=_cmd_calibrate)

    sgd = sub.add_parser("dp-sgd", help="epsilon of a DP-SGD run, or the noise multiplier for a target epsilon")
    sgd.add_argument("--dataset-size", type=_positive_int, required=True, help="number of training examples N")
    sgd.add_argument("--batch-size", type=_positive_int, required=True, help="(expected) batch size B")
    sgd.add_argument("--epochs", type=_non_negative, required=True, help="epochs E (steps = ceil(E*N/B))")
    sgd_target = sgd.add_mutually_exclusive_group(required=True)
    sgd_target.add_argument("--noise-multiplier", type=_non_negative, help="noise std / clipping norm")
    sgd_target.add_argument("--target-epsilon", type=_non_negative, help="calibrate the noise multiplier instead")
    sgd.add_argument("--delta", type=_probability, required=True)
    sgd.add_argument("--method", choices=methods, default="best")
    sgd.add_argument("--json", action="store_true", help="print one JSON object")
    sgd.set_defaults(func=_cmd_dp_sgd)

    aud = sub.add_parser("audit", help="a valid empirical lower bound on epsilon (Monte Carlo distinguishing game)")
    aud.add_argument("spec", help="TOML or JSON spec file (an optional [claim] is the guarantee under test)")
    aud.add_argument("--trials", type=_positive_int, required=True, help="trials per side")
    aud.add_argument(
        "--delta",
        type=float,
        help="delta of the (epsilon, delta) statement under test (default: the claim's, else 1e-5)",
    )
    aud.add_argument("--confidence", type=_confidence, default=0.95, help="confidence of the bound (default 0.95)")
    aud.add_argument("--seed", type=int, default=0, help="root seed (default 0); the result depends only on it")
    aud.add_argument("--workers", type=_positive_int, default=1, help="local worker processes (default 1)")
    aud.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (needs [distributed])")
    aud.add_argument("--checkpoint", help="checkpoint file: written after each chunk, resumed from if it exists")
    aud.add_argument("--quiet", action="store_true", help="no progress bar")
    aud.add_argument("--json", action="store_true", help="print one JSON object")
    aud.set_defaults(func=_cmd_audit)

    from dplens.reports.defaults import DEFAULT_CONFIDENCE, DEFAULT_PRIVACY_UNIT, DEFAULT_TRIALS

    report = sub.add_parser("report", help="a compliance report (JSON, HTML, privacy statement, figures)")
    report.add_argument("spec", help="TOML or JSON spec file")
    report.add_argument("-o", "--output", required=True, help="output directory")
    report.add_argument(
        "--delta", type=float, help="delta of the (epsilon, delta) statements (default: the claim's, else 1e-5)"
    )
    report.add_argument(
        "--trials",
        type=_positive_int,
        help=f"audit trials per side (default {DEFAULT_TRIALS}; given explicitly, a failing audit is an error)",
    )
    report.add_argument("--no-audit", action="store_true", help="accounting only; the report says 'not audited'")
    report.add_argument("--confidence", type=_probability, default=DEFAULT_CONFIDENCE, help="audit confidence")
    report.add_argument("--seed", type=int, default=0, help="audit seed (default 0)")
    report.add_argument("--workers", type=_positive_int, default=1, help="audit worker processes")
    report.add_argument("--unit", default=DEFAULT_PRIVACY_UNIT, help="the unit of privacy, in words")
    report.add_argument("--title", help="report title (default: the spec's name)")
    report.add_argument("--quiet", action="store_true", help="no progress output")
    report.set_defaults(func=_cmd_report)

    demo = sub.add_parser("demo", help="the main job end to end on a built-in example")
    demo.add_argument("-o", "--output", default="dplens-demo", help="output directory (default: ./dplens-demo)")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(func=_cmd_demo)

    rep = sub.add_parser("reproduce", help="regenerate the papers' reproductions under reports/")
    rep.add_argument("name", nargs="?", default="all", help="a reproduction name, or 'all' (default)")
    rep.add_argument("-o", "--output", default="reports", help="output root (default: ./reports)")
    rep.add_argument("--quick", action="store_true", help="fewer seeds / smaller grids (for smoke tests)")
    rep.set_defaults(func=_cmd_reproduce)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.argv = list(argv) if argv is not None else sys.argv[1:]
        return int(args.func(args) or 0)
    except (CliError, ValueError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"dplens: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dplens: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
