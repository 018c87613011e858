"""The ``dplens`` command (see DESIGN.md, "CLI contract").

Errors in the input (a bad spec, a bad flag value) print one line on stderr and exit with status 2:
no traceback, no partial output file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from dplens._numbers import fmt_short as _fmt
from dplens._version import __version__

# The parser and the error paths load no numpy (``dplens --help`` costs only Python's start-up): every command
# imports what it uses when it runs. The choices below are the values of the library's enums (a test checks them).
METHODS = ("rdp", "pld", "exact", "best")
# dplens.accountant.dp_sgd.Sampler's values (spelled out: parsing imports no accountant; a test keeps them equal).
SAMPLERS = (
    "poisson",
    "truncated-poisson",
    "balls-and-bins",
    "fixed-bins",
    "shuffle",
    "shuffle-once",
    "fixed-size",
    "cyclic",
)
# dplens.accountant.mf_accounting's mechanisms and its samplers beyond SAMPLERS (a test keeps them equal).
MF_MECHANISMS = ("bandmf", "blt", "bsr", "nu-ftrl", "matrix")
MF_SAMPLERS = ("cyclic-poisson", "b-min-sep", "min-sep")
CONVERSIONS = ("optimal", "classic")
#: The PLD engine's relative bracket width by default (dplens.accountant.pld.DEFAULT_TOLERANCE; a test checks it).
DEFAULT_TOLERANCE = 1e-3
#: δ of a registry record's ρ without a stated δ (dplens.registry.check.DEFAULT_DERIVE_DELTA; a test checks it).
DEFAULT_DERIVE_DELTA = 1e-10

EXIT_USAGE = 2


class CliError(Exception):
    """A user error: reported as one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not usage + message
        raise CliError(message)


class _Terminated(KeyboardInterrupt):
    """SIGTERM outside a chunked run (inside one, the runner's handler takes over: see ``dplens_stop``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, frame: Any) -> None:
    raise _Terminated(signum)


_terminate.dplens_stop = True  # type: ignore[attr-defined]  # the runner may replace it while chunks run


def _output_file(path: str, what: str) -> Path:
    """A file dplens will write, checked before any work: its directory exists, it is not a directory, and it is
    writable. (Nothing is created here: a run refused later leaves no file behind.)"""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{what} {path!r} is a directory, not a file")
    parent = target.parent
    if not parent.is_dir():
        raise ValueError(f"{what} {path!r}: directory {str(parent)!r} does not exist")
    if not os.access(target if target.exists() else parent, os.W_OK):
        raise ValueError(f"{what} {path!r} is not writable")
    return target


def _output_dir(path: str, what: str) -> Path:
    """A directory dplens will create or fill, checked before any work: it is a directory or can be made one (its
    nearest existing ancestor is a writable directory)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{what} {path!r} exists and is not a directory")
    ancestor = target
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{what} {path!r} cannot be created: {str(ancestor)!r} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {path!r} is not writable")
    return target


class _JsonLog:
    """``--log-json FILE``: progress events as JSON lines, flushed one by one (for pipelines that tail the file).

    The file is created at the first event, so a command refused before any work leaves no file behind.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: Any = None

    def write(self, event: dict[str, Any]) -> None:
        if self._handle is None:
            self._handle = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._handle.write(json.dumps(event, sort_keys=True, default=_json_default) + "\n")
        self._handle.flush()

    @property
    def started(self) -> bool:
        return self._handle is not None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


@contextlib.contextmanager
def _observing(args: argparse.Namespace) -> Iterator[None]:
    """Route the runner's progress events to ``--log-json`` while the command runs."""
    log = getattr(args, "json_log", None)
    if log is None:
        yield
        return
    from dplens.auditing import runner

    with runner.observe(log.write):
        yield


def _number_type(parse: Callable[[str], Any], accept: Callable[[Any], bool], expected: str) -> Callable[[str], Any]:
    """An argparse ``type=``: ``parse`` the text, keep it if ``accept``, else one line saying what was expected."""

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}; got {text[:40]!r}")
        return value

    return convert


_probability = _number_type(float, lambda v: 0 < v < 1, "a number in (0, 1)")
_delta = _number_type(float, lambda v: 0 <= v < 1, "a number in [0, 1)")
_seed = _number_type(int, lambda v: v >= 0, "an integer >= 0")
_confidence = _number_type(float, lambda v: 0.5 <= v < 1, "a confidence in [0.5, 1)")
_non_negative = _number_type(float, lambda v: v >= 0 and math.isfinite(v), "a finite number >= 0")


MAX_COUNT = 10**15  # most trials (per side) a command accepts: the runner's MAX_TRIALS
MAX_WORKERS = 1024  # the runner's MAX_WORKERS


def _positive_int(text: str, maximum: int = MAX_COUNT) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text[:40]!r}")
    if value > maximum:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is out of the supported range [1, {maximum:.0e}]")
    return value


def _workers(text: str) -> int:
    return _positive_int(text, MAX_WORKERS)


def _emit(payload: dict[str, Any], as_json: bool, text: str) -> None:
    if as_json:
        print(json.dumps(_rfc_json(payload), sort_keys=True, default=_json_default, allow_nan=False))
    else:
        print(text)


def _rfc_json(value: Any) -> Any:
    """``value`` with every non-finite float written as the project's JSON convention (±∞ as "Infinity" strings, NaN
    as null: :func:`dplens._numbers.json_number`), so that the output is RFC 8259 JSON (no bare Infinity/NaN)."""
    from dplens._numbers import json_number

    if isinstance(value, float) and not math.isfinite(value):
        return json_number(value)
    if isinstance(value, dict):
        return {key: _rfc_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rfc_json(item) for item in value]
    return value


def _verdict_status(args: argparse.Namespace, result: Any) -> int:
    """Exit status of an audit: 1 for a VIOLATION under ``--fail-on-violation`` (for CI pipelines), else 0."""
    verdict = getattr(getattr(result, "verdict", None), "value", None)
    return 1 if getattr(args, "fail_on_violation", False) and verdict == "VIOLATION" else 0


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


def _bracket_text(lower: float, upper: float) -> str:
    """The certified bracket in words: the true epsilon lies in [lower, upper]."""
    width = "" if not (upper > 0 and math.isfinite(upper)) else f"; relative width {(upper - lower) / upper:.2g}"
    return f"  certified bracket: the true epsilon lies in [{_fmt(lower)}, {_fmt(upper)}]{width}"


def _cmd_account(args: argparse.Namespace) -> int:
    from dplens.accountant.compose import Method
    from dplens.accountant.curves import RdpConversion
    from dplens.spec import load_spec

    spec = load_spec(args.spec)
    acc = spec.accountant(tolerance=args.tolerance)
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
        if result.epsilon_lower is not None:
            payload["epsilon_lower"] = result.epsilon_lower
        lines = [f"epsilon = {_fmt(result.epsilon)}  (delta = {args.delta:g}, method = {result.method.value})"]
        lines += [f"  {r.method.value:>5}: epsilon = {_fmt(r.epsilon)}  [{r.details}]" for r in result.routes]
        if result.epsilon_lower is not None:
            lines.append(_bracket_text(result.epsilon_lower, result.epsilon))
        lines.append(f"  neighbouring relation: {acc.neighboring.value}; every epsilon above is an upper bound")
        lines += _account_scope(spec, payload)
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
        text = [f"delta = {delta:.6g}  (epsilon = {args.epsilon:g}, method = {method.value})"]
        _emit(payload, args.json, "\n".join(text + _account_scope(spec, payload)))
    return 0


def _account_scope(spec: Any, payload: dict[str, Any]) -> list[str]:
    """``privacy_unit`` (and the user-level parameters) where the spec's dp_sgd tables state one, ``tuning`` where
    a repeat_and_select table is accounted (issue 49): added to ``payload``; the text lines saying so."""
    from dplens.reports.scope import privacy_scope

    scope = privacy_scope(spec.mechanisms)
    if scope is None:
        return []
    lines = []
    if scope["unit"] is not None:
        payload["privacy_unit"] = scope["unit"]
        if scope["mixed"]:  # user- and example-level tables: the composed epsilon is an example's
            payload["mixed_privacy_units"] = True
        if scope["unit"] == "user":
            row = scope["user_level"][0]
            payload.update(
                max_examples_per_user=row["max_examples_per_user"],
                user_sampling=row["user_sampling"],
                users=row["users"],
            )
        lines.append(
            f"  privacy unit: {scope['unit_words']}" + (" (mixed user/example tables)" if scope["mixed"] else "")
        )
    if scope["includes_tuning"]:
        payload["includes_tuning"] = True
        payload["tuning"] = [
            {k: row[k] for k in ("mean_runs", "distribution", "shape", "count", "mechanism")} for row in scope["tuning"]
        ]
        lines.append(
            "  the epsilon INCLUDES the tuning: "
            + "; ".join(
                f"{row['mean_runs']:g} runs on average ({row['distribution']}), best released"
                for row in scope["tuning"]
            )
        )
    return lines


# --------------------------------------------------------------------------------------------
# calibrate
# --------------------------------------------------------------------------------------------


def _calibration_target(args: argparse.Namespace) -> str:
    """Which target the flags name ("epsilon" or "risk"), checked before any work: one line on a bad combination."""
    risk = args.max_tpr is not None or args.at_fpr is not None or args.max_advantage is not None
    if risk and args.target_epsilon is not None:
        raise CliError("give either --target-epsilon or a risk target (--max-tpr T --at-fpr A, or --max-advantage V)")
    if args.max_advantage is not None and (args.max_tpr is not None or args.at_fpr is not None):
        raise CliError("give either --max-advantage or --max-tpr with --at-fpr, not both")
    if (args.max_tpr is None) != (args.at_fpr is None):
        raise CliError("--max-tpr and --at-fpr go together (the largest TPR allowed at that false-positive rate)")
    if not risk and args.target_epsilon is None:
        raise CliError(
            "a target is required: --target-epsilon E --delta D, --max-tpr T --at-fpr A, or --max-advantage V"
        )
    if not risk and args.delta is None:
        raise CliError("--target-epsilon needs --delta")
    return "risk" if risk else "epsilon"


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from dplens._api import calibrate_spec, default_delta
    from dplens.spec import load_spec

    kind = _calibration_target(args)
    spec = load_spec(args.spec)
    delta = args.delta if args.delta is not None or kind == "epsilon" else default_delta(spec) or None
    result = calibrate_spec(
        spec,
        param=args.param,
        target_epsilon=args.target_epsilon,
        delta=delta,
        method=args.method,
        bracket=tuple(args.bracket) if args.bracket is not None else None,
        tolerance=args.tolerance,
        max_tpr=args.max_tpr,
        at_fpr=args.at_fpr,
        max_advantage=args.max_advantage,
    )
    payload = result.to_dict() | {"spec_sha256": spec.sha256}
    if kind == "epsilon":
        text = (
            f"{args.param} = {result.value:.8g}  gives epsilon = {_fmt(result.epsilon)} <= {args.target_epsilon:g} "
            f"at delta = {args.delta:g}  [{result.details}]"
        )
    else:
        epsilon = "" if result.epsilon is None else f"; epsilon = {_fmt(result.epsilon)} at delta = {result.delta:g}"
        text = (
            f"{args.param} = {result.value:.8g}  gives {result.target.describe()} (upper bound {result.achieved:.6g})"
            f"{epsilon}  [{result.details}]"
        )
        for warning in result.warnings:
            print(f"dplens: warning: {warning}", file=sys.stderr)
    _emit(payload, args.json, text)
    return 0


# --------------------------------------------------------------------------------------------
# risk
# --------------------------------------------------------------------------------------------


def _percent(value: float | None, *, lower: bool = False) -> str:
    """A probability as a percentage, 4 significant digits, rounded on its safe side (an upper bound up)."""
    from dplens.reports.format import fmt_lower, fmt_upper

    return "n/a" if value is None else f"{(fmt_lower if lower else fmt_upper)(100 * value)} %"


def _upper(value: float) -> str:
    from dplens.reports.format import fmt_upper

    return fmt_upper(value, 6)


def _lower(value: float) -> str:
    from dplens.reports.format import fmt_lower

    return fmt_lower(value, 6)


def _risk_text(risk: Any, spec_path: str) -> str:
    lines = [
        f"attack risk of {spec_path} ({risk.neighboring} adjacency; route {risk.method.value}): every number is an "
        "upper bound on what any membership attack can reach"
    ]
    for i, fpr in enumerate(risk.fprs):
        bracket = (
            ""
            if risk.tpr_lower is None
            else f"  [certified bracket {_percent(risk.tpr_lower[i], lower=True)}, {_percent(risk.tpr_upper[i])}]"
        )
        lines.append(f"  at FPR {fpr * 100:g} %: TPR <= {_percent(risk.tpr_upper[i])}{bracket}")
    low = (
        ""
        if risk.advantage_lower is None
        else f"  [certified bracket {_lower(risk.advantage_lower)}, {_upper(risk.advantage_upper)}]"
    )
    lines.append(f"  advantage TPR - FPR <= {_upper(risk.advantage_upper)}{low}")
    if risk.prior is not None:
        lines.append(
            f"  with prior {risk.prior:g} that the unit is in the data, an attacker guesses right with probability "
            f"<= {_upper(risk.success_upper)} ({max(risk.prior, 1 - risk.prior):g} without the release)"
        )
    lines.append(f"  [{risk.details}]")
    return "\n".join(lines)


def _cmd_risk(args: argparse.Namespace) -> int:
    from dplens._api import attack_risk
    from dplens.spec import load_spec

    spec = load_spec(args.spec)
    risk = attack_risk(
        spec,
        fprs=tuple(args.fpr) if args.fpr else None,
        prior=args.prior,
        method=args.method,
        tolerance=args.tolerance,
    )
    payload = risk.to_dict() | {"spec_sha256": spec.sha256}
    _emit(payload, args.json, _risk_text(risk, args.spec))
    return 0


# --------------------------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------------------------


def _sweep_param(text: str) -> tuple[str, list[float]]:
    """argparse type of --param NAME=LO:HI:N (parsed without numpy: the values are checked by the sweep)."""
    name, sep, rest = text.partition("=")
    parts = rest.split(":")
    if not sep or not name.strip() or not (len(parts) in (3, 4) or (len(parts) == 1 and rest.strip())):
        raise argparse.ArgumentTypeError(f"expected NAME=LO:HI:N (or NAME=LO:HI:N:log, NAME=V1,V2,...); got {text!r}")
    return name.strip(), [rest]


def _cmd_sweep(args: argparse.Namespace) -> int:
    from dplens._api import sweep
    from dplens.accountant.sweep import parse_parameter
    from dplens.spec import load_spec

    spec = load_spec(args.spec)
    params: dict[str, list[float]] = {}
    for name, (rest,) in args.param:
        if name in params:
            raise ValueError(f"--param {name} is given twice")
        params[name] = parse_parameter(f"{name}={rest}")[1]
    if args.json and args.output:
        raise ValueError("--json and -o exclude each other (-o FILE.json writes JSON)")
    show_progress = not args.quiet and sys.stderr.isatty()
    result = sweep(
        spec, params=params, delta=args.delta, method=args.method, tolerance=args.tolerance, progress=show_progress
    )
    if args.output:
        path = result.write(args.output)
        lines = [f"dplens sweep: {len(result.epsilon)} configurations, wrote {path.resolve()}"]
        if path.suffix.lower() != ".json" and not args.no_plot:
            from dplens.reports.sweep_plot import plot_sweep

            figure = plot_sweep(result, path.with_suffix(".png"))
            lines.append(f"dplens sweep: figure {figure.resolve()}")
        print("\n".join(lines))
    elif args.json:
        print(json.dumps(result.to_dict(), sort_keys=True))
    else:
        print(result.to_csv(), end="")


# dp-sgd
# --------------------------------------------------------------------------------------------


def _cmd_dp_sgd(args: argparse.Namespace) -> int:
    from dplens.accountant.dp_sgd import dp_sgd_epsilon, dp_sgd_noise_multiplier

    if args.mechanism is not None:
        _no_unit_or_tuning_for_mf(args)
        return _cmd_dp_sgd_mf(args)
    _no_mf_flags(args)
    if args.examples_per_user_histogram is not None:  # per-user epsilon of heterogeneous users (privacy-unit block)
        return _cmd_dp_sgd_histogram(args)
    unit = _privacy_unit_arguments(args)
    if unit:  # one user, not one example (see the privacy-unit block below)
        from dplens.accountant.user_level import user_level_epsilon as dp_sgd_epsilon
        from dplens.accountant.user_level import user_level_noise_multiplier as dp_sgd_noise_multiplier

    run = dict(
        dataset_size=args.dataset_size,
        batch_size=args.batch_size,
        epochs=args.epochs,
        delta=args.delta,
        sampling=args.sampling,
        neighboring=args.neighboring,
        max_batch_size=args.max_batch_size,
    )
    run.update(unit)
    if (args.at_fpr is None) != (args.max_tpr is None):
        raise ValueError("--max-tpr and --at-fpr go together (no attack's TPR above T at FPR A)")
    if args.max_tpr is not None or args.max_advantage is not None:
        method = "pld" if args.method == "best" else args.method
        risk = dict(max_tpr=args.max_tpr, at_fpr=args.at_fpr, max_advantage=args.max_advantage)
        result = dp_sgd_noise_multiplier(**run, **risk, method=method)
        for warning in result.risk["warnings"]:
            print(f"dplens dp-sgd: {warning}", file=sys.stderr)
        text = (
            f"noise_multiplier = {result.noise_multiplier:.6g}  meets {result.risk['target']} (achieved "
            f"{result.risk['achieved']:.6g}, an upper bound); epsilon = {_fmt(result.epsilon)} at delta = "
            f"{args.delta:g}"
        )
    elif args.target_epsilon is not None:
        method = "pld" if args.method == "best" else args.method
        result = dp_sgd_noise_multiplier(**run, target_epsilon=args.target_epsilon, method=method)
        text = (
            f"noise_multiplier = {result.noise_multiplier:.6g}  gives epsilon = {_fmt(result.epsilon)} <= "
            f"{args.target_epsilon:g} at delta = {args.delta:g}"
        )
    else:
        result = dp_sgd_epsilon(**run, noise_multiplier=args.noise_multiplier, method=args.method)
        text = f"epsilon <= {_fmt(result.epsilon)}  (upper bound; delta = {args.delta:g}, method = {result.method})"
    payload, text = _with_tuning(args, result, result.to_dict(), text + "\n" + _dp_sgd_lines(result))
    _emit(payload, args.json, text)
    return 0


_MF_FLAGS = (
    "bands",
    "strategy",
    "nu",
    "blt_decay",
    "blt_scale",
    "min_separation",
    "max_participations",
    "monte_carlo",
    "seed",
)


def _no_mf_flags(args: argparse.Namespace) -> None:
    """Without --mechanism: the matrix-factorisation samplers and flags are refused (they would be ignored)."""
    if args.sampling in MF_SAMPLERS:
        raise ValueError(f"--sampling {args.sampling} applies to matrix-factorisation training only (--mechanism)")
    for name in _MF_FLAGS:
        if getattr(args, name) is not None:
            raise ValueError(f"--{name.replace('_', '-')} applies to matrix-factorisation training only (--mechanism)")


def _float_list(name: str, text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated numbers; got {text[:60]!r}") from None


def _load_strategy(path: str | None) -> Any:
    if path is None:
        return None
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValueError(f"--strategy: cannot read {path!r} as a .npy array ({type(err).__name__})") from None


def _no_unit_or_tuning_for_mf(args: argparse.Namespace) -> None:
    """A matrix-factorisation number is per example and per run: a user-level or tuning claim is refused, never
    answered with the example-level, single-run number."""
    if (
        args.privacy_unit != "example"
        or args.max_examples_per_user is not None
        or args.user_sampling
        or (args.examples_per_user_histogram is not None)
    ):
        raise ValueError(
            "--privacy-unit user is not accounted for --mechanism (matrix factorisation): its epsilon protects one "
            "example; use the DP-SGD sampler flags without --mechanism for a user-level number"
        )
    if args.tuning_runs is not None:
        raise ValueError("--tuning-runs is not accounted for --mechanism (matrix factorisation): one training only")


def _cmd_dp_sgd_mf(args: argparse.Namespace) -> int:
    """``dp-sgd --mechanism ...``: a matrix-factorisation training (dplens.accountant.mf_accounting)."""
    from dplens.accountant.mf_accounting import mf_epsilon, mf_noise_multiplier

    if args.max_tpr is not None or args.max_advantage is not None:
        raise ValueError("--max-tpr / --max-advantage are not offered with --mechanism: use --target-epsilon")
    if args.method == "rdp":
        raise ValueError("--method rdp is not offered with --mechanism (PLD for cyclic-poisson, exact GDP otherwise)")
    run = dict(
        mechanism=args.mechanism,
        sampling=args.sampling,
        dataset_size=args.dataset_size,
        batch_size=args.batch_size,
        epochs=args.epochs,
        delta=args.delta,
        bands=args.bands,
        strategy=_load_strategy(args.strategy),
        nu=args.nu,
        buf_decay=_float_list("--blt-decay", args.blt_decay),
        output_scale=_float_list("--blt-scale", args.blt_scale),
        min_separation=args.min_separation,
        max_participations=args.max_participations,
        max_batch_size=args.max_batch_size,
        neighboring=args.neighboring,
    )
    if args.target_epsilon is not None:
        if args.monte_carlo is not None:
            raise ValueError("--monte-carlo goes with --noise-multiplier (calibration is on the valid bound)")
        result = mf_noise_multiplier(target_epsilon=args.target_epsilon, **run)
        text = (
            f"noise_multiplier = {result.noise_multiplier:.6g}  gives epsilon = {_fmt(result.epsilon)} <= "
            f"{args.target_epsilon:g} at delta = {args.delta:g} ({result.bound})"
        )
    else:
        result = mf_epsilon(noise_multiplier=args.noise_multiplier, monte_carlo=args.monte_carlo, seed=args.seed, **run)
        kind = "certified bracket" if result.bound == "certified" else "upper bound"
        text = f"epsilon <= {_fmt(result.epsilon)}  ({kind}; delta = {args.delta:g})"
        if result.monte_carlo is not None:
            text += (
                f"\n  epsilon ~ {_fmt(result.epsilon_monte_carlo)}  (Monte Carlo ESTIMATE under the verification rule: "
                f"{result.monte_carlo['samples_per_direction']} samples per direction, base delta "
                f"{result.monte_carlo['base_delta']:.3g}; not a certified bound)"
            )
    payload = {**result.to_dict(), "privacy_unit": "example"}
    _emit(payload, args.json, text + "\n" + _mf_lines(result) + "\n  privacy unit: one example (one training run)")
    return 0


def _mf_lines(result: Any) -> str:
    lines = [
        f"  mechanism: {result.mechanism} ({result.bands} bands); sampling: {result.sampling}; {result.steps} steps; "
        f"neighbouring relation: {result.neighboring}",
        f"  sensitivity: {result.sensitivity:.6g} x clip norm ({'exact' if result.sensitivity_exact else 'upper'}"
        f"; {result.sensitivity_method})",
    ]
    if result.epsilon_lower is None:
        lines.append("  lower end: none known for this sampler")
    elif result.lower_bound == "certified":
        lines.append(f"  epsilon >= {_fmt(result.epsilon_lower)}  (certified lower end: the true epsilon lies between)")
    else:
        lines.append(f"  epsilon >= {_fmt(result.epsilon_lower)}  (LOWER BOUND only: an attained construction)")
    lines += [f"  note: {note}" for note in result.notes]
    return "\n".join(lines)


def _dp_sgd_lines(result: Any) -> str:
    """The sampler, the relation and the lower end, in words (the lower end labelled as what it is)."""
    per_epoch = f", {result.steps_per_epoch} per epoch" if result.steps_per_epoch else ""
    lines = [
        f"  sampling: {result.sampling}; neighbouring relation: {result.neighboring}; {result.steps} steps{per_epoch}"
    ]
    if result.epsilon_lower is None:
        lines.append("  lower end: none known for this sampler")
    elif result.lower_bound == "certified":
        lines.append(f"  epsilon >= {_fmt(result.epsilon_lower)}  (certified lower end: the true epsilon lies between)")
    else:
        lines.append(
            f"  epsilon >= {_fmt(result.epsilon_lower)}  (LOWER BOUND only: the best known attack on this sampler; "
            "the true epsilon lies between)"
        )
    lines.append(_privacy_unit_line(result))
    if getattr(result, "bracket_note", None):
        lines.append(f"  note: {result.bracket_note}")
    return "\n".join(lines)


# dp-sgd: the privacy unit (example, or user: at most K examples each, or users sampled)
# --------------------------------------------------------------------------------------------


def _add_privacy_unit_parser(sgd: Any) -> None:
    unit = sgd.add_argument_group("privacy unit (whose privacy the epsilon protects)")
    unit.add_argument(
        "--privacy-unit",
        choices=("example", "user"),
        default="example",
        help="example (default): one training example; user: one user with all of their examples",
    )
    unit.add_argument(
        "--max-examples-per-user",
        type=_positive_int,
        metavar="K",
        help="user: each user contributes at most K examples (example-level sampling: each example sampled alone)",
    )
    unit.add_argument(
        "--user-sampling",
        action="store_true",
        help="user: users are sampled (--batch-size counts users, q = B/U, steps = ceil(E*U/B)), each user's examples "
        "clipped together",
    )
    unit.add_argument("--users", type=_positive_int, metavar="U", help="the number of users U")
    unit.add_argument(
        "--examples-per-user-histogram",
        metavar="FILE",
        help='user: how many users hold how many examples (JSON {"examples": users} or CSV lines examples,users): '
        "the worst-case epsilon and every count's per-user epsilon",
    )
    tuning = sgd.add_argument_group("tuning (a hyperparameter search releasing its best run)")
    tuning.add_argument(
        "--tuning-runs",
        type=_number_type(float, lambda v: math.isfinite(v) and v >= 1, "a finite number >= 1 (runs on average)"),
        metavar="MEAN",
        help="the search trains a random number of runs (MEAN on average) and releases the best: epsilon includes it "
        "(Papernot & Steinke 2022)",
    )
    tuning.add_argument(
        "--tuning-distribution",
        choices=("geometric", "poisson", "logarithmic", "truncated-negative-binomial"),
        default="geometric",
        help="the distribution of the number of runs (default geometric)",
    )
    tuning.add_argument(
        "--tuning-shape",
        type=_number_type(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
        metavar="ETA",
        help="truncated-negative-binomial: its shape eta",
    )


def _privacy_unit_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The privacy-unit keyword arguments of the DP-SGD functions, the flags checked (one line naming each)."""
    k, users, n = args.max_examples_per_user, args.users, args.dataset_size
    if args.privacy_unit == "example":
        for flag, value in (("--max-examples-per-user", k), ("--users", users)):
            if value is not None:
                raise ValueError(
                    f"{flag} {value} needs --privacy-unit user (--privacy-unit example counts one example)"
                )
        if args.user_sampling:
            raise ValueError("--user-sampling needs --privacy-unit user (--privacy-unit example counts one example)")
        return {}
    if args.max_tpr is not None or args.max_advantage is not None:
        raise ValueError("--max-tpr and --max-advantage are per-example attack-risk targets: use --target-epsilon")
    if k is None and not args.user_sampling:
        raise ValueError(
            "--privacy-unit user needs --max-examples-per-user K (example-level sampling) or --user-sampling --users U"
        )
    if args.user_sampling and users is None:
        raise ValueError("--user-sampling needs --users U (the number of users the batches are drawn from)")
    if users is not None and users > n:
        raise ValueError(f"--users {users} exceeds --dataset-size {n} (every user holds at least one example)")
    if args.user_sampling and args.batch_size > users:
        raise ValueError(
            f"--batch-size {args.batch_size} exceeds --users {users} (with --user-sampling it counts users)"
        )
    if k is not None and users is not None and n > k * users:
        raise ValueError(f"--dataset-size {n} exceeds --max-examples-per-user {k} times --users {users} = {k * users}")
    return dict(privacy_unit="user", max_examples_per_user=k, user_sampling=args.user_sampling, users=users)


def _with_tuning(args: argparse.Namespace, result: Any, payload: dict[str, Any], text: str) -> tuple[dict, str]:
    """With ``--tuning-runs``: the search's epsilon (an upper bound including the selection) replaces the run's, which
    stays as ``epsilon_one_run``; the run's lower end is not one of the search's, so none is given."""
    if args.tuning_runs is None:
        if args.tuning_shape is not None or args.tuning_distribution != "geometric":
            raise ValueError("--tuning-distribution and --tuning-shape need --tuning-runs MEAN")
        return payload, text
    if args.target_epsilon is not None or args.max_tpr is not None or args.max_advantage is not None:
        raise ValueError("--tuning-runs accounts a given --noise-multiplier (calibrating a search is not supported)")
    if (args.tuning_distribution == "truncated-negative-binomial") != (args.tuning_shape is not None):
        raise ValueError("--tuning-shape ETA goes with --tuning-distribution truncated-negative-binomial (and only)")
    from dplens.accountant.dp_sgd import DpSgdRun
    from dplens.accountant.tuning import tuning_epsilon

    run = dict(
        noise_multiplier=result.noise_multiplier,
        dataset_size=args.dataset_size,
        batch_size=args.batch_size,
        epochs=args.epochs,
        sampling=args.sampling,
        neighboring=args.neighboring,
        max_batch_size=args.max_batch_size,
    )
    if result.privacy_unit == "user":
        from dplens.accountant.user_level import UserLevelRun

        unit = dict(max_examples_per_user=result.max_examples_per_user, user_sampling=result.user_sampling)
        event = UserLevelRun(**run, **unit, users=result.users)
    else:
        event = DpSgdRun(**run)
    study = tuning_epsilon(
        event, distribution=args.tuning_distribution, mean=args.tuning_runs, delta=args.delta, shape=args.tuning_shape
    )
    payload = dict(payload, epsilon=study.epsilon, epsilon_one_run=result.epsilon, epsilon_lower=None, lower_bound=None)
    payload.update(tuning=study.to_dict()["tuning"], includes_tuning=True, method=study.method)
    text = (
        f"epsilon <= {_fmt(study.epsilon)}  (upper bound INCLUDING the tuning: {args.tuning_distribution}, "
        f"{args.tuning_runs:g} runs on average, best released; {study.method}; delta = {args.delta:g})\n"
        f"  one run alone: epsilon <= {_fmt(result.epsilon)}\n{text}"
    )
    return payload, text


def _privacy_unit_line(result: Any) -> str:
    unit = getattr(result, "privacy_unit", "example")
    if unit == "example":
        return "  privacy unit: example (one training example; a user with several examples has a larger epsilon)"
    if result.user_sampling:
        return (
            f"  privacy unit: user ({result.users} users sampled, q = {result.sampling_rate:.6g}; each user's examples "
            "clipped together)"
        )
    return (
        f"  privacy unit: user (at most {result.max_examples_per_user} examples per user, each sampled as an "
        f"example: {result.sampling} sampling)"
    )


#: The most rows of a histogram's per-count table the text output prints (--json has them all).
_HISTOGRAM_ROWS_SHOWN = 30


def _histogram_flags(args: argparse.Namespace) -> None:
    """The flags --examples-per-user-histogram goes with (one line naming each conflict)."""
    flag = "--examples-per-user-histogram"
    if args.privacy_unit != "user":
        raise ValueError(f"{flag} needs --privacy-unit user (--privacy-unit example counts one example)")
    if args.user_sampling:
        raise ValueError(
            f"{flag} describes example-level sampling: under --user-sampling every user has the same epsilon"
        )
    if args.target_epsilon is not None or args.max_tpr is not None or args.max_advantage is not None:
        raise ValueError(
            f"{flag} accounts a given --noise-multiplier; to calibrate, use --max-examples-per-user with the "
            "histogram's largest count"
        )
    if args.tuning_runs is not None:
        raise ValueError(f"{flag} is not accounted with --tuning-runs (one training run per user)")


def _read_histogram(args: argparse.Namespace) -> dict[int, int]:
    from dplens._files import read_input_bytes
    from dplens.accountant.user_level import parse_histogram

    path = args.examples_per_user_histogram
    name = f"--examples-per-user-histogram {path!r}"
    raw = read_input_bytes(path, what="--examples-per-user-histogram file", max_bytes=64 * 2**20)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not UTF-8 text") from None
    histogram = parse_histogram(text, name=name)
    examples = sum(k * n for k, n in histogram.items())
    users = sum(histogram.values())
    if users == 0:
        raise ValueError(f"{name} has no user (every count of users is 0)")
    if examples > args.dataset_size:
        raise ValueError(f"{name} holds {examples} examples, more than --dataset-size {args.dataset_size}")
    if args.users is not None and args.users != users:
        raise ValueError(f"--users {args.users} differs from the {users} users of {name}")
    k = args.max_examples_per_user
    if k is not None and k < max(histogram):
        raise ValueError(f"{name} has users with {max(histogram)} examples, more than --max-examples-per-user {k}")
    return histogram


def _cmd_dp_sgd_histogram(args: argparse.Namespace) -> int:
    """Heterogeneous users: the worst case (the guarantee) and every count's per-user epsilon."""
    from dplens.accountant.user_level import user_epsilons

    _histogram_flags(args)
    histogram = _read_histogram(args)
    out = user_epsilons(
        histogram,
        batch_size=args.batch_size,
        epochs=args.epochs,
        noise_multiplier=args.noise_multiplier,
        delta=args.delta,
        method=args.method,
        sampling=args.sampling,
        dataset_size=args.dataset_size,
        max_examples_per_user=args.max_examples_per_user,
        neighboring=args.neighboring,
        max_batch_size=args.max_batch_size,
    )
    worst = out.worst_case
    payload = {**worst.to_dict(), **out.to_dict(), "histogram_file": args.examples_per_user_histogram}
    lines = [
        f"epsilon <= {_fmt(worst.epsilon)}  (upper bound for every user: the worst case, at most "
        f"{worst.max_examples_per_user} examples; delta = {args.delta:g}, method = {worst.method})",
        _dp_sgd_lines(worst),
        f"  per-user epsilon ({out.users} users holding {out.examples} of the {out.dataset_size} examples; "
        f"{len(set(out.accounted_at))} counts accounted in {out.seconds:.2f} s):",
        "    examples      users  epsilon <=  epsilon >=",
    ]
    for (k, n, eps, low), at in list(zip(out.rows, out.accounted_at, strict=True))[:_HISTOGRAM_ROWS_SHOWN]:
        mark = "" if at == k else f"  (bracketed: upper from {at} examples)"
        lines.append(f"    {k:8d} {n:10d}  {_fmt(eps):>10}  {'-' if low is None else _fmt(low):>10}{mark}")
    if len(out.rows) > _HISTOGRAM_ROWS_SHOWN:
        lines.append(f"    ... {len(out.rows) - _HISTOGRAM_ROWS_SHOWN} more counts (all in --json)")
    quantiles = ", ".join(f"{p:.0%} of users <= {_fmt(out.quantile(p))}" for p in (0.5, 0.9, 0.99))
    lines.append(f"  per-user epsilon: {quantiles} (upper bounds; the guarantee is the worst case)")
    _emit(payload, args.json, "\n".join(lines))
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
    if args.target is not None:
        return _cmd_audit_target(args)
    if args.spec is None:
        raise CliError("audit needs a SPEC file, or --target MODULE:NAME with --pair and --claim-epsilon")
    if getattr(args, "memory_budget", None) is not None:
        raise CliError("--memory-budget applies to --target audits (a SPEC audit's memory is flat in its trials)")
    return _cmd_audit_spec(args)


def _target_audit_text(result: Any) -> str:
    """The human-readable summary of a target audit: the bound, every score tried, the float evidence, the
    reproducibility note and the verdict."""
    level = f"{result.confidence:.0%}"
    lines = [
        f"epsilon >= {result.epsilon_lower_bound:.6g}  (valid {level} lower bound, delta = {result.delta:g}, "
        f"{result.trials} trials per side, best score: {result.best_score})",
        f"  target: {result.target['name']} [{result.target['call']}]",
        f"  pair: {result.pair['description']}: D = {result.pair['data']}, D' = {result.pair['neighbour']}",
        f"  claimed epsilon: {result.epsilon_claimed:.6g}; measurability ceiling: {result.ceiling:.6g}",
        f"  scores tried ({len(result.scores)}, significance split evenly):",
    ]
    for score in result.scores:
        lines.append(f"    {score['name']}: epsilon >= {score['epsilon_lower_bound']:.6g}")
    for evidence in result.float_evidence:
        lines.append(f"  float check: {evidence['sentence']}")
    for pair in result.pairs_tried[:5]:
        lines.append(f"  pair tried: {pair['change']} (ESTIMATE {pair['estimate']:.3g}, not a bound)")
    lines.append(f"  {result.reproducibility_note}")
    lines.append(f"verdict: {result.verdict.value}. {result.verdict_reason}")
    return "\n".join(lines)


def _cmd_audit_target(args: argparse.Namespace) -> int:
    """``dplens audit --target``: :func:`dplens.audit` on the loaded target and pair, as from Python."""
    from dplens._api import audit
    from dplens.auditing.targets import load_pair, load_target

    if args.spec is not None:
        raise CliError("give either a SPEC or --target, not both")
    if args.pair is None or args.claim_epsilon is None or args.trials is None:
        raise CliError("--target needs --pair PAIR.json, --claim-epsilon E and --trials N")
    if getattr(args, "game", None) is not None:
        raise CliError("--game applies to a SPEC audit, not to --target")
    for flag, value in (("--scheduler", args.scheduler), ("--checkpoint", args.checkpoint), ("--delta", args.delta)):
        if value is not None:
            raise CliError(f"{flag} is not supported with --target (use --workers; the claim's delta is --claim-delta)")
    target = load_target(args.target)
    pair = load_pair(args.pair)
    score = None
    if args.score is not None:
        from dplens.auditing.target_game import load_score

        load_score(args.score)
        score = args.score
    result = audit(
        target,
        pair,
        claim=(args.claim_epsilon, args.claim_delta),
        trials=args.trials,
        seed=args.seed,
        workers=args.workers,
        confidence=args.confidence,
        score=score,
        progress=not args.quiet,
        memory_budget=args.memory_budget,
    )
    _emit(result.to_dict(), args.json, _target_audit_text(result))
    return _verdict_status(args, result)


def _cmd_audit_spec(args: argparse.Namespace) -> int:
    """``dplens audit SPEC``: :func:`dplens.audit` on the spec, the same call a user makes from Python."""
    from dplens._api import audit
    from dplens.auditing.attribute import AttributeAuditResult, ClaimReading
    from dplens.auditing.scores import OneRunAuditResult
    from dplens.auditing.spec_games import attribute_summary, resolve_game
    from dplens.spec import load_spec

    if args.checkpoint is not None:
        _output_file(args.checkpoint, "--checkpoint")
    spec = load_spec(args.spec)
    game = resolve_game(spec, getattr(args, "game", None))
    with _observing(args):
        result = audit(
            spec,
            game=game.value,
            trials=args.trials,
            delta=args.delta,
            confidence=args.confidence,
            seed=args.seed,
            workers=args.workers,
            scheduler=args.scheduler,
            checkpoint=args.checkpoint,
            progress=not args.quiet,
        )
    payload = result.to_dict() | {"spec_sha256": spec.sha256, "audit_game": game.value}
    if isinstance(result, AttributeAuditResult):
        text = attribute_summary(result)
        if result.reading is ClaimReading.FEATURE_DP:  # the bound the verdict compares with the claim
            payload["replace_one_epsilon_lower_bound"] = payload["epsilon_lower_bound"]
            payload["epsilon_lower_bound"] = payload["feature_dp_epsilon_lower_bound"]
    elif isinstance(result, OneRunAuditResult):
        text = result.summary()
    else:
        text = _audit_text(result)
    _emit(payload, args.json, text)
    return _verdict_status(args, result)


# --------------------------------------------------------------------------------------------
# audit-scores
# --------------------------------------------------------------------------------------------


def _cmd_audit_scores(args: argparse.Namespace) -> int:
    from dplens.auditing.scores import SplitSelection, audit_scores, load_scores_file

    scores, member = load_scores_file(args.file)
    options: dict[str, Any] = {"seed": args.seed} if args.one_run else {"selection": SplitSelection(seed=args.seed)}
    result = audit_scores(
        scores,
        member,
        claim=args.claim_epsilon,
        delta=args.delta,
        confidence=args.confidence,
        one_run=args.one_run,
        claim_source="--claim-epsilon",
        **options,
    )
    payload = result.to_dict() | {"file": str(args.file)}
    text = result.summary()
    if args.estimators:
        from dplens.auditing.score_auditor import ScoreAuditor

        numbers = ScoreAuditor(scores[member], scores[~member]).every_estimator(
            1.0 - args.confidence, args.delta, one_run=args.one_run
        )
        payload["estimators"] = [n.to_dict() for n in numbers]
        text += "\nevery estimator (BOUND: valid at the confidence; ESTIMATE / HEURISTIC: not a bound):"
        text += "".join(
            f"\n  {n.kind.upper():9} {n.name}{'@' + format(n.details['fpr'], 'g') if 'fpr' in n.details else ''} = "
            f"{n.value:.6g}  [{n.method}]"
            for n in numbers
        )
    _emit(payload, args.json, text)
    return _verdict_status(args, result)


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


def _read_audit_result(path: str) -> dict[str, Any]:
    """A saved audit result (``dplens audit ... --json``): a JSON object, read with one-line errors."""
    from dplens._files import read_input_bytes

    raw = read_input_bytes(path, what="audit result file", max_bytes=256 * 2**20)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"audit result file {path!r} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(f"audit result file {path!r} must hold a JSON object; got {type(data).__name__}")
    return data


def _cmd_report_audit(args: argparse.Namespace) -> int:
    from dplens.reports.audit_page import write_audit_report

    if args.spec is not None:
        raise CliError("give either a SPEC or --audit RESULT.json, not both")
    result = _read_audit_result(args.audit)
    files = write_audit_report(
        result,
        Path(args.output),
        title=args.title or Path(args.audit).stem,
        source=args.audit,
        command=["dplens", *getattr(args, "argv", [])],
    )
    print(f"verdict: {files.verdict}")
    print(f"dplens report: wrote {files.html.resolve()}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    if getattr(args, "audit", None) is not None:
        if getattr(args, "ledger", None) is not None:
            raise CliError("--ledger adds a section to a SPEC's report, not to --audit RESULT.json")
        if getattr(args, "implementation_evidence", None) is not None:
            raise CliError("--implementation-evidence adds a section to a SPEC's report, not to --audit RESULT.json")
        return _cmd_report_audit(args)
    if args.spec is None:
        raise CliError("report needs a SPEC file, or --audit RESULT.json (a saved audit result)")
    from dplens._api import AuditMode, generate_report
    from dplens.reports.defaults import DEFAULT_TRIALS
    from dplens.spec import load_spec

    _output_dir(args.output, "-o")
    spec = load_spec(args.spec)
    deployment = None
    if getattr(args, "deployment", None) is not None:
        from dplens.registry.deployment import load_deployment_file

        deployment = load_deployment_file(args.deployment)
    if args.no_audit and args.trials is not None:
        raise ValueError("--no-audit and --trials exclude each other")
    if args.no_audit:
        mode = AuditMode.OFF
    elif args.trials is not None:
        mode = AuditMode.REQUIRED  # the user asked for an audit: failing to run it is an error
    else:
        mode = AuditMode.AUTO
    with _observing(args):
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
            ledger=args.ledger,
            deployment=deployment,
            implementation_evidence=getattr(args, "implementation_evidence", None),
        )
    report = files.report
    print(f"verdict: {report.verdict.status.value}. {report.verdict.sentence}")
    print(_registry_line(files))
    print(f"dplens report: wrote {files.html.resolve()}")  # last: scripts read the page's path from it
    return 0


def _registry_line(files: Any) -> str:
    """What became of the registry record: written (and its tier), or why not."""
    entry = files.registry
    if entry is None:
        return (
            "dplens report: registry-entry.yaml not written: the spec has no [deployment] table (a registry record "
            "needs name, data_curators, description, intended_use, data_product_type, data_product_region, "
            "publication_date)"
        )
    needs = f"; tier {int(entry.tier) + 1} needs [deployment] {', '.join(entry.missing_for_next_tier)}"
    return (
        f"dplens report: wrote {files.registry_entry.resolve()} (registry tier {int(entry.tier)}"
        f"{needs if entry.missing_for_next_tier else ''})"
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    from dplens.demo import run_demo

    _output_dir(args.output, "-o")
    return run_demo(Path(args.output), progress=not args.quiet)


# --------------------------------------------------------------------------------------------
# budget (the ledger across releases: dplens.ledger)
# --------------------------------------------------------------------------------------------

#: Values of dplens.ledger.Mode and dplens.ledger.Period (a test checks them against the enums).
LEDGER_MODES = ("planned", "adaptive")
LEDGER_PERIODS = ("none", "day", "week", "month", "quarter", "year")
RELATIONS = ("add_remove", "replace_one", "zero_out")
EXIT_REFUSED = 3
DEFAULT_LOCK_TIMEOUT = 60.0


def _open_ledger(args: argparse.Namespace, *, create: bool = False, reading: bool = False):
    from dplens.ledger import Ledger

    location = args.db
    read_only = False
    if reading and "://" not in location:
        path = Path(location)
        read_only = path.is_file() and not (path.stat().st_mode & 0o222)
    return Ledger.open(location, create=create, read_only=read_only, timeout=args.lock_timeout)


def _cmd_budget_create(args: argparse.Namespace) -> int:
    with _open_ledger(args, create=True) as ledger:
        budget = ledger.create_budget(
            name=args.name,
            unit=args.unit,
            epsilon=args.epsilon,
            rho=args.rho,
            mu=args.mu,
            delta=args.delta,
            mode=args.mode,
            period=args.period,
            neighbouring=args.neighbouring,
        )
        location = ledger.location
    target = budget.target
    what = {"rho": f"rho = {_fmt(target.rho or 0)}", "mu": f"mu = {_fmt(target.mu or 0)}"}.get(target.kind, "")
    text = (
        f"budget {budget.name!r} in {location}: epsilon <= {_fmt(target.epsilon)} at delta = {target.delta:g}"
        f"{' (' + what + ')' if what else ''}, {budget.mode.value}, period {budget.period.value}, "
        f"unit: {budget.unit}; rule: {budget.rule['theorem']}"
    )
    _emit(budget.to_dict() | {"ledger": location}, args.json, text)
    return 0


def _charge_time(text: str | None):
    if text is None:
        return None
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--time must be an ISO 8601 time with a timezone, e.g. 2026-11-27T12:00:00Z; got {text!r}"
        ) from None
    if when.tzinfo is None:
        raise ValueError(f"--time must name its timezone (e.g. a trailing Z for UTC); got {text!r}")
    return when


def _cmd_budget_charge(args: argparse.Namespace) -> int:
    when = _charge_time(args.time)
    with _open_ledger(args) as ledger:
        result = ledger.charge(
            args.spec, release=args.release, budgets=args.budget, charged_by=args.charged_by, time=when
        )
    if result.accepted and not result.duplicate:
        parts = [
            f"{b.budget} [{b.period}]: spent epsilon <= {_fmt(b.spent_epsilon)} of {_fmt(b.target_epsilon)} "
            f"at delta = {b.delta:g}, remaining >= {_fmt(b.remaining_epsilon)}"
            for b in result.budgets
        ]
        text = f"accepted: {result.reason}; " + "; ".join(parts)
    else:
        text = ("accepted: " if result.accepted else "") + result.reason
    if result.tuning:
        from dplens.ledger.studies import study_words

        text += f"\n  {study_words(result.tuning)}"
    _emit(result.to_dict(), args.json, text)
    return 0 if result.accepted else EXIT_REFUSED


def _budget_risk_lines(view: dict[str, Any], name: str) -> list[str]:
    """The --risk lines of one budget: per period what was spent, and what the whole budget allows (upper bounds)."""
    item = next(b for b in view["budgets"] if b["name"] == name)

    def words(risk: dict[str, Any]) -> str:
        tprs = " / ".join(_percent(v) for v in risk["tpr_upper"].values())
        return f"TPR <= {tprs}, advantage <= {risk['advantage_upper']:.4g}"

    fprs = " / ".join(f"{f * 100:g} %" for f in view["fprs"])
    lines = [f"  as attack risk (upper bounds; at FPR {fprs}): the whole budget allows {words(item['budget'])}"]
    lines += [f"    {p['period']}: spent so far {words(p['spent'])} [{p['source']}]" for p in item["periods"]]
    return lines


def _cmd_budget_status(args: argparse.Namespace) -> int:
    with _open_ledger(args, reading=True) as ledger:
        status = ledger.status()
        view = None
        if args.risk or args.fpr:
            from dplens.ledger.risk_view import status_risk

            view = status_risk(ledger, status, fprs=tuple(args.fpr) if args.fpr else None)
    if args.json:
        payload = status.to_dict() | ({"risk": view} if view is not None else {})
        print(json.dumps(payload, sort_keys=True))
        return 0
    lines = [f"ledger {status.location} (schema version {status.schema_version}), {status.time_utc}"]
    if not status.budgets:
        lines.append("  no budget yet (dplens budget create)")
    for item in status.budgets:
        budget = item.budget
        lines.append(
            f"budget {budget.name!r} ({budget.mode.value}, period {budget.period.value}, unit: {budget.unit}, "
            f"{budget.neighbouring}): epsilon <= {_fmt(budget.target.epsilon)} at delta = {budget.target.delta:g}"
        )
        lines.append(
            f"  current period {item.current_period}: spent epsilon <= {_fmt(item.spent_epsilon)} (upper bound), "
            f"remaining >= {_fmt(item.remaining_epsilon)} (lower bound)"
        )
        for period in item.periods:
            bracket = (
                f"; certified bracket [{_fmt(period.spent_epsilon_lower)}, {_fmt(period.spent_epsilon)}]"
                if period.spent_epsilon_lower is not None
                else ""
            )
            lines.append(
                f"  {period.period}: {period.releases} release(s), spent <= {_fmt(period.spent_epsilon)} "
                f"[{period.spent_method}]{bracket}, remaining >= {_fmt(period.remaining_epsilon)}"
            )
            state = period.filter or {}
            if isinstance(state.get("used"), float | int):
                lines.append(f"    filter: {state['quantity']} used {_fmt(state['used'])} of {_fmt(state['budget'])}")
            if period.largest:
                top = ", ".join(f"{r.name} ({_fmt(r.epsilon_alone)})" for r in period.largest)
                lines.append(f"    largest (epsilon of the release alone): {top}")
        lines += _study_lines(item.studies)
        if item.chargers:
            lines.append("  charged by: " + ", ".join(f"{k} ({v})" for k, v in sorted(item.chargers.items())))
        if view is not None:
            lines += _budget_risk_lines(view, budget.name)
    print("\n".join(lines))
    return 0


def _study_lines(studies: dict[str, Any], shown: int = 20) -> list[str]:
    """``budget status``: each release that is a tuning study (its runs, their distribution; issue 49)."""
    if not studies:
        return []
    from dplens.ledger.studies import study_words

    lines = [f"  release {name!r}: {study_words(rows)}" for name, rows in list(studies.items())[:shown]]
    if len(studies) > shown:
        lines.append(f"  ... and {len(studies) - shown} more tuning studies (--json lists them)")
    return lines


def _cmd_budget_verify(args: argparse.Namespace) -> int:
    with _open_ledger(args, reading=True) as ledger:
        result = ledger.verify()
    text = f"integrity {result.integrity}; {result.budgets} budget(s), {result.releases} release(s); " + (
        "every invariant holds" if result.ok else "PROBLEMS: " + "; ".join(result.problems)
    )
    _emit(result.to_dict(), args.json, text)
    return 0 if result.ok else 1


def _add_budget_parser(sub: Any) -> None:
    budget = sub.add_parser("budget", help="a privacy budget across releases (a ledger: SQLite file or PostgreSQL)")
    commands = budget.add_subparsers(dest="budget_command", required=True, parser_class=_Parser)
    lock = {
        "type": _non_negative,
        "default": DEFAULT_LOCK_TIMEOUT,
        "metavar": "SECONDS",
        "help": f"wait this long for another writer's lock (default {DEFAULT_LOCK_TIMEOUT:g})",
    }
    db_help = "the ledger: a file (SQLite) or a postgresql:// URL"

    create = commands.add_parser("create", help="create a budget (and the ledger, if it does not exist)")
    create.add_argument("db", help=db_help)
    create.add_argument("--unit", required=True, help="the privacy unit, in words (e.g. 'one person')")
    target = create.add_mutually_exclusive_group(required=True)
    target.add_argument("--epsilon", type=_non_negative, help="the budget's epsilon (at --delta)")
    target.add_argument("--rho", type=_non_negative, help="a zCDP budget rho instead (zCDP filter)")
    target.add_argument("--mu", type=_non_negative, help="a Gaussian DP budget mu instead (GDP filter; Gaussians only)")
    create.add_argument("--delta", type=_probability, required=True, help="the delta of the budget's epsilon")
    create.add_argument(
        "--mode",
        choices=list(LEDGER_MODES),
        default="planned",
        help="planned (parameters fixed in advance) or "
        "adaptive (each release may depend on earlier outputs: a privacy filter decides)",
    )
    create.add_argument("--period", choices=list(LEDGER_PERIODS), default="none", help="one budget per period")
    create.add_argument("--name", default="default", help="the budget's name (default: default)")
    create.add_argument("--neighbouring", choices=list(RELATIONS), default="add_remove", help="neighbouring relation")
    create.add_argument("--lock-timeout", **lock)
    _add_json(create)
    create.set_defaults(func=_cmd_budget_create)

    charge = commands.add_parser("charge", help="charge a release: exit 0 accepted, 3 refused, 2 bad input")
    charge.add_argument("db", help=db_help)
    charge.add_argument("spec", help="what the release spent: a spec, an Accountant ledger JSON or a report.json")
    charge.add_argument("--release", required=True, help="the release's name (unique per budget)")
    charge.add_argument("--budget", action="append", metavar="NAME", help="charge this budget (default: all)")
    charge.add_argument("--charged-by", help="who charges it (default: user@host)")
    charge.add_argument("--time", help="the release's time, ISO 8601 with a timezone (default: now)")
    charge.add_argument("--lock-timeout", **lock)
    _add_json(charge)
    charge.set_defaults(func=_cmd_budget_charge)

    status = commands.add_parser("status", help="spent and remaining per budget and period, releases, top spenders")
    status.add_argument("db", help=db_help)
    status.add_argument(
        "--risk",
        action="store_true",
        help="also as attack risk: the largest membership-attack TPR at 0.1 %%, 1 %%, 10 %% FPR and the advantage, "
        "spent so far and allowed by the whole budget",
    )
    status.add_argument(
        "--fpr", type=_probability, nargs="+", action="extend", metavar="A", help="with --risk: these FPRs instead"
    )
    status.add_argument("--lock-timeout", **lock)
    _add_json(status)
    status.set_defaults(func=_cmd_budget_status)

    verify = commands.add_parser("verify", help="integrity check and invariants recomputed from the stored releases")
    verify.add_argument("db", help=db_help)
    verify.add_argument("--lock-timeout", **lock)
    _add_json(verify)
    verify.set_defaults(func=_cmd_budget_verify)


# registry
# --------------------------------------------------------------------------------------------


def _cmd_registry_check(args: argparse.Namespace) -> int:
    from dplens.registry.check import CheckStatus, check_records

    schema = None
    if args.schema is not None:
        from dplens.registry.schema import load_schema_file

        schema = load_schema_file(args.schema)
    result = check_records(args.paths, schema=schema, delta=args.delta)
    if result.errors:  # bad input: one line per file, nothing on stdout
        for _, message in result.errors:
            _error(message)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(result.to_dict(), sort_keys=True, default=_json_default))
    else:
        for record in result.records:
            print(record.line())
        counts = result.to_dict()["counts"]
        summary = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if n)
        print(f"dplens registry check: {len(result.records)} record(s): {summary}")
    strict = {CheckStatus.INCONSISTENT, CheckStatus.NEEDS_CITATION}
    return 1 if args.strict and any(r.status in strict for r in result.records) else 0


def _cmd_registry_export(args: argparse.Namespace) -> int:
    from dplens.reports.registry_entry import export_entry, read_report, write_entry

    if args.output is not None:
        _output_file(args.output, "-o")
    override = None
    if args.deployment is not None:
        from dplens.registry.deployment import load_deployment_file

        override = load_deployment_file(args.deployment)
    report = read_report(args.report)
    entry = export_entry(report, override=override)
    if args.output is None:
        print(entry.to_yaml(), end="")
        return 0
    path = write_entry(entry, Path(args.output))
    needs = f"; tier {int(entry.tier) + 1} needs [deployment] {', '.join(entry.missing_for_next_tier)}"
    print(
        f"dplens registry export: wrote {path.resolve()} (tier {int(entry.tier)}"
        f"{needs if entry.missing_for_next_tier else ''})"
    )
    return 0


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
    root = _output_dir(args.output, "-o")
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
    """The argument parser of the ``dplens`` command: the single source of the command-line reference (the docs
    site generates its CLI page from it) and of ``dplens --help``.

    Example:
        >>> sorted(build_parser().parse_args(["account", "spec.toml", "--delta", "1e-5"]).__dict__)[:3]
        ['command', 'conversion', 'delta']
    """
    parser = _Parser(prog="dplens", description="Differential-privacy accounting, auditing and reports.")
    parser.add_argument("--version", action="version", version=f"dplens {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_account_parser(sub)
    _add_calibrate_parser(sub)
    _add_risk_parser(sub)
    _add_sweep_parser(sub)
    _add_dp_sgd_parser(sub)
    _add_audit_parser(sub)
    _add_audit_scores_parser(sub)
    _add_check_dp_sgd_parser(sub)
    _add_report_parser(sub)
    _add_registry_parser(sub)
    _add_demo_parser(sub)
    _add_reproduce_parser(sub)
    _add_budget_parser(sub)
    return parser


def _add_json(parser: Any) -> None:
    """The ``--json`` switch every reporting subcommand shares."""
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _add_tolerance(parser: Any, help_text: str) -> None:
    """The PLD route's ``--tolerance`` (a relative width in (0, 1], default :data:`DEFAULT_TOLERANCE`)."""
    parser.add_argument("--tolerance", type=_probability, default=DEFAULT_TOLERANCE, help=help_text)


def _spec_command(sub: Any, name: str, help_text: str) -> Any:
    """A subcommand that reads one spec (its first positional argument)."""
    parser = sub.add_parser(name, help=help_text)
    parser.add_argument("spec", help="TOML or JSON spec file")
    return parser


def _add_account_parser(sub: Any) -> None:
    account = _spec_command(sub, "account", "epsilon for a delta, or delta for an epsilon")
    target = account.add_mutually_exclusive_group(required=True)
    target.add_argument("--delta", type=_probability, help="report epsilon at this delta")
    target.add_argument("--epsilon", type=_non_negative, help="report delta at this epsilon")
    account.add_argument(
        "--method", choices=list(METHODS), default="best", help="accounting route; best: the smallest valid epsilon"
    )
    account.add_argument(
        "--conversion",
        choices=list(CONVERSIONS),
        default="optimal",
        help="RDP to (epsilon, delta) conversion; 'classic' reproduces legacy numbers",
    )
    _add_tolerance(
        account, f"PLD: refine until (epsilon - epsilon_lower) <= TOLERANCE * epsilon (default {DEFAULT_TOLERANCE:g})"
    )
    _add_json(account)
    account.set_defaults(func=_cmd_account)


def _add_calibrate_parser(sub: Any) -> None:
    cal = _spec_command(
        sub, "calibrate", "smallest noise (or largest budget) meeting a target epsilon or an attack-risk target"
    )
    cal.add_argument("--param", required=True, help="parameter to calibrate, e.g. noise_multiplier, steps")
    cal.add_argument("--target-epsilon", type=_non_negative, help="the epsilon the answer must not exceed")
    cal.add_argument(
        "--delta",
        type=_probability,
        help="the delta of --target-epsilon; with a risk target, the delta of the epsilon shown beside the answer "
        "(default: the spec's claim, else 1e-5)",
    )
    cal.add_argument(
        "--max-tpr", type=_probability, metavar="T", help="risk target: no attack's TPR above T at --at-fpr"
    )
    cal.add_argument("--at-fpr", type=_probability, metavar="A", help="the false-positive rate of --max-tpr")
    cal.add_argument(
        "--max-advantage",
        type=_probability,
        metavar="V",
        help="risk target: no attack's TPR - FPR above V (leaves the TPR at low FPR open: a warning says how high)",
    )
    cal.add_argument(
        "--method",
        choices=list(METHODS),
        help="accounting route of the calibration (default: pld; best: a calibration on every route that applies, "
        "the least noise kept; with a risk target, best: pld where it applies, else exact, else rdp)",
    )
    cal.add_argument(
        "--bracket", type=float, nargs=2, metavar=("LOW", "HIGH"), help="search the parameter in [LOW, HIGH]"
    )
    _add_tolerance(
        cal, f"PLD: relative width of the certified epsilon bracket at the answer (default {DEFAULT_TOLERANCE:g})"
    )
    _add_json(cal)
    cal.set_defaults(func=_cmd_calibrate)


def _add_risk_parser(sub: Any) -> None:
    rsk = _spec_command(
        sub, "risk", "attack risk: the largest membership-attack TPR at given FPRs, advantage, Bayes success"
    )
    rsk.add_argument(
        "--fpr",
        type=_probability,
        nargs="+",
        action="extend",
        metavar="A",
        help="false-positive rates at which to bound the attack TPR (default 0.001 0.01 0.1)",
    )
    rsk.add_argument(
        "--prior", type=_probability, help="also bound a Bayesian attacker's success, for this prior of membership"
    )
    rsk.add_argument("--method", choices=list(METHODS), default="best", help="route; best: the tightest that apply")
    _add_tolerance(
        rsk, f"PLD: refine until every bracket is within TOLERANCE (relative; default {DEFAULT_TOLERANCE:g})"
    )
    _add_json(rsk)
    rsk.set_defaults(func=_cmd_risk)


def _add_sweep_parser(sub: Any) -> None:
    swp = _spec_command(sub, "sweep", "epsilon for every configuration of a grid of spec parameters (CSV or JSON)")
    swp.add_argument(
        "--param",
        type=_sweep_param,
        action="append",
        required=True,
        metavar="NAME=LO:HI:N",
        help="a swept parameter: N values from LO to HI (':log' spaces them geometrically; or NAME=V1,V2,...)",
    )
    swp.add_argument("--delta", type=_probability, required=True, help="report epsilon at this delta")
    swp.add_argument(
        "--method", choices=list(METHODS), default="rdp", help="rdp (vectorised, default), pld, exact or best"
    )
    _add_tolerance(swp, f"PLD: relative width of each certified epsilon bracket (default {DEFAULT_TOLERANCE:g})")
    out = swp.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object (default: CSV on stdout)")
    out.add_argument("-o", "--output", help="write FILE (.json: JSON, else CSV with a figure FILE.png next to it)")
    swp.add_argument("--no-plot", action="store_true", help="with -o FILE.csv: no figure")
    swp.add_argument("--quiet", action="store_true", help="no progress bar")
    swp.set_defaults(func=_cmd_sweep)


def _add_dp_sgd_parser(sub: Any) -> None:
    sgd = sub.add_parser("dp-sgd", help="epsilon of a DP-SGD run, or the noise multiplier for a target epsilon")
    sgd.add_argument("--dataset-size", type=_positive_int, required=True, help="number of training examples N")
    sgd.add_argument("--batch-size", type=_positive_int, required=True, help="(expected) batch size B")
    sgd.add_argument("--epochs", type=_non_negative, required=True, help="epochs E (steps = ceil(E*N/B))")
    sgd_target = sgd.add_mutually_exclusive_group(required=True)
    sgd_target.add_argument("--noise-multiplier", type=_non_negative, help="noise std / clipping norm")
    sgd_target.add_argument("--target-epsilon", type=_non_negative, help="calibrate the noise multiplier instead")
    sgd_target.add_argument(
        "--max-tpr",
        type=_probability,
        metavar="T",
        help="calibrate to a risk target: no attack's TPR above T at --at-fpr",
    )
    sgd_target.add_argument(
        "--max-advantage",
        type=_probability,
        metavar="V",
        help="calibrate to a risk target: no attack's TPR - FPR above V",
    )
    sgd.add_argument("--at-fpr", type=_probability, metavar="A", help="the false-positive rate of --max-tpr")
    sgd.add_argument("--delta", type=_probability, required=True, help="the delta of the (epsilon, delta) statement")
    sgd.add_argument(
        "--method", choices=list(METHODS), default="best", help="accounting route; best: the smallest valid epsilon"
    )
    sgd.add_argument(
        "--sampling",
        choices=SAMPLERS + MF_SAMPLERS,
        default="poisson",
        help="how the training drew its batches (balls-and-bins: a fresh allocation each epoch; shuffle: a new "
        "permutation each epoch cut into fixed-size batches; fixed-bins: one allocation cycled)",
    )
    sgd.add_argument(
        "--neighboring",
        choices=("add_remove", "zero_out", "replace_one"),
        help="neighbouring relation (default: add_remove for variable batch sizes, zero_out for fixed ones)",
    )
    sgd.add_argument(
        "--max-batch-size", type=_positive_int, help="truncated-poisson: the largest batch the loader keeps"
    )
    _add_privacy_unit_parser(sgd)
    _add_mf_arguments(sgd)
    _add_json(sgd)
    sgd.set_defaults(func=_cmd_dp_sgd)


def _add_mf_arguments(sgd: Any) -> None:
    """Matrix-factorisation (correlated-noise) training: ``dp-sgd --mechanism ...`` (issue 48's contract)."""
    mf = sgd.add_argument_group("matrix-factorisation training (correlated noise)")
    mf.add_argument(
        "--mechanism",
        choices=MF_MECHANISMS,
        help="the strategy: bandmf (banded Toeplitz), blt, bsr, nu-ftrl, matrix (--strategy FILE.npy); the noise "
        "multiplier is relative to the strategy scaled to largest column norm 1",
    )
    mf.add_argument("--bands", type=_positive_int, help="bands b (bandmf, bsr; cyclic-poisson: b groups)")
    mf.add_argument(
        "--strategy",
        metavar="FILE.npy",
        help="a T x T lower-triangular strategy with largest column norm 1 (or, 1-D, a Toeplitz first column)",
    )
    mf.add_argument("--nu", type=_non_negative, help="nu-ftrl: the parameter nu in [0, 1]")
    mf.add_argument("--blt-decay", metavar="THETAS", help="blt: the buffer decays, comma-separated")
    mf.add_argument("--blt-scale", metavar="OMEGAS", help="blt: the output scales, comma-separated")
    mf.add_argument("--min-separation", type=_positive_int, help="min-sep, b-min-sep: the least steps between two")
    mf.add_argument("--max-participations", type=_positive_int, help="min-sep, b-min-sep: the most participations")
    mf.add_argument(
        "--monte-carlo",
        type=_positive_int,
        metavar="SAMPLES",
        help="fixed-bins, b-min-sep: add a Monte Carlo estimate under the verification rule, SAMPLES per direction",
    )
    mf.add_argument("--seed", type=int, help="--monte-carlo: the seed of its samples")


def _add_audit_parser(sub: Any) -> None:
    aud = sub.add_parser("audit", help="a valid empirical lower bound on epsilon (Monte Carlo distinguishing game)")
    aud.add_argument("spec", nargs="?", help="TOML or JSON spec file (an optional [claim] is the guarantee under test)")
    aud.add_argument("--target", metavar="MODULE:NAME", help="audit your own code (MODULE from the current directory)")
    aud.add_argument("--pair", metavar="PAIR.json", help='with --target: {"data": ..., "neighbour": ...}')
    aud.add_argument("--claim-epsilon", type=_non_negative, help="with --target: the claimed epsilon")
    aud.add_argument("--claim-delta", type=_delta, default=0.0, help="with --target: the claimed delta (default 0)")
    aud.add_argument("--score", metavar="MODULE:NAME", help="with --target: a score function of the outputs")
    aud.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="with --target: the most memory the audit may hold, e.g. 2G or 512M (default: a quarter of the "
        "available memory); wide outputs are reduced to fit, and an audit that cannot fit says so before its pilot",
    )
    aud.add_argument(
        "--trials", type=_positive_int, help="trials per side (required except with --game one-run: the canaries)"
    )
    aud.add_argument(
        "--delta",
        type=_delta,
        help="delta of the (epsilon, delta) statement under test (default: the claim's, else 1e-5)",
    )
    aud.add_argument("--confidence", type=_confidence, default=0.95, help="confidence of the bound (default 0.95)")
    aud.add_argument("--seed", type=_seed, default=0, help="root seed (default 0); the result depends only on it")
    aud.add_argument("--workers", type=_workers, default=1, help="local worker processes (default 1)")
    aud.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (needs [distributed])")
    aud.add_argument("--checkpoint", help="checkpoint file: written after each chunk, resumed from if it exists")
    aud.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_json(aud)
    aud.add_argument(
        "--game",
        choices=["distinguish", "one-run", "attribute"],
        help="the audit game (default: the spec's [audit] game, else distinguish)",
    )
    aud.add_argument("--log-json", metavar="FILE", help="write progress events to FILE as JSON lines")
    aud.add_argument(
        "--fail-on-violation", action="store_true", help="exit with status 1 when the verdict is VIOLATION (for CI)"
    )
    aud.set_defaults(func=_cmd_audit)


def _cmd_check_dp_sgd(args: argparse.Namespace) -> int:
    """``dplens check-dp-sgd``: :func:`dplens.check_dp_sgd` on the imported step (and sampler), as from Python."""
    from dplens._api import check_dp_sgd

    if (args.steps is None) == (args.epochs is None):
        raise CliError("give exactly one of --steps and --epochs")
    result = check_dp_sgd(
        args.step,
        sampler=args.sampler,
        sampler_function=args.sampler_function,
        noise_multiplier=args.noise_multiplier,
        max_grad_norm=args.max_grad_norm,
        batch_size=args.batch_size,
        dataset_size=args.dataset_size,
        steps=args.steps,
        epochs=args.epochs,
        delta=args.delta,
        normalise=args.normalise,
        trials=args.trials,
        seed=args.seed,
        alpha=args.alpha,
        observe=args.observe,
        neighboring=args.neighboring,
        workers=args.workers,
        progress=not args.quiet and not args.json,
        assume_finite_gradients=args.assume_finite_gradients,
    )
    _emit(result.to_dict(), args.json, result.summary())
    return 1 if args.fail_on_violation and result.verdict == "VIOLATION" else 0


def _add_check_dp_sgd_parser(sub: Any) -> None:
    chk = sub.add_parser(
        "check-dp-sgd",
        help="does the DP-SGD step that ran do what was accounted? (implementation checks, audit, model-based bound)",
    )
    chk.add_argument(
        "--step",
        metavar="MODULE:FUNCTION",
        required=True,
        help="step(per_sample_gradients, rng) -> update (MODULE from the current directory)",
    )
    chk.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="poisson",
        help="the declared sampler (what the accountant's epsilon assumes)",
    )
    chk.add_argument(
        "--sampler-function",
        metavar="MODULE:FUNCTION",
        help="sampler(dataset_size, rng) -> iterable of index arrays: the code that forms the batches "
        "(default: dplens forms them by --sampler and checks the step alone)",
    )
    chk.add_argument("--noise-multiplier", type=_non_negative, required=True, help="declared noise std / clip norm")
    chk.add_argument("--max-grad-norm", type=_non_negative, required=True, help="declared clipping norm C")
    chk.add_argument("--batch-size", type=_positive_int, required=True, help="declared (expected) batch size B")
    chk.add_argument("--dataset-size", type=_positive_int, required=True, help="data set size N")
    chk.add_argument("--steps", type=_positive_int, help="steps T (exactly one of --steps and --epochs)")
    chk.add_argument("--epochs", type=_non_negative, help="epochs E (T = ceil(E*N/B), as dp-sgd)")
    chk.add_argument("--delta", type=_probability, required=True, help="the delta of the claim")
    chk.add_argument(
        "--normalise",
        choices=("expected", "sum"),
        default="expected",
        help="expected: the noisy sum divided by B (default); sum: not divided",
    )
    chk.add_argument("--trials", type=_positive_int, help="trainings per side (default chosen by dplens and printed)")
    chk.add_argument("--seed", type=_seed, default=0, help="root seed (default 0)")
    chk.add_argument(
        "--alpha",
        type=_probability,
        default=0.05,
        help="significance, split (Bonferroni) over every check, the audit and the model-based bound",
    )
    chk.add_argument(
        "--observe",
        choices=("every", "final"),
        default="every",
        help="the observer sees every step's update, or only their sum (last iterate)",
    )
    chk.add_argument(
        "--neighboring",
        choices=("add_remove", "zero_out", "replace_one"),
        help="the claim's neighbouring relation (default: as dp-sgd for the declared sampler)",
    )
    chk.add_argument(
        "--assume-finite-gradients",
        action="store_true",
        help="state that every per-sample gradient is finite: non_finite_rows still runs and is reported, but is "
        "not counted in the overall verdict (off by default; dplens does not check the assumption)",
    )
    chk.add_argument("--workers", type=_workers, default=1, help="local worker processes (default 1)")
    chk.add_argument("--quiet", action="store_true", help="no progress bar")
    chk.add_argument(
        "--fail-on-violation", action="store_true", help="exit with status 1 when the verdict is VIOLATION (for CI)"
    )
    _add_json(chk)
    chk.set_defaults(func=_cmd_check_dp_sgd)


def _add_audit_scores_parser(sub: Any) -> None:
    scores = sub.add_parser("audit-scores", help="a valid lower bound on epsilon from membership scores (a file)")
    scores.add_argument("file", help=".npz with arrays 'score' and 'member' (bool), or a CSV with those columns")
    scores.add_argument("--claim-epsilon", type=_non_negative, required=True, help="the claimed epsilon")
    scores.add_argument("--delta", type=_delta, required=True, help="delta of the (epsilon, delta) claim")
    scores.add_argument(
        "--one-run", action="store_true", help="one training, canaries each included with probability 1/2"
    )
    scores.add_argument("--confidence", type=_confidence, default=0.95, help="confidence of the bound (default 0.95)")
    scores.add_argument("--seed", type=_seed, default=0, help="seed of the threshold-selection split (default 0)")
    scores.add_argument(
        "--estimators",
        action="store_true",
        help="also every estimator of jax_privacy's CanaryScoreAuditor, each labelled bound, estimate or heuristic",
    )
    _add_json(scores)
    scores.add_argument(
        "--fail-on-violation", action="store_true", help="exit with status 1 when the verdict is VIOLATION (for CI)"
    )
    scores.set_defaults(func=_cmd_audit_scores)


def _add_report_parser(sub: Any) -> None:
    from dplens.reports.defaults import DEFAULT_CONFIDENCE, DEFAULT_PRIVACY_UNIT, DEFAULT_TRIALS

    report = sub.add_parser("report", help="a compliance report (JSON, HTML, privacy statement, figures)")
    report.add_argument("spec", nargs="?", help="TOML or JSON spec file")
    report.add_argument(
        "--audit",
        metavar="RESULT.json",
        help="render a saved audit result instead (dplens audit --target/--game/audit-scores ... --json > RESULT.json)",
    )
    report.add_argument("-o", "--output", required=True, help="output directory")
    report.add_argument(
        "--delta", type=_delta, help="delta of the (epsilon, delta) statements (default: the claim's, else 1e-5)"
    )
    report.add_argument(
        "--trials",
        type=_positive_int,
        help=f"audit trials per side (default {DEFAULT_TRIALS}; given explicitly, a failing audit is an error)",
    )
    report.add_argument("--no-audit", action="store_true", help="accounting only; the report says 'not audited'")
    report.add_argument("--confidence", type=_probability, default=DEFAULT_CONFIDENCE, help="audit confidence")
    report.add_argument("--seed", type=_seed, default=0, help="audit seed (default 0)")
    report.add_argument("--workers", type=_workers, default=1, help="audit worker processes")
    report.add_argument(
        "--unit",
        help=f"the unit of privacy, in words (default: [deployment] privacy_unit, else {DEFAULT_PRIVACY_UNIT!r})",
    )
    report.add_argument("--title", help="report title (default: the spec's name)")
    report.add_argument("--quiet", action="store_true", help="no progress output")
    report.add_argument("--log-json", metavar="FILE", help="write the audit's progress events to FILE as JSON lines")
    report.add_argument(
        "--ledger", metavar="DB", help="add the cumulative spend of a budget ledger (a file or a postgresql:// URL)"
    )
    report.add_argument(
        "--deployment",
        metavar="FILE.toml",
        help="a [deployment] table (TOML or JSON) over the spec's: also write registry-entry.yaml",
    )
    report.add_argument(
        "--implementation-evidence",
        metavar="FILE.json",
        help="add the implementation evidence of the DP-SGD step that ran (dplens check-dp-sgd ... --json > FILE.json)",
    )
    report.set_defaults(func=_cmd_report)


def _add_registry_parser(sub: Any) -> None:
    registry = sub.add_parser("registry", help="DP Deployments Registry records: check them, export a report as one")
    registry_sub = registry.add_subparsers(dest="registry_command", required=True, parser_class=_Parser)
    check = registry_sub.add_parser(
        "check", help="re-derive the privacy parameters of registry records (rho -> epsilon, mu, variants)"
    )
    check.add_argument("paths", nargs="+", metavar="FILE|DIR", help="record files, or directories of *.yaml records")
    check.add_argument(
        "--schema",
        metavar="SCHEMA.yaml",
        help="validate against this JSON schema (e.g. the registry's schemas/deployments-schema.yaml), not dplens's",
    )
    check.add_argument(
        "--delta",
        type=_probability,
        default=DEFAULT_DERIVE_DELTA,
        help=f"delta at which a rho without a stated delta is converted (default {DEFAULT_DERIVE_DELTA:g})",
    )
    check.add_argument(
        "--strict", action="store_true", help="exit with status 1 when a record is inconsistent or needs a citation"
    )
    _add_json(check)
    check.set_defaults(func=_cmd_registry_check)
    export = registry_sub.add_parser("export", help="a report's DP Deployments Registry record (YAML)")
    export.add_argument("report", metavar="REPORT.json", help="a report.json written by dplens report")
    export.add_argument(
        "--deployment", metavar="FILE.toml", help="a [deployment] table (TOML or JSON) over the report's"
    )
    export.add_argument("-o", "--output", metavar="FILE.yaml", help="write the record to FILE (default: stdout)")
    export.set_defaults(func=_cmd_registry_export)


def _add_demo_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="the main job end to end on a built-in example")
    demo.add_argument("-o", "--output", default="dplens-demo", help="output directory (default: ./dplens-demo)")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(func=_cmd_demo)


def _add_reproduce_parser(sub: Any) -> None:
    rep = sub.add_parser("reproduce", help="regenerate the papers' reproductions under reports/")
    rep.add_argument("name", nargs="?", default="all", help="a reproduction name, or 'all' (default)")
    rep.add_argument("-o", "--output", default="reports", help="output root (default: ./reports)")
    rep.add_argument("--quick", action="store_true", help="fewer seeds / smaller grids (for smoke tests)")
    rep.set_defaults(func=_cmd_reproduce)


_MAX_MESSAGE = 1000  # characters: an error echoing a huge value stays a readable line


def _error(message: str) -> int:
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    print(f"dplens: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _first_line(err: BaseException) -> str:
    text = str(err)
    return text.splitlines()[0] if text.strip() else type(err).__name__


def _interrupted(err: KeyboardInterrupt, args: argparse.Namespace | None) -> int:
    """One line: what stopped, what is saved, the command that resumes; exit 128 + the signal number."""
    signum = getattr(err, "signum", signal.SIGINT)
    name = signal.Signals(signum).name
    argv = getattr(args, "argv", None)
    command = shlex.join(["dplens", *argv]) if argv is not None else None
    where = ""
    if hasattr(err, "chunks_done"):
        where = f" after {err.chunks_done} of {err.chunks} chunks"
    # Outside a chunked run (the pilot, the bounds) the checkpoint given still holds every finished chunk.
    checkpoint = getattr(err, "checkpoint", None) or getattr(args, "checkpoint", None)
    if checkpoint is not None and command is not None:
        line = f"interrupted by {name}{where}, finished chunks saved in {str(checkpoint)!r}; resume with: {command}"
    elif command is not None and hasattr(args, "checkpoint"):
        line = f"interrupted by {name}{where}; nothing saved (add --checkpoint FILE to resume later): {command}"
    elif command is not None:
        line = f"interrupted by {name}{where}; run again with: {command}"
    else:
        line = f"interrupted by {name}"
    print(f"dplens: {line}", file=sys.stderr, flush=True)
    return 128 + int(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dplens`` with ``argv`` (default: the process's arguments) and return the exit status: 0 on success,
    1 for a VIOLATION under ``--fail-on-violation``, 2 for invalid input (one line on stderr), 130 / 143 when
    interrupted."""
    parser = build_parser()
    args: argparse.Namespace | None = None
    previous = signal.getsignal(signal.SIGTERM) if _in_main_thread() else None
    if previous == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    log: _JsonLog | None = None
    code = 1  # an unexpected exception (its traceback follows); every handled outcome sets its own status
    try:
        args = parser.parse_args(argv)
        args.argv = list(argv) if argv is not None else sys.argv[1:]
        if getattr(args, "log_json", None) is not None:
            log = args.json_log = _JsonLog(_output_file(args.log_json, "--log-json"))
        code = int(args.func(args) or 0)
        return code
    except KeyboardInterrupt as err:
        code = _interrupted(err, args)
        return code
    except (CliError, ValueError) as err:
        code = _error(_first_line(err))
        return code
    except RecursionError:
        code = _error("the input is nested too deeply to read")
        return code
    except (OverflowError, ZeroDivisionError) as err:
        code = _error(f"a value is out of the supported range ({type(err).__name__}: {_first_line(err)})")
        return code
    except MemoryError as err:
        code = _error(
            f"out of memory ({_first_line(err)}): the command needed more memory than the machine could give and "
            "wrote nothing; use smaller inputs (dplens audit --target plans within --memory-budget)"
        )
        return code
    except BrokenPipeError:
        # The reader went away (``dplens ... | head``): nothing is wrong with the input; stop quietly, and point stdout
        # at /dev/null so the interpreter's final flush does not complain (Python docs, "Note on SIGPIPE").
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
        return code
    except OSError as err:
        where = f": {err.filename!r}" if err.filename else ""
        code = _error(f"{err.strerror or _first_line(err)}{where}")
        return code
    finally:
        if log is not None:
            # the last line, whatever happened: a command refused before any event leaves no file
            if code == 0 or log.started:
                with contextlib.suppress(OSError):
                    log.write({"event": "done", "exit_status": code})
            log.close()
        if previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
