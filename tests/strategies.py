"""Shared test data: random connected graphs with node speeds, for Hypothesis strategies."""

import numpy as np

from tokendist.graphs import Graph


def random_connected_graph(rng: np.random.Generator, n: int, extra_edges: int, *, speeds=(1.0, 3.0)) -> Graph:
    """A random spanning tree on ``n`` nodes plus up to ``extra_edges`` random chords, with speeds
    drawn uniformly from ``speeds`` (connected by construction; repeated chords are merged)."""
    edges = {(min(i, p), max(i, p)) for i in range(1, n) for p in [int(rng.integers(0, i))]}
    for _ in range(extra_edges):
        a, b = rng.integers(0, n, 2)
        if a != b:
            edges.add((int(min(a, b)), int(max(a, b))))
    return Graph.from_edges(n, sorted(edges), speeds=rng.uniform(*speeds, n))
