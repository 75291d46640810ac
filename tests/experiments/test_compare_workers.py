"""``tokendist compare --workers N``: the protocols on forked worker processes, the same rows."""

import json
import time

import numpy as np
import pytest
from numba.core import event as numba_event

from tokendist.cli import main
from tokendist.experiments import Scenario, compare
from tokendist.experiments._workers import default_workers, run_each

# A message protocol (its trace computed lazily on the event path), integer and real-valued schemes,
# randomised ones, stateful ones; an unknown name adds a skipped row.
ALGOS = ["perfect-tree", "multi-port", "diffusion", "randomized-diffusion", "sos-iou", "flow-imitation",
         "random-walk", "pairwise-averaging"]

_TIMES = ("seconds", "seconds_to_level", "seconds_to_settle")


def _rows(comparison):
    out = []
    for row in comparison.to_json()["rows"]:
        out.append({k: v for k, v in row.items() if k not in _TIMES})
    return out


def test_workers_give_the_rows_of_one_process():
    sc = Scenario("w", "torus:6x6", "random:0..50", algos=ALGOS + ["no-such-protocol"], seed=3, max_steps=400)
    one = compare(sc, workers=1)
    two = compare(sc, workers=2)
    assert _rows(one) == _rows(two)
    assert [r.status for r in two.rows].count("ok") == len(ALGOS)
    for a, b in zip(one.rows, two.rows):
        if a.result is None:
            assert b.result is None
            continue
        assert b.result.graph is two.graph  # the shared graph is put back, not a pickled copy
        assert set(a.result.trace) == set(b.result.trace)
        for key in a.result.trace:
            np.testing.assert_array_equal(a.result.trace[key], b.result.trace[key])
        np.testing.assert_array_equal(a.result.loads, b.result.loads)


def test_more_workers_than_runs_and_an_infeasible_run():
    # SOS from a point load sends more than a node holds: a row of its own, not a failed comparison.
    sc = Scenario("w", "torus:8x8", "point:2000", algos=["sos", "multi-port"], max_steps=200)
    one, many = compare(sc, workers=1), compare(sc, workers=7)
    assert [r.status for r in many.rows] == ["infeasible", "ok"]
    assert _rows(one) == _rows(many)


def test_the_cli_prints_the_same_json_for_any_number_of_workers(capsys, tmp_path):
    outs = []
    for w in ("1", "2"):
        assert main(["compare", "--graph", "torus:5x5", "--init", "random:0..40", "--algos", ",".join(ALGOS),
                     "--max-steps", "300", "--workers", w, "--no-files", "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        d.pop("verdict")  # its "quickest in wall time" answers depend on the clock
        d["rows"] = [{k: v for k, v in r.items() if k not in _TIMES} for r in d["rows"]]
        outs.append(d)
    assert outs[0] == outs[1]


def test_bad_workers_is_one_line(capsys):
    assert main(["compare", "--workers", "0", "--no-files"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--workers" in err


def _compiles_for_a_while(name):
    # numba's compile event, as a kernel's first call raises it in the worker.
    with numba_event.trigger_event("numba:compile", data={"dispatcher": None, "args": (), "return_type": None}):
        time.sleep(0.6)
    return name


def test_a_worker_compiling_is_shown_in_this_process():
    seen = []
    rows = run_each(["a", "b"], _compiles_for_a_while, workers=2, compiling=seen.append)
    assert rows == ["a", "b"]
    assert seen[0] is True and seen[-1] is False


def _fails(name):
    if name == "b":
        raise RuntimeError("a defect in a worker")
    return name


def test_a_defect_in_a_worker_reaches_the_caller():
    with pytest.raises(RuntimeError, match="a defect in a worker"):
        run_each(["a", "b", "c"], _fails, workers=2)


def test_progress_counts_every_run():
    calls = []
    run_each(list("abcd"), str.upper, workers=2, progress=lambda done, total, name: calls.append((done, total)))
    assert calls[-1] == (4, 4)
    assert default_workers() >= 1
