"""benchmarks/RESULTS.md keeps the present: each benchmark once, with its command; --write replaces its own section."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of every ### section (#### subsections stay in their section's body)."""
    parts = re.split(r"^### (.+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_each_benchmark_has_one_section_with_its_command():
    sections = _sections(RESULTS.read_text(encoding="utf-8"))
    assert len(sections) >= 10
    titles = [re.sub(r"\s*\(\d{4}-\d\d-\d\d.*$", "", heading) for heading, _ in sections]
    assert len(titles) == len(set(titles)), f"a benchmark appears twice: {titles}"
    scripts = []
    for heading, body in sections:
        assert re.search(r"\d{4}-\d\d-\d\d", heading + body), f"no date in {heading!r}"
        commands = re.findall(r"Command[^:]*: `([^`]+)`", body)
        assert commands, f"no command in {heading!r}"
        named = {m for c in commands for m in re.findall(r"benchmarks/(bench_\w+)\.py", c)}
        scripts.extend(named)
    # one section per benchmark script (a section may hold several runs of its script, never the reverse)
    assert len(scripts) == len(set(scripts)), scripts


def test_markers_are_balanced_and_unique():
    text = RESULTS.read_text(encoding="utf-8")
    begins = re.findall(r"<!-- (\S+):begin -->", text)
    ends = re.findall(r"<!-- (\S+):end -->", text)
    assert begins == ends and len(begins) == len(set(begins))
    for key in begins:
        assert text.index(f"<!-- {key}:begin -->") < text.index(f"<!-- {key}:end -->")


def test_every_result_file_in_benchmarks_is_cited():
    text = RESULTS.read_text(encoding="utf-8")
    for data in sorted((ROOT / "benchmarks").glob("results_*.json")):
        assert f"benchmarks/{data.name}" in text, f"{data.name} is cited by nothing"


def _results_md():
    spec = importlib.util.spec_from_file_location("results_md", ROOT / "benchmarks" / "results_md.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_write_section_replaces_its_own_section_and_keeps_the_rest(tmp_path):
    results_md = _results_md()
    path = tmp_path / "RESULTS.md"
    path.write_text("# Results\n\n<!-- a:begin -->\nold a\n<!-- a:end -->\nnotes on a\n", encoding="utf-8")
    results_md.write_section(path, "b", "### b\n\nfirst b\n")
    results_md.write_section(path, "a", "### a\n\nnew a")
    results_md.write_section(path, "b", "### b\n\nsecond b")
    text = path.read_text(encoding="utf-8")
    assert text == (
        "# Results\n\n<!-- a:begin -->\n### a\n\nnew a\n<!-- a:end -->\nnotes on a\n\n"
        "<!-- b:begin -->\n### b\n\nsecond b\n<!-- b:end -->\n"
    )
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
