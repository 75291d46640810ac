"""Experiments: comparisons, reproductions of the papers, sweeps described as data."""

from ._reproduce import REPRODUCTIONS, Claim, ReproContext, Reproduction, Table, reproduction, run_reproduction

__all__ = ["REPRODUCTIONS", "Claim", "ReproContext", "Reproduction", "Table", "reproduction", "run_reproduction"]
