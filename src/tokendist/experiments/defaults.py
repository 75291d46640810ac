"""The one set of defaults shared by ``tokendist run``, ``compare``, ``bounds``, sweeps and scenarios.

A row of ``tokendist compare`` is reproduced by ``tokendist run`` with the same graph, loads and
algorithm and no other option: both start from these values, and both print them in their header.

* :data:`DEFAULT_SEED` -- the one seed of a run (topology, loads, speeds, protocol, dynamics);
* :data:`DEFAULT_MAX_STEPS` -- the step limit (the engine's own default, so that
  ``tokendist.simulate`` without ``max_steps`` agrees with the CLI);
* :data:`DEFAULT_LEVELS` -- the discrepancy levels whose first and lasting arrival a comparison times;
* :data:`DEFAULT_ALLOW_INFEASIBLE` -- a step in which a node sends more tokens than it holds stops
  the run (the rule as published cannot be executed); ``--allow-infeasible`` asks to go on with
  negative loads, and such runs are then reported apart from the comparable ones.

Protocol parameters have one default each, the one ``tokendist algos NAME`` prints; no command
and no embedded scenario overrides them.
"""

from __future__ import annotations

from ..engine import DEFAULT_MAX_STEPS

__all__ = ["DEFAULT_SEED", "DEFAULT_MAX_STEPS", "DEFAULT_LEVELS", "DEFAULT_ALLOW_INFEASIBLE"]

DEFAULT_SEED = 0
DEFAULT_LEVELS = (100, 20, 10, 4, 2, 1)
DEFAULT_ALLOW_INFEASIBLE = False
