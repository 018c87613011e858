"""The README's Python examples run as written (those marked "a sketch" name the user's own code and are skipped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
RUNNABLE = [block for block in BLOCKS if not block.startswith("# a sketch")]


def test_the_readme_has_runnable_python_examples():
    assert len(RUNNABLE) >= 4 and len(BLOCKS) - len(RUNNABLE) <= 2


@pytest.mark.parametrize("index", range(len(RUNNABLE)))
def test_readme_python_example_runs(index, tmp_path, monkeypatch):
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the examples name files under examples/
    monkeypatch.chdir(tmp_path)  # and write their outputs (out/) here
    exec(compile(RUNNABLE[index], f"README.md python example {index}", "exec"), {"__name__": "readme_example"})
