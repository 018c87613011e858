"""The reproductions' shared helpers (``research/_reproduction_common.py``) and their README templates."""

from __future__ import annotations

import math
import os
from pathlib import Path

import jinja2
import pytest

from dplens.research import _reproduction_common as common

ROOT = Path(__file__).resolve().parents[2]
MECHANISMS = ("bcdp", "corrdp", "dp_ftrl", "feature_dp", "gaussmix")


def test_write_csv_keeps_each_reproductions_line_ending(tmp_path):
    rows = [{"a": 1, "b": 0.5}, {"a": 2, "b": None}]
    crlf = common.write_csv(tmp_path / "crlf.csv", rows)
    lf = common.write_csv(tmp_path / "lf.csv", rows, lineterminator="\n")
    assert crlf.read_bytes() == b"a,b\r\n1,0.5\r\n2,\r\n"
    assert lf.read_bytes() == b"a,b\n1,0.5\n2,\n"


def test_write_atomic_replaces_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "README.md"
    target.write_text("old\n", encoding="utf-8")
    common.write_atomic(target, "ε = 1\n")
    common.write_atomic(tmp_path / "figure.png", b"\x89PNG")
    assert target.read_bytes() == "ε = 1\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "figure.png"]
    umask = os.umask(0)
    os.umask(umask)
    assert (target.stat().st_mode & 0o777) == 0o666 & ~umask


def test_mean_ci95_is_the_normal_interval():
    mean, half = common.mean_ci95([1.0, 2.0, 4.0])
    sd = math.sqrt(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2)
    assert mean == pytest.approx(7 / 3, rel=1e-15)
    assert half == pytest.approx(1.96 * sd / math.sqrt(3), rel=1e-15)
    assert common.mean_ci95([3.0]) == (3.0, 0.0)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_readme_template_is_strict(mechanism):
    # A value the code forgets to pass is an error, never an empty cell in a published README.
    own_filters = {"vec": str, "within": str, "cell": str}  # bcdp's and feature_dp's, so that the template compiles
    with pytest.raises(jinja2.UndefinedError):
        common.render_readme(f"dplens.research.{mechanism}", filters=own_filters)


def test_render_readme_formats_like_python_and_keeps_the_last_newline(tmp_path, monkeypatch):
    package = tmp_path / "fake_repro"
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "templates" / "README.md.j2").write_text(
        "x = {{ x | f('.3g') }}, set {{ s | braces }}\n"
        "{% for r in rows %}\n| {{ r | f('+.2f') }} |\n{% endfor %}\nend\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    text = common.render_readme("fake_repro", x=math.pi, s="0.1, 1", rows=[1.0, -2.5])
    assert text == f"x = {math.pi:.3g}, set {{0.1, 1}}\n| +1.00 |\n| -2.50 |\nend\n"
