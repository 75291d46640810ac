"""Registry of theoretical predictions: for an algorithm, the figures its paper predicts.

Each family registers ``predict(graph, loads, params) -> dict`` for its algorithms, returning
named predicted figures (``{"time_bound": ..., "final_discrepancy_bound": ..., "basis": "..."}``).
``tokendist bounds`` prints them beside a run's measured figures.
"""

from __future__ import annotations

from typing import Callable

from ..registry import Registry

__all__ = ["BOUNDS", "register_bounds", "predict"]

BOUNDS: Registry[Callable] = Registry("bounds provider")


def register_bounds(*algos: str):
    """Register ``predict(graph, loads, params) -> dict`` for the named algorithms."""

    def deco(fn):
        for a in algos:
            BOUNDS.add(a, fn)
        return fn

    return deco


def predict(algo: str, graph, loads, params: dict | None = None) -> dict:
    from . import _modules  # noqa: F401

    return BOUNDS.get(algo)(graph, loads, params or {})
