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


def _extra_requirements(extra: str, extras: dict[str, list[str]], seen: set[str] | None = None) -> set[str]:
    """The distribution names an extra of dplens installs, its ``dplens[...]`` self-references followed."""
    seen = set() if seen is None else seen
    names: set[str] = set()
    for requirement in extras[extra]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        inner = re.search(r"\[([^\]]+)\]", requirement)
        if name == "dplens" and inner:
            for nested in inner.group(1).split(","):
                if nested.strip() not in seen:
                    seen.add(nested.strip())
                    names |= _extra_requirements(nested.strip(), extras, seen)
        else:
            names.add(name)
    return names


def test_the_test_install_pulls_no_gpu_stack_and_the_readme_says_what_it_costs():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    installed = _extra_requirements("test", extras)
    assert {"pytest", "hypothesis", "mkdocs", "diffprivlib"} <= installed  # followed into [docs] and [thirdparty]
    assert not {"torch", "opacus"} & installed and not any(n.startswith(("nvidia", "cuda")) for n in installed)
    assert {"torch", "opacus"} <= _extra_requirements("torch", extras)
    assert not {"jax", "jaxlib", "jax-privacy"} & installed  # 410 MB more; CI installs [jax] (.ci/run)
    assert "jax-privacy" in _extra_requirements("jax", extras)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"test install has no GPU stack.{0,200}?(\d+(?:\.\d+)?) GB, in (\d+) s", readme, flags=re.S)
    assert stated, "the README does not state the size and time of the test install"
    assert "[torch]" in readme[stated.end() : stated.end() + 400]  # and how to run the torch tests
