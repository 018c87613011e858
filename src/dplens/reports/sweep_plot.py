"""The figure of a sweep (``dplens sweep … -o FILE.csv`` writes it next to the CSV): ε against σ, one curve per
sampling rate.

Renders a finished :class:`~dplens.accountant.sweep.SweepResult`; computes no privacy quantity. matplotlib (Agg) is
imported here, when a figure is drawn, never by the accountant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["plot_sweep"]

_X_PREFERENCE = ("noise_multiplier", "sigma", "scale", "gamma")
_CURVE_PREFERENCE = ("sampling_rate",)
_MAX_PANELS = 4


def _pick(params: tuple[str, ...], preferred: tuple[str, ...], exclude: set[str]) -> str | None:
    for name in preferred:
        if name in params and name not in exclude:
            return name
    rest = [name for name in params if name not in exclude]
    return rest[0] if rest else None


def plot_sweep(result: Any, path: str | Path) -> Path:
    """Draw ε against the noise parameter (the first swept one otherwise), one curve per sampling rate (or per value of
    the next swept parameter), one panel per value of a third (at most four: first, last and evenly between).

    Example:
        >>> import dplens, tempfile, pathlib
        >>> spec = dplens.parse_spec({"mechanism": [{"type": "poisson_subsampled_gaussian",
        ...     "noise_multiplier": 1.0, "sampling_rate": 0.01, "steps": 1000}]})
        >>> result = dplens.sweep(spec, params={"noise_multiplier": [0.8, 1.2], "sampling_rate": [0.01, 0.02]},
        ...     delta=1e-5)
        >>> plot_sweep(result, pathlib.Path(tempfile.mkdtemp()) / "sweep.png").stat().st_size > 0
        True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    params = tuple(result.params)
    x_name = _pick(params, _X_PREFERENCE, set())
    curve_name = _pick(params, _CURVE_PREFERENCE, {x_name})
    panel_name = _pick(params, (), {x_name, curve_name})
    index = {name: i for i, name in enumerate(params)}
    rows = list(zip(result.configurations, result.epsilon, strict=True))
    panels = [None]
    if panel_name is not None:
        values = sorted({c[index[panel_name]] for c, _ in rows})
        step = max(1, (len(values) - 1) // (_MAX_PANELS - 1)) if len(values) > _MAX_PANELS else 1
        panels = values[::step][: _MAX_PANELS - 1] + ([values[-1]] if values[::step][-1] != values[-1] else [])
        panels = panels[:_MAX_PANELS]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for axis, panel in zip(axes[0], panels, strict=True):
        chosen = [(c, e) for c, e in rows if panel is None or c[index[panel_name]] == panel]
        curves = sorted({c[index[curve_name]] for c, _ in chosen}) if curve_name else [None]
        for curve in curves:
            points = sorted((c[index[x_name]], e) for c, e in chosen if curve is None or c[index[curve_name]] == curve)
            label = f"{curve_name} = {curve:g}" if curve is not None else None
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=2.5, label=label)
        axis.set_xlabel(x_name)
        axis.set_ylabel(f"epsilon (delta = {result.delta:g})")
        axis.set_yscale("log")
        if panel is not None:
            axis.set_title(f"{panel_name} = {panel:g}", fontsize=9)
        if curve_name is not None and len(curves) <= 12:
            axis.legend(fontsize=7)
        axis.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"dplens sweep ({result.method.value}; every epsilon is an upper bound)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
