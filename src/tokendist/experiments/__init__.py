"""Experiments: comparisons, reproductions of the papers, scenarios described as data."""

from ._reproduce import REPRODUCTIONS, Claim, ReproContext, Reproduction, Table, reproduction, run_reproduction
from ._scenario import Scenario, default_scenario, load_scenario
from ._compare import CompareRow, Comparison, compare

__all__ = ["REPRODUCTIONS", "Claim", "ReproContext", "Reproduction", "Table", "reproduction", "run_reproduction",
           "Scenario", "default_scenario", "load_scenario", "compare", "Comparison", "CompareRow"]
