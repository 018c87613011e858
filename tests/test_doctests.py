"""Every docstring example runs: the doctests of every module, and every public name has one."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dplens

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(dplens.__path__, prefix="dplens.") if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests_pass(name):
    if name.startswith("dplens.integrations.opacus"):
        # one line naming the extra when it is absent; a failure under CI=true (root conftest.py)
        pytest.importorskip("opacus", reason='needs the [torch] extra: pip install "dplens[torch]"')
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        if test.examples:
            runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} doctest examples failed in {name}"


@pytest.mark.parametrize("name", sorted(n for n in dplens.__all__ if n != "__version__"))
def test_every_public_name_has_an_example(name):
    obj = getattr(dplens, name)
    assert ">>>" in (obj.__doc__ or ""), f"dplens.{name} has no docstring example"
