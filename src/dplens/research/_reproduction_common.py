"""What the five reproductions (``dplens reproduce``) share: the headless pyplot, atomic files, CSV tables, the mean
with its 95 % confidence half-width, and the READMEs, rendered from each reproduction's Jinja template
``research/<mechanism>/templates/README.md.j2``.

Every file is written atomically (a temporary file in the same directory, then ``os.replace``), so an interrupted
reproduction leaves the previous file or the new one, never half of one; new files get the usual ``0o666 & ~umask``
mode. Heavy modules (matplotlib, jinja2) are imported inside the functions.
"""

from __future__ import annotations

import csv
import io
import math
import os
import pathlib
import secrets
from typing import Any

__all__ = ["mean_ci95", "pyplot", "render_readme", "save_figure", "write_atomic", "write_csv"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (the reproductions run without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_atomic(path: pathlib.Path, data: str | bytes) -> pathlib.Path:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file in the same directory and ``os.replace``."""
    path = pathlib.Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_csv(path: pathlib.Path, rows: list[dict[str, Any]], *, lineterminator: str = "\r\n") -> pathlib.Path:
    """Rows (dicts with the first row's keys) as a CSV file with a header; ``lineterminator`` as :mod:`csv` takes it
    (its default ``\\r\\n``, the reproductions' CSV files as published)."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator=lineterminator)
    writer.writeheader()
    writer.writerows(rows)
    return write_atomic(path, buffer.getvalue())


def save_figure(fig: Any, path: pathlib.Path, *, dpi: int) -> pathlib.Path:
    """Save a matplotlib figure as PNG at ``dpi`` (atomically) and close it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    pyplot().close(fig)
    return write_atomic(path, buffer.getvalue())


def mean_ci95(values: Any) -> tuple[float, float]:
    """The mean and the half-width 1.96·s/√n of its normal 95 % confidence interval (0 for a single value)."""
    import numpy as np

    x = np.asarray(values, dtype=float)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size) if x.size > 1 else 0.0
    return float(x.mean()), float(half)


def render_readme(package: str, *, filters: dict[str, Any] | None = None, **context: Any) -> str:
    """A reproduction's README.md from ``templates/README.md.j2`` in ``package`` (package data).

    Markdown, so no autoescaping; strict undefined (a missing value is an error, never an empty cell); block tags
    on their own line leave no blank line; the file's last newline is kept. The filter ``f`` applies a Python
    format spec (``{{ x | f(".4g") }}`` is ``f"{x:.4g}"``), so the numbers read exactly as the code formats them;
    ``braces`` writes a set, ``{…}``; ``filters`` adds a reproduction's own.
    """
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["f"] = format
    env.filters["braces"] = lambda text: "{" + str(text) + "}"
    env.filters.update(filters or {})
    return env.get_template("README.md.j2").render(**context)
