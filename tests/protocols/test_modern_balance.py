"""The modern protocols' "balanced stays balanced" skips, backed by what the rules do.

``tests/engine/test_conformance.py`` skips the check for a protocol that declares
``keeps_balance = False``. A skip must not hide a protocol that would pass: for each one that
declares it, some zoo graph and some balanced start must really move tokens; the others stay
balanced from the conformance suite's start (``constant:6``).
"""

import numpy as np
import pytest

from tokendist.engine import PROTOCOLS, simulate

from ..conftest import zoo_for

MODERN = ["quasirandom", "rotor-router", "randomized-diffusion", "random-matching", "balancing-circuit",
          "flow-imitation", "stratified-diffusion", "pairwise-averaging"]


def _moves(name, spec, c):
    r = simulate(spec, name, f"constant:{c}", seed=7, max_steps=30)
    return not np.array_equal(r.loads, np.full_like(r.loads, c))


@pytest.mark.parametrize("name", MODERN)
def test_balance_skip_is_backed_by_a_moving_balanced_start(name):
    cls = PROTOCOLS.get(name)
    zoo = zoo_for(cls)
    if getattr(cls, "keeps_balance", True):
        assert not any(_moves(name, spec, 6) for spec in zoo)
    else:
        assert any(_moves(name, spec, c) for spec in zoo for c in (6, 1, 13))
