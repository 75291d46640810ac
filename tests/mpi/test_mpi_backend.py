"""The partitioned executor under real ``mpiexec`` against the single-process engine.

Each test launches ``mpiexec -n K`` on a batch of runs (``mpi_cases.py``, or the CLI) and asserts
that rank 0's results equal :func:`tokendist.simulate`'s without MPI: the same JSON (but wall time
and ``ranks``), final loads and trace, for every partitioned protocol on a torus, a hypercube, a
random regular graph and a tree, with contiguous and METIS partitions, K = 1 .. 4.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import tokendist
from tokendist.engine.mpi import PARTITIONED_PROTOCOLS, edge_cut, partition, partitioned_refusal
from tokendist.engine import make_protocol
from tokendist.errors import TokendistError
from tokendist.graphs import is_biconnected, make_graph

HERE = Path(__file__).resolve().parent
SRC = Path(tokendist.__file__).resolve().parent.parent
GRAPHS = ("torus:6x5", "hypercube:5", "random-regular:30,3", "random-tree:30")
KEYS = ("params", "max_steps", "until_discrepancy", "until_local_discrepancy", "record_every", "allow_infeasible",
        "speeds")


def _mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


MPIEXEC = _mpiexec()
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec beside the Python interpreter or on PATH")


def launch(k: int, args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """``mpiexec -n k python ARGS`` with this checkout on the path; returns the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([MPIEXEC, "-n", str(k), sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def run_cases(k: int, cases: list[dict], tmp_path) -> list[dict]:
    """Rank 0's result line for each case of a batch run under ``mpiexec -n k``."""
    path = tmp_path / f"cases-{k}.json"
    path.write_text(json.dumps(cases))
    done = launch(k, [str(HERE / "mpi_cases.py"), str(path)])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == len(cases), done.stdout[-2000:] + done.stderr[-2000:]
    return lines


def single(case: dict):
    kw = {key: case[key] for key in KEYS if key in case}
    return tokendist.simulate(case["graph"], case["algo"], case["init"], seed=case["seed"], **kw)


def assert_same(case: dict, got: dict) -> None:
    """The partitioned result equals the single-process one in every field but seconds, ranks and variants."""
    assert "error" not in got, got
    r = single(case)
    want = json.loads(json.dumps(r.to_json(), default=float))
    assert got["ranks"]["count"] >= 1
    for key in want:
        if key not in ("seconds", "variants"):  # variants: the partitioned step, not a single-process kernel
            assert got[key] == want[key], (case, key, got[key], want[key])
    assert sum(got["variants"].values()) == got["steps"] and all(v.startswith("partitioned") for v in got["variants"])
    assert got["loads"] == r.loads.tolist(), case
    assert got["trace"] == {k: v.tolist() for k, v in r.trace.items()}, case
    assert got["same_on_all_ranks"]


def cases_for(graphs, algos, partitions=("contiguous", "metis"), max_steps=30, seed=5) -> list[dict]:
    out = []
    for method in partitions:
        for spec in graphs:
            for algo in algos:
                case = {"graph": spec, "algo": algo, "init": "random:0..1000", "seed": seed, "partition": method,
                        "max_steps": max_steps}
                if algo in ("diffusion-ceil", "diffusion-random", "diffusion-oriented", "sos"):
                    case["allow_infeasible"] = True  # the roundings up may overdraw (Sec. 4): recorded, not fatal
                out.append(case)
    return out


# ---------------------------------------------------------------------------------------------- in-process
def test_partitions_are_deterministic_and_cover_every_rank():
    g = make_graph("random-regular:60,3", seed=1)
    for method in ("contiguous", "metis"):
        a, b = partition(g, 3, method), partition(g, 3, method)
        assert np.array_equal(a, b)
        assert set(a.tolist()) == {0, 1, 2}
    # Contiguous ranges of a torus cut whole rows: 2 * (cut lines) * width edges.
    t = make_graph("torus:8x8", seed=0)
    assert edge_cut(t, partition(t, 2, "contiguous")) == 2 * 8
    assert edge_cut(t, partition(t, 1, "metis")) == 0


def test_every_unsupported_protocol_gives_one_line_reason():
    for name, cls in tokendist.engine.PROTOCOLS.items():
        why = partitioned_refusal(make_protocol(name))
        if name in PARTITIONED_PROTOCOLS:
            assert why is None, name
        else:
            assert why is not None and why.startswith(f"{name} cannot run partitioned yet: ") and "\n" not in why
    assert "geometric" in partitioned_refusal(make_protocol("single-port", {"coins": "geometric"}))


def test_dynamics_and_check_are_refused_in_one_line():
    with pytest.raises(TokendistError, match="cannot run partitioned yet"):
        tokendist.simulate("ring:8", "multi-port", "point:80", backend="mpi", check=True)


def test_missing_mpi4py_is_one_line_and_exit_2(tmp_path):
    code = ("import sys; sys.modules['mpi4py'] = None; from tokendist.cli import main; "
            "sys.exit(main(['run', '--graph', 'ring:8', '--algo', 'multi-port', '--init', 'point:80', "
            "'--backend', 'mpi']))")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "mpi4py" in lines[0], done.stderr


# ---------------------------------------------------------------------------------------------- under mpiexec
# The protocols without per-edge state, and those that keep state per edge, per slot or per node
# (flows, IOUs, estimates, rotors, errors, colour schedules) or draw matchings: the second group
# runs at one rank count by default and at the others in the slow tests.
STATELESS = ("multi-port", "single-port", "diffusion", "diffusion-floor", "diffusion-ceil", "diffusion-random",
             "fos", "fos-floor")
STATEFUL = tuple(p for p in PARTITIONED_PROTOCOLS if p not in STATELESS)


@needs_mpi
@pytest.mark.parametrize("k,max_steps,algos", [(2, 20, STATELESS), (3, 12, STATELESS), (3, 12, STATEFUL)])
def test_every_partitioned_protocol_matches_single_process(k, max_steps, algos, tmp_path):
    """Both partitions, one launch: every protocol on the torus, hypercube, random regular graph, tree."""
    cases = cases_for(GRAPHS, algos, max_steps=max_steps)
    for case, got in zip(cases, run_cases(k, cases, tmp_path)):
        assert_same(case, got)


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("k,max_steps,algos", [(1, 30, PARTITIONED_PROTOCOLS), (4, 12, PARTITIONED_PROTOCOLS),
                                               (2, 20, STATEFUL)])
def test_every_partitioned_protocol_matches_for_other_rank_counts(k, max_steps, algos, tmp_path):
    cases = cases_for(GRAPHS, algos, max_steps=max_steps)
    for case, got in zip(cases, run_cases(k, cases, tmp_path)):
        assert_same(case, got)


@needs_mpi
def test_stopping_rules_and_errors_are_collective(tmp_path):
    """Stops by target, stability and cycle at the single-process step; an overdraw stops every rank."""
    cases = [
        {"graph": "torus:8x8", "algo": "multi-port", "init": "random:0..1000", "seed": 5},  # stable
        {"graph": "torus:8x8", "algo": "diffusion-floor", "init": "point:5000", "seed": 1, "until_discrepancy": 40},
        {"graph": "torus:8x8", "algo": "single-port", "init": "random:0..100", "seed": 2,
         "until_local_discrepancy": 6, "record_every": 7, "params": {"probability": "0.2"}},
        {"graph": "torus:8x8", "algo": "diffusion-ceil", "init": "random:0..1000", "seed": 5,
         "allow_infeasible": True},  # ends in a cycle of length 2 (Figure 4's oscillation)
        {"graph": "hypercube:6", "algo": "fos", "init": "point:1000", "seed": 3, "until_discrepancy": 1e-3},
        # A discrepancy of 2**53 + 1 is not at most 2.0**53 (compared in float64 it was, at step 0).
        {"graph": "torus:8x8", "algo": "multi-port", "init": f"point:{2**53 + 1}", "seed": 1,
         "until_discrepancy": 2.0**53, "max_steps": 5},
        {"graph": "torus:8x8", "algo": "diffusion-ceil", "init": "random:0..3", "seed": 5},  # infeasible: error
    ]
    got = run_cases(3, cases, tmp_path)
    for case, line in zip(cases[:-1], got[:-1]):
        assert_same(case, line)
    reasons = [line["stop_reason"] for line in got[:-1]]
    assert {"stable", "target-reached", "cycle"} <= set(reasons)
    with pytest.raises(TokendistError) as single_error:
        single(cases[-1])
    assert got[-1] == {"error": str(single_error.value)}


@needs_mpi
def test_cli_json_equal_but_wall_time_and_ranks_and_tokens_conserved(tmp_path):
    args = ["-m", "tokendist.cli", "run", "--graph", "torus:12x12", "--algo", "multi-port", "--init",
            "random:0..1000", "--seed", "5", "--max-steps", "40", "--json"]
    done = launch(3, args + ["--backend", "mpi", "--partition", "metis", "--save-loads", str(tmp_path / "w.txt")])
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)  # rank 0 alone printed: one JSON document
    plain = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=240,
                           env={**os.environ, "PYTHONPATH": str(SRC)})
    want = json.loads(plain.stdout)
    ranks = got.pop("ranks")
    got.pop("files")
    assert ranks["count"] == 3 and ranks["partition"] == "metis"
    assert ranks["halo_bytes"] > 0 and ranks["edge_cut"] > 0
    got.pop("seconds"), want.pop("seconds")
    assert list(got.pop("variants")) == ["partitioned, 3 ranks (metis)"]
    want.pop("variants")
    assert got == want
    loads = np.loadtxt(tmp_path / "w.txt", dtype=np.int64)
    assert loads.sum() == want["tokens"]  # the loads gathered from every rank hold every token


@needs_mpi
def test_cli_unsupported_protocol_is_one_line_from_rank_0():
    done = launch(3, ["-m", "tokendist.cli", "run", "--graph", "torus:6x6", "--algo", "single-port", "--init",
                      "random:0..100", "--backend", "mpi", "--param", "coins=geometric"])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == ["error: single-port cannot run partitioned yet: coins=geometric draws the gaps between "
                     "candidates one after the other over the whole edge list; use coins=per-edge"], done.stderr
    assert done.stdout == ""


@needs_mpi
def test_numpy_references_of_real_valued_schemes_run_partitioned(tmp_path):
    # Their numpy steps add the floats in the serial kernels' order (kernels/_rows.py), which the
    # partitioned step follows: kernel=numpy gives the same run on one process and on the ranks.
    cases = cases_for(["torus:6x6", "random-tree:30"], ["diffusion", "fos", "fos-floor", "sos", "random-walk"],
                      max_steps=80)
    for case in cases:
        case["params"] = {"kernel": "numpy"}
    for case, got in zip(cases, run_cases(3, cases, tmp_path)):
        assert_same(case, got)


# ---------------------------------------------------------------------------------------------- per-edge state
# Runs that reach the rare branches of the protocols with per-edge or per-node state: a short node
# paying in proportion (sos-iou), a guard taking tokens back (quasirandom, flow-imitation), the
# active-passive matching, arbitrary initial estimates (ds), random initial rotors.
STATE_CASES = [
    ("random-tree:30", "sos-iou", "point:1000", {}),
    ("torus:6x5", "sos-iou", "random:0..2", {"ideal": "sent"}),
    ("hypercube:5", "sos-iou", "random:0..1000", {"ideal": "driven"}),
    ("hypercube:5", "flow-imitation", "point:1000", {"process": "sos"}),
    ("random-regular:30,3", "flow-imitation", "random:0..1000", {"process": "random-matching"}),
    ("random-tree:30", "flow-imitation", "random:0..1000", {"process": "circuit"}),
    ("torus:6x5", "quasirandom", "random:0..4", {"ties": "up"}),
    ("random-regular:30,3", "random-matching", "random:0..1000", {"drawing": "active-passive"}),
    ("torus:6x5", "random-matching", "random:0..1000", {"excess": "heavier"}),
    ("random-regular:30,3", "ds", "random:0..1000", {"estimates": "random", "threshold": "2"}),
    ("random-tree:30", "rotor-router", "random:0..1000", {"lazy": "false", "rotor_init": "random"}),
    ("random-tree:30", "randomized-diffusion", "random:0..1000", {"denominator": "2max-degree"}),
    ("random-regular:30,3", "stratified-diffusion", "random:0..1000", {"order": "self-last"}),
    ("torus:6x5", "threshold2", "random:0..1000", {"colouring": "greedy", "colour_start": "1"}),
    ("random-regular:30,3", "threshold1", "random:0..1000", {"spanning_tree": "min-diameter"}),
]


def _state_cases(max_steps=40):
    return [{"graph": g, "algo": a, "init": init, "seed": 5, "partition": method, "max_steps": max_steps,
             "params": params} for method in ("contiguous", "metis") for g, a, init, params in STATE_CASES]


def _assert_state_branches_reached():
    """The cases above do reach the rare branches in one process (else they would test nothing)."""
    reports = {(c["algo"], c["init"], tuple(c["params"].items())): single(c).report for c in _state_cases()[:7]}
    assert reports[("sos-iou", "point:1000", ())]["negative_load_events"] > 0
    assert reports[("sos-iou", "random:0..2", (("ideal", "sent"),))]["negative_load_events"] > 0
    assert reports[("flow-imitation", "point:1000", (("process", "sos"),))]["held_back"] > 0
    assert reports[("quasirandom", "random:0..4", (("ties", "up"),))]["held_back"] > 0


@needs_mpi
def test_per_edge_state_and_guards_match_single_process(tmp_path):
    """IOUs, flows, estimates, rotors and errors kept on both sides of a cut edge: the same runs for K = 3."""
    _assert_state_branches_reached()
    cases = _state_cases()
    for case, got in zip(cases, run_cases(3, cases, tmp_path)):
        assert_same(case, got)


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 4])
def test_per_edge_state_and_guards_match_for_other_rank_counts(k, tmp_path):
    cases = _state_cases(max_steps=25)
    for case, got in zip(cases, run_cases(k, cases, tmp_path)):
        assert_same(case, got)


@needs_mpi
def test_stateful_protocols_stop_at_the_single_process_step(tmp_path):
    """Cycles (from the per-node or per-edge state gathered on rank 0), fixed points and stability."""
    runs = [("torus:6x5", "rotor-router", "contiguous"), ("random-tree:30", "threshold1", "metis"),
            ("hypercube:5", "threshold2", "metis"), ("random-regular:30,3", "ds", "metis"),
            ("hypercube:5", "sos", "contiguous")]
    cases = [{"graph": g, "algo": a, "init": "random:0..100", "seed": 5, "partition": method, "max_steps": 600,
              "allow_infeasible": True} for g, a, method in runs]
    got = run_cases(3, cases, tmp_path)
    for case, line in zip(cases, got):
        assert_same(case, line)
    assert [line["stop_reason"] for line in got] == ["cycle", "cycle", "stable", "stable", "fixed-point"]


# ---------------------------------------------------------------------------------------------- relays (Case 2)
# diffusion-oriented off a biconnected graph runs on the supergraph H (Subramanian and Scherson 1994,
# Sec. 4, Case 2): a transfer on an added edge a-b reads load[b], two hops away in G, and is relayed
# by the cut vertex between them. A tree, a star (one cut vertex of high degree), two cycles joined
# by a bridge with a pendant path, three cycles sharing one cut vertex, and a larger tree.
def _cycle(nodes):
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


RELAY_FILES = {
    "bridge.txt": _cycle(list(range(6))) + _cycle(list(range(6, 12))) + [(0, 6), (11, 12), (12, 13)],
    "cut-vertex.txt": _cycle([0, 1, 2, 3, 4]) + _cycle([0, 5, 6, 7, 8]) + _cycle([0, 9, 10]),
}


def _relay_cases(tmp_path, max_steps=150) -> list[dict]:
    specs = ["random-tree:30", "star:9"]
    for name, edges in RELAY_FILES.items():
        path = tmp_path / name
        path.write_text("".join(f"{a} {b}\n" for a, b in edges))
        specs.append(f"file:{path}")
    # point:500 overdraws on the trees (ceilings, Sec. 4): the infeasible steps are counted alike.
    cases = [{"graph": spec, "algo": "diffusion-oriented", "init": init, "seed": 5, "partition": method,
              "max_steps": max_steps, "allow_infeasible": True}
             for method in ("contiguous", "metis") for spec in specs for init in ("random:0..1000", "point:500")]
    cases += [{"graph": "random-tree:200", "algo": "diffusion-oriented", "init": "random:0..1000", "seed": 5,
               "partition": method, "max_steps": 60} for method in ("contiguous", "metis")]
    return cases


def test_relay_graphs_are_case_2():
    """The graphs above are not biconnected: one has a bridge, one a cut vertex and no bridge."""
    g = nx.Graph(RELAY_FILES["bridge.txt"])
    assert nx.has_bridges(g) and not nx.is_biconnected(g)
    g = nx.Graph(RELAY_FILES["cut-vertex.txt"])
    assert not nx.has_bridges(g) and list(nx.articulation_points(g)) and not nx.is_biconnected(g)
    for spec in ("random-tree:30", "star:9", "random-tree:200"):
        assert not is_biconnected(make_graph(spec, seed=5))


@needs_mpi
@pytest.mark.parametrize("k", [2, 3, pytest.param(1, marks=pytest.mark.slow), pytest.param(4, marks=pytest.mark.slow)])
def test_diffusion_oriented_off_biconnected_graphs_matches_single_process(k, tmp_path):
    """Trees, a bridge, a cut vertex: the runs of Case 2 for K = 1 .. 4, both partitions, bit for bit."""
    cases = _relay_cases(tmp_path)
    lines = run_cases(k, cases, tmp_path)
    for case, got in zip(cases, lines):
        assert_same(case, got)
        # The relays ran: added edges in H, two exchange rounds per step in the message count.
        assert got["report"]["added_edges"] > 0
        assert got["messages"] == 4 * make_graph(case["graph"], seed=5).m * got["steps"]
    # Stops by the collective stability test (on H's halo) and by the step limit; overdraws counted.
    assert {line["stop_reason"] for line in lines} == {"stable", "max-steps"}
    assert any(line["infeasible_steps"] > 0 for line in lines)


@needs_mpi
def test_diffusion_oriented_relay_errors_are_one_line_on_every_rank(tmp_path):
    """An overdraw on a tree stops every rank as it stops the single process; kernel=numpy is refused."""
    overdraw = {"graph": "random-tree:30", "algo": "diffusion-oriented", "init": "point:500", "seed": 5,
                "max_steps": 300}
    numpy_kernel = {**overdraw, "init": "random:0..1000", "params": {"kernel": "numpy"}}
    got = run_cases(3, [overdraw, numpy_kernel], tmp_path)
    with pytest.raises(TokendistError) as single_error:
        single(overdraw)
    assert got[0] == {"error": str(single_error.value)}
    assert got[1]["error"] == ("diffusion-oriented cannot run partitioned yet with kernel=numpy on a graph that is "
                               "not biconnected: use kernel=numba (the default)")
    single(numpy_kernel)  # the single process runs it


@needs_mpi
@pytest.mark.slow
def test_issue_command_diffusion_oriented_torus_64x64(tmp_path):
    """``mpiexec -n 3 ... run --graph torus:64x64 --algo diffusion-oriented ... --json``: the same JSON."""
    args = ["-m", "tokendist.cli", "run", "--graph", "torus:64x64", "--algo", "diffusion-oriented", "--init",
            "random:0..1000", "--seed", "5", "--json"]
    plain = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=240,
                           env={**os.environ, "PYTHONPATH": str(SRC)})
    want = json.loads(plain.stdout)
    want.pop("seconds"), want.pop("variants")
    for method in ("contiguous", "metis"):
        done = launch(3, args + ["--backend", "mpi", "--partition", method])
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout)
        assert got.pop("ranks")["count"] == 3
        got.pop("seconds"), got.pop("variants")
        assert got == want


@needs_mpi
@pytest.mark.slow
def test_discrepancy1_stops_at_the_single_process_step(tmp_path):
    """Whole cycles of DISCREPANCY-1: localMax, the nodes' stop steps (halting them) and the final cycle."""
    cases = [{"graph": "torus:6x5", "algo": "discrepancy1", "init": "random:0..100", "seed": 5, "partition": "metis",
              "max_steps": 1500, "params": {"termination": "halt"}},
             {"graph": "random-regular:30,3", "algo": "discrepancy1", "init": "random:0..100", "seed": 5,
              "partition": "contiguous", "max_steps": 1500}]
    got = run_cases(3, cases, tmp_path)
    for case, line in zip(cases, got):
        assert_same(case, line)
    assert [line["stop_reason"] for line in got] == ["stable", "cycle"]
    assert all(line["report"]["termination"]["nodes_stopped"] > 0 for line in got)


CRASH = '''
import tokendist
from tokendist.engine.mpi import _run


class Defective(_run.LocalPart):
    def __init__(self, comm, *args, **kwargs):
        super().__init__(comm, *args, **kwargs)
        if comm.Get_rank() == 1:
            raise ValueError("a defect on rank 1 only")


_run.LocalPart = Defective
tokendist.simulate("torus:8x8", "multi-port", "random:0..100", seed=1, backend="mpi")
'''


@needs_mpi
def test_a_defect_on_one_rank_aborts_the_job_instead_of_hanging(tmp_path):
    # Ranks 0 and 2 wait in a collective that rank 1 never reaches: without the abort they would
    # wait for ever and the launch would time out.
    script = tmp_path / "crash.py"
    script.write_text(CRASH)
    done = launch(3, [str(script)], timeout=120)
    assert done.returncode != 0
    assert "a defect on rank 1 only" in done.stderr


# ---------------------------------------------------------------------------------------------- random-walk
# Elsässer, Monien, Schamberger 2006, Sec. 3: phase 1 (integer FOS and the real FOS estimate), each
# switch rule, phase 2's walks of marked and negative tokens across the cuts, annihilation, the end
# of phase 2 (stable), overdrawn nodes (point loads switched early), slow nodes (speeds), and runs
# cut off in phase 1 and in phase 2.
STEP10 = {"switch": "step", "switch_step": "10"}
WALK_CASES = [(g, "random:0..1000", STEP10, speeds, None) for g in GRAPHS for speeds in (None, "uniform:1..4")] + [
    ("hypercube:5", "random:0..1000", {"switch_tol": "1"}, None, None),  # switch=error
    ("hypercube:5", "random:0..1000", {"switch": "local", "switch_tol": "1"}, "uniform:1..4", None),
    ("torus:6x5", "random:0..1000", {"switch": "local", "switch_tol": "1"}, None, None),
    ("torus:6x5", "point:100", {"switch": "step", "switch_step": "3"}, "uniform:1..10", None),  # overdraws
    ("hypercube:5", "point:100", {"switch": "step", "switch_step": "3"}, None, None),
    ("torus:6x5", "random:0..1000", STEP10, "uniform:1..4", 15),  # ends in phase 2, marked tokens left
    ("torus:6x5", "random:0..1000", {}, "uniform:1..4", 20),  # ends in phase 1
]


def _walk_cases(extra=()):
    out = []
    for method in ("contiguous", "metis"):
        for g, init, params, speeds, max_steps in WALK_CASES + list(extra):
            case = {"graph": g, "algo": "random-walk", "init": init, "seed": 5, "partition": method,
                    "params": params, "max_steps": max_steps or 400, "allow_infeasible": True}
            if speeds:
                case["speeds"] = speeds
            out.append(case)
    return out


def _assert_walk_branches_reached(cases):
    """In one process the cases reach every switch rule, phase 2, annihilation, its end and overdraws."""
    reports = [single(c).report for c in cases]
    done = [r for r in reports if r["phase"] == 3]
    assert {r["switch_rule"] for r in done} == {"error", "local", "step"}
    assert all(r["annihilated"] > 0 and r["done_step"] > r["switch_step"] for r in done if r["initial_marked"])
    assert sum(r["overdraw_events"] for r in reports) > 0 and sum(r["slow_nodes"] or 0 for r in reports) > 0
    assert any(r["phase"] == 2 and r["marked"] > 0 for r in reports)
    assert any(r["phase"] == 1 for r in reports)


@needs_mpi
def test_random_walk_matches_single_process(tmp_path):
    """Both partitions, K = 3: walks across the cuts give the single-process run, report and series included."""
    # The default switch (the estimate within 1/n^2 of the ideal loads) too: 98 steps.
    cases = _walk_cases(extra=[("torus:6x5", "random:0..1000", {}, None, None)])
    _assert_walk_branches_reached(cases[:len(WALK_CASES)])
    for case, got in zip(cases, run_cases(3, cases, tmp_path)):
        assert_same(case, got)
        assert got["report"]["annihilated"] >= 0 and len(got["report"]["series"]["marked"]) == got["steps"]


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2, 4])
def test_random_walk_matches_for_other_rank_counts(k, tmp_path):
    cases = _walk_cases()
    for case, got in zip(cases, run_cases(k, cases, tmp_path)):
        assert_same(case, got)


@needs_mpi
@pytest.mark.slow
def test_random_walk_issue_command(tmp_path):
    """The issue's command (``switch=error`` with tolerance 1/n^2: 10,000 phase-1 steps) prints the same JSON."""
    args = ["-m", "tokendist.cli", "run", "--graph", "torus:64x64", "--algo", "random-walk", "--init",
            "random:0..1000", "--seed", "5", "--json"]
    done = launch(3, args + ["--backend", "mpi"])
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    plain = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=240,
                           env={**os.environ, "PYTHONPATH": str(SRC)})
    want = json.loads(plain.stdout)
    assert got.pop("ranks")["count"] == 3
    for doc in (got, want):
        doc.pop("seconds"), doc.pop("variants")
    assert got == want


CAPACITIES = '''
import json
import numpy as np
from mpi4py import MPI
import tokendist
from tokendist.graphs import make_graph

for spec, params, method in [("random-regular:30,3", {"switch": "local", "switch_tol": "1"}, "metis"),
                             ("torus:6x5", {"switch": "step", "switch_step": "8"}, "contiguous")]:
    g = make_graph(spec, seed=2)
    g = g.with_capacities(np.random.default_rng(3).uniform(0.5, 1.0, g.m))
    g = g.with_speeds(np.random.default_rng(4).uniform(1, 3, g.n))
    kw = dict(seed=5, params=params, max_steps=400, allow_infeasible=True)
    got = tokendist.simulate(g, "random-walk", "random:0..1000", backend="mpi", partition=method, **kw)
    if MPI.COMM_WORLD.Get_rank() == 0:
        want = tokendist.simulate(g, "random-walk", "random:0..1000", **kw)
        docs = [r.to_json() for r in (got, want)]
        for d in docs:
            for k in ("seconds", "variants", "ranks"):
                d.pop(k, None)
        print(json.dumps({"same": json.dumps(docs[0], default=float) == json.dumps(docs[1], default=float)
                          and got.loads.tolist() == want.loads.tolist(), "report": want.report}, default=float))
'''


@needs_mpi
def test_random_walk_with_capacities_and_speeds(tmp_path):
    """Edge capacities and speeds (c_ij = cap_ij / (c max(d_i, d_j)), M = I - L S^-1): the single-process run."""
    script = tmp_path / "capacities.py"
    script.write_text(CAPACITIES)
    done = launch(3, [str(script)])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 2 and all(line["same"] for line in lines)
    assert all(line["report"]["phase"] == 3 and line["report"]["annihilated"] > 0 for line in lines)
