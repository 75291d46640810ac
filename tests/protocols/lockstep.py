"""Two protocol instances stepped side by side, every step's outcome compared exactly.

Used where one kernel path is checked against another that must give the same bits (stencil
against CSR rows, threaded against serial, ``threads=auto`` against ``threads=1``).
"""

import numpy as np

from tokendist.engine._cycles import state_bytes


def assert_same_steps(first, second, loads, steps, graph, second_graph=None):
    """Reset ``first`` on ``graph`` and ``second`` on ``second_graph`` (default: the same) from
    ``loads`` and step both ``steps`` times: loads, outflows, moves, step info and the state key
    equal after every step."""
    other = graph if second_graph is None else second_graph
    first.reset(graph, loads.copy(), np.random.default_rng(0))
    second.reset(other, loads.copy(), np.random.default_rng(0))
    wa, wb = loads.copy(), loads.copy()
    for t in range(steps):
        a, b = first.step(t, graph, wa), second.step(t, other, wb)
        assert np.array_equal(a.loads, b.loads) and np.array_equal(a.outflow, b.outflow)
        assert a.moved == b.moved and a.info == b.info
        assert state_bytes(first.state_key()) == state_bytes(second.state_key())
        wa, wb = a.loads, b.loads
