"""Shared fixtures: a small zoo of graphs every protocol is tried on."""

import os

import pytest
from hypothesis import HealthCheck, settings

from tokendist.graphs import make_graph

settings.register_profile("ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Small runs keep their compiled kernels here (tokendist.kernels._choice): what a test sees must not
# depend on which kernels numba's cache holds. Inherited by the CLI and mpiexec subprocesses;
# tests/engine/test_small_runs.py turns the rule back on where it tests it.
os.environ["TOKENDIST_SMALL_RUN_REFERENCE"] = "0"

#: Small graphs of many shapes: trees, rings, meshes, tori, hypercubes, dense graphs.
ZOO = ["path:7", "star:6", "kary:2,3", "random-tree:12", "ring:9", "grid:3x4", "torus:4x4", "hypercube:3",
       "complete:5"]


def zoo_for(protocol_cls):
    """The zoo graphs a protocol applies to (trees only for tree protocols, ...)."""
    out = []
    for spec in ZOO:
        g = make_graph(spec, seed=5)
        try:
            protocol_cls().check_graph(g)
        except Exception:
            continue
        out.append(spec)
    return out


@pytest.fixture
def tmp_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path
