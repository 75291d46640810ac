"""A load-balancing rule of your own, compared against the built-in protocols.

The rule: every node sends one token to its least-loaded neighbour when that neighbour holds at
least two tokens fewer (a "greedy" single-token rule). Written once as a tokendist Protocol, it runs
under the engine's checks (conservation, feasibility, the declared multi-port model) and in
`tokendist compare` like any built-in protocol:

    tokendist run --graph torus:16x16 --algo examples/custom_protocol.py:Greedy --init random:0..200
    tokendist compare --algos multi-port,single-port,examples/custom_protocol.py:Greedy

Run: python examples/custom_protocol.py
"""

import numpy as np

import tokendist as td


class Greedy(td.Protocol):
    """One token to the least-loaded neighbour when it holds at least two fewer."""

    name = "greedy"
    model = "multi-port"  # at most one token per edge and direction per step

    def step(self, t, graph, loads):
        u, v = graph.u, graph.v
        # The least-loaded neighbour of every node: the smallest (load, node) over its edges.
        key = np.full(graph.n, np.iinfo(np.int64).max)
        np.minimum.at(key, u, loads[v])
        np.minimum.at(key, v, loads[u])
        # Each node sends along the first edge that reaches a neighbour at its minimum load.
        flows = np.zeros(graph.m, dtype=np.int64)
        sent = np.zeros(graph.n, dtype=bool)
        for e in np.flatnonzero(loads[v] == key[u]):  # u -> v candidates
            if not sent[u[e]] and loads[u[e]] - loads[v[e]] >= 2:
                flows[e], sent[u[e]] = 1, True
        for e in np.flatnonzero(loads[u] == key[v]):  # v -> u candidates
            if not sent[v[e]] and loads[v[e]] - loads[u[e]] >= 2:
                flows[e], sent[v[e]] = flows[e] - 1, True
        out = loads.copy()
        np.subtract.at(out, u, flows)
        np.add.at(out, v, flows)
        return td.Step(out, moved=int(np.abs(flows).sum()), flows=flows)


if __name__ == "__main__":
    for algo in ("multi-port", "single-port", Greedy()):
        r = td.simulate("torus:16x16", algo, "random:0..200", seed=1, max_steps=3000, check=True)
        name = algo if isinstance(algo, str) else algo.name
        print(f"{name:12s} steps {r.steps:5d}  final discrepancy {r.final['discrepancy']:4.0f}  "
              f"tokens moved {r.tokens_moved}  ({r.stop_reason})")
