"""The message-passing protocols as MPI ranks (engine/mpi/_messages.py) under real ``mpiexec``.

``perfect-tree`` and ``async-multi-port`` run as per-node handlers placed on K = 1 .. 4 ranks
(contiguous and METIS partitions of the network's nodes). Under the synchronous schedule and the
deterministic adversaries the run must be the single-process executor's: the same JSON (but wall
time, variants and ``ranks``), final loads and trace. Under the random schedules (delays keyed by
seed, channel, time and message number) the run must not depend on K, conserve tokens, and, for
``perfect-tree``, end in the perfect distribution (Margara et al., Theorem 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .test_mpi_backend import HERE, MPIEXEC, SRC, launch, needs_mpi, single

pytestmark = needs_mpi

# Deterministic schedules: every K gives the single-process run.
SAME = [
    {"graph": "random-tree:40", "algo": "perfect-tree", "init": "random:0..9", "seed": 1, "partition": "contiguous"},
    {"graph": "random-tree:40", "algo": "perfect-tree", "init": "random:0..9", "seed": 1, "partition": "metis"},
    # A non-tree graph: the handlers run on its BFS spanning tree, partitioned.
    {"graph": "torus:4x4", "algo": "perfect-tree", "init": "random:0..9", "seed": 3, "partition": "metis"},
    # The election race of S1.2 forced by the adversary (the link reservation across ranks).
    {"graph": "random-tree:30", "algo": "perfect-tree", "init": "random:0..9", "seed": 2, "partition": "contiguous",
     "params": {"schedule": "adversarial", "adversary": "race"}},
    # release=send lets the election deadlock (docs/protocols/perfect-tree.md): the same fixed point.
    {"graph": "star:12", "algo": "perfect-tree", "init": "random:0..9", "seed": 2, "partition": "contiguous",
     "params": {"release": "send"}},
    # Two nodes on two ranks reserve their one link at time 0: the first by id wins, as in one process.
    {"graph": "path:2", "algo": "perfect-tree", "init": "random:0..9", "seed": 2, "partition": "contiguous"},
    {"graph": "torus:4x4", "algo": "async-multi-port", "init": "random:0..100", "seed": 3, "partition": "contiguous",
     "max_steps": 40, "params": {"schedule": "sync", "threshold": 1}},
    {"graph": "random-regular:16,3", "algo": "async-multi-port", "init": "random:0..100", "seed": 4,
     "partition": "metis", "max_steps": 40, "params": {"schedule": "slow-edges", "threshold": 1}},
    # The stopping rule decided on the ranks' extremes, a sparse trace.
    {"graph": "torus:4x4", "algo": "async-multi-port", "init": "random:0..100", "seed": 3, "partition": "metis",
     "max_steps": 200, "until_discrepancy": 20, "record_every": 3, "params": {"schedule": "sync", "threshold": 1}},
]
# Random schedules: keyed delays, the same for every K (not the single-process draws).
KEYED = [
    {"graph": "random-tree:40", "algo": "perfect-tree", "init": "random:0..9", "seed": 5, "partition": "contiguous",
     "params": {"schedule": "async", "max_delay": 3}},
    {"graph": "random-tree:25", "algo": "perfect-tree", "init": "point:77", "seed": 7, "partition": "metis",
     "params": {"schedule": "async", "max_delay": 6}},
    {"graph": "torus:4x3", "algo": "perfect-tree", "init": "random:0..20", "seed": 8, "partition": "contiguous",
     "params": {"schedule": "async", "max_delay": 2, "pick": "largest"}},
    {"graph": "torus:4x4", "algo": "async-multi-port", "init": "random:0..100", "seed": 6, "partition": "metis",
     "max_steps": 40, "params": {"schedule": "random", "threshold": 1}},
]
RANKS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Rank 0's result lines of every case for every K (one ``mpiexec`` launch per K, all at once:
    the ranks mostly wait for each other, so the launches overlap well even on 2 cores)."""
    tmp = tmp_path_factory.mktemp("mpimsg")
    path = tmp / "cases.json"
    cases = SAME + KEYED
    path.write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    procs = {k: subprocess.Popen([MPIEXEC, "-n", str(k), sys.executable, str(HERE / "mpi_cases.py"), str(path)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for k in RANKS}
    out = {}
    try:
        for k, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=600)
            assert proc.returncode == 0, stderr[-2000:]
            lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
            assert len(lines) == len(cases), stdout[-2000:] + stderr[-2000:]
            out[k] = lines
    finally:  # one failed launch must not leave the others' ranks running
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


@pytest.mark.parametrize("k", RANKS)
def test_synchronous_schedule_is_the_single_process_run(runs, k):
    for case, got in zip(SAME, runs[k]):
        _assert_same_messages(case, got)
        assert got["ranks"]["count"] == k


def _assert_same_messages(case, got):
    """The single-process result in every field but seconds, ranks and variants (the rank executor's)."""
    assert "error" not in got, got
    r = single(case)
    want = json.loads(json.dumps(r.to_json(), default=float))
    for key in want:
        if key not in ("seconds", "variants"):
            assert got[key] == want[key], (case, key, got[key], want[key])
    assert list(got["variants"]) == [f"message handlers, {got['ranks']['count']} ranks ({case['partition']})"]
    assert got["loads"] == r.loads.tolist(), case
    assert got["trace"] == {key: v.tolist() for key, v in r.trace.items()}, case
    assert got["same_on_all_ranks"]
    if case["algo"] == "perfect-tree" and "release" not in case.get("params", {}):
        assert got["report"]["perfect"] and got["stop_reason"] == "stable"


def test_cut_links_and_cross_rank_messages_are_measured(runs):
    # With more than one rank some messages cross a cut and travel in batches; with one, none.
    for got in runs[1]:
        assert got["ranks"]["cross_rank_messages"] == 0 and got["ranks"]["edge_cut"] == 0
    for got in runs[4]:
        r = got["ranks"]
        assert r["edge_cut"] > 0 and 0 < r["cross_rank_messages"] <= got["messages"]
        assert r["message_batch_bytes"] > 0
    # perfect-tree's link reservations across a cut need exchange rounds; async-multi-port shares nothing.
    pt = [got for case, got in zip(SAME, runs[4]) if case["algo"] == "perfect-tree"]
    amp = [got for case, got in zip(SAME, runs[4]) if case["algo"] == "async-multi-port"]
    assert all(g["ranks"]["link_rounds"] > 0 for g in pt)
    assert all(g["ranks"]["link_rounds"] == 0 for g in amp)


def test_keyed_random_schedules_do_not_depend_on_k_and_keep_the_guarantees(runs):
    offset = len(SAME)
    for i, case in enumerate(KEYED):
        results = [runs[k][offset + i] for k in RANKS]
        for got in results:
            assert "error" not in got, got
            assert sum(got["loads"]) + got["in_transit"] == got["tokens"]  # tokens conserved
            assert got["same_on_all_ranks"]
        base = {key: v for key, v in results[0].items() if key not in ("seconds", "variants", "ranks")}
        for got in results[1:]:
            assert {key: v for key, v in got.items() if key not in ("seconds", "variants", "ranks")} == base, case
        if case["algo"] == "perfect-tree":
            # Theorem 3: every node ends with Avg or Avg + 1 tokens, whatever the delays.
            got = results[0]
            total, n = got["tokens"], got["graph"]["n"]
            assert got["report"]["perfect"] and got["report"]["all_final"]
            assert min(got["loads"]) >= total // n and max(got["loads"]) <= total // n + (total % n > 0)
            # The delays really are asynchronous: the run is not the synchronous one.
            sync = single({**case, "params": {}})
            assert got["steps"] != sync.steps or got["report"]["phase_end"] != sync.report["phase_end"]


@pytest.mark.slow
def test_cli_perfect_tree_four_ranks_same_json_as_single_process():
    args = ["-m", "tokendist.cli", "run", "--graph", "random-tree:120", "--algo", "perfect-tree", "--init",
            "random:0..9", "--seed", "1", "--json"]
    done = launch(4, args + ["--backend", "mpi", "--partition", "metis"])
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)  # rank 0 alone printed
    plain = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=240,
                           env={**os.environ, "PYTHONPATH": str(SRC)})
    want = json.loads(plain.stdout)
    ranks = got.pop("ranks")
    assert ranks["count"] == 4 and ranks["partition"] == "metis"
    for d in (got, want):
        d.pop("seconds"), d.pop("variants")
    assert got == want
    assert got["report"]["perfect"]
