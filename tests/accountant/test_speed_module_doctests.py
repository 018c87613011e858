"""The docstring examples of the PLD engine, the PLD route, sweeps and the sweep figure run as doctests."""

import doctest
import warnings

import pytest

import dplens.accountant.pld as pld
import dplens.accountant.pld_engine as pld_engine
import dplens.accountant.sweep as sweep
import dplens.reports.sweep_plot as sweep_plot


@pytest.mark.parametrize("module", [pld_engine, pld, sweep, sweep_plot], ids=lambda m: m.__name__)
def test_module_doctests(module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
