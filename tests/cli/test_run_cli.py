"""The run, compare, algos, bench and reproduce commands: output shape and clean errors."""

import argparse
import json

import numpy as np
import pytest

from tokendist.cli import main
from tokendist.graphs import make_graph


def _json(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_run_json_has_documented_keys(capsys):
    d = _json(capsys, ["run", "--graph", "torus:6x6", "--algo", "multi-port", "--init", "point:500", "--json"])
    for key in ("graph", "algorithm", "seed", "steps", "stop_reason", "tokens", "initial", "final", "tokens_moved",
                "infeasible_steps"):
        assert key in d
    for key in ("discrepancy", "max", "min", "local_discrepancy", "l1_error", "l2_error", "linf_error",
                "max_weighted_load"):
        assert key in d["initial"] and key in d["final"]
    assert d["graph"] == {"spec": "torus:6x6", "n": 36, "m": 72, "heterogeneous": False}
    assert d["tokens"] == 500 and d["stop_reason"] == "stable"
    assert d["final"]["local_discrepancy"] <= 2 * 4


def test_run_writes_loads_trace_and_plot(capsys, tmp_path):
    loads = tmp_path / "final.txt"
    code = main(["run", "--graph", "ring:10", "--algo", "multi-port", "--init", "point:100", "--save-loads",
                 str(loads), "--out", str(tmp_path / "o")])
    assert code == 0
    w = np.loadtxt(loads, dtype=int)
    assert w.sum() == 100 and w.shape == (10,)
    assert (tmp_path / "o" / "trace.csv").exists() and (tmp_path / "o" / "run.png").stat().st_size > 1000
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["tokens"] == 100


@pytest.mark.parametrize("argv,needle", [
    (["run", "--graph", "torus:4x4", "--algo", "nope", "--init", "point:5"], "unknown algorithm"),
    (["run", "--graph", "torus:4xq", "--algo", "multi-port", "--init", "point:5"], "torus:4xq"),
    (["run", "--graph", "nosuch:3", "--algo", "multi-port", "--init", "point:5"], "unknown topology"),
    (["run", "--graph", "ring:5", "--algo", "multi-port", "--init", "point:-5"], "point"),
    (["run", "--graph", "ring:5", "--algo", "multi-port", "--init", "file:/no/such/file"], "/no/such/file"),
    (["run", "--graph", "ring:5", "--algo", "multi-port", "--init", "point:5", "--param", "bogus=1"], "bogus"),
    (["run", "--graph", "ring:5", "--algo", "multi-port", "--init", "point:5", "--param", "threshold=x"], "threshold"),
    (["run", "--graph", "ring:5", "--algo", "multi-port"], "--init"),
    (["run", "--graph", "ring:5", "--algo", "multi-port", "--init", "point:5", "--max-steps", "-3"], "max-steps"),
    (["run", "--graph", "ring:5", "--algo", "multi-port", "--init", "point:5", "--edge-failure", "2"], "edge-failure"),
    (["run", "--graph", "ring:5", "--algo", "multi-port", "--init", "point:5", "--speeds", "uniform:0..x"], "speeds"),
    (["compare", "--algos", "nope"], "unknown algorithm"),
    (["compare", "--param", "multi-port=3"], "ALGO.KEY=VALUE"),
    (["reproduce", "no-such-entry"], "unknown reproduce entry"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_file_init_errors_name_the_line(capsys, tmp_path):
    f = tmp_path / "loads.txt"
    f.write_text("1\n2\nx\n4\n5\n")
    code = main(["run", "--graph", "ring:5", "--algo", "multi-port", "--init", f"file:{f}"])
    err = capsys.readouterr().err
    assert code == 2 and f"{f}:3" in err
    f.write_text("1\n2\n3\n")
    assert main(["run", "--graph", "ring:5", "--algo", "multi-port", "--init", f"file:{f}"]) == 2
    assert "3 loads for a graph of 5 nodes" in capsys.readouterr().err


def test_algos_json_lists_every_protocol(capsys):
    from tokendist.engine import PROTOCOLS

    d = _json(capsys, ["algos", "--json"])
    assert {x["name"] for x in d} == set(PROTOCOLS.names())
    for x in d:
        assert x["paper"] and x["model"] in ("single-port", "multi-port", "flow", "message")


def test_compare_json_and_files(capsys, tmp_path):
    d = _json(capsys, ["compare", "--graph", "ring:12", "--init", "point:240", "--algos", "diffusion,multi-port",
                       "--levels", "100,10", "--max-steps", "400", "--out", str(tmp_path), "--json"])
    assert [r["algorithm"] for r in d["rows"]] == ["diffusion", "multi-port"]
    assert all(r["status"] == "ok" for r in d["rows"])
    assert d["rows"][0]["steps_to_level"]["10"] is not None
    assert (tmp_path / "compare.png").exists() and (tmp_path / "compare.csv").exists()


def test_scenario_file_is_validated_before_running(capsys, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[scenario]\nname = "x"\ngraph = "ring:6"\ninit = "point:60"\nalgos = ["multi-port"]\nmax_steps = 50\n'
                 '[params.multi-port]\nthreshold = 3\n')
    d = _json(capsys, ["compare", "--scenario", str(f), "--no-files", "--json"])
    assert d["rows"][0]["algorithm"] == "multi-port" and d["scenario"]["max_steps"] == 50
    f.write_text('[scenario]\ngraph = "ring:6"\ninit = "point:60"\ncolour = 3\n')
    assert main(["compare", "--scenario", str(f), "--no-files"]) == 2
    assert "unknown scenario key" in capsys.readouterr().err
    f.write_text('[scenario]\ngraph = "ring:6"\ninit = "point:60"\n[params.multi-port]\nbogus = 1\n')
    assert main(["compare", "--scenario", str(f), "--no-files"]) == 2
    f.write_text("not toml [")
    assert main(["compare", "--scenario", str(f)]) == 2


def test_default_scenario_is_valid():
    from tokendist.experiments import default_scenario

    sc = default_scenario().validate()
    assert sc.graph and sc.init and sc.levels


def test_bench_reports_ratio_against_naive(capsys):
    d = _json(capsys, ["bench", "--graphs", "torus:30x30", "--algos", "multi-port", "--naive-graph", "torus:20x20",
                       "--steps", "2", "--json"])
    row = d["rows"][0]
    # Structure, not speed: timings on a shared machine are not test assertions.
    assert row["ns_per_edge_step"] > 0 and d["naive_ns_per_edge_step"] > 0
    assert row["ratio_vs_naive"] == pytest.approx(d["naive_ns_per_edge_step"] / row["ns_per_edge_step"])
    assert row["bytes_per_edge"] > 0 and row["reset_seconds"] >= 0 and row["note"] == ""
    assert row["variant"] == "stencil, serial (multi_port_step_stencil)"  # a torus: the stencil kernel
    assert 0 <= row["transient_bytes_per_edge"] <= row["bytes_per_edge"]
    assert row["cpu_ns_per_edge_step"] > 0
    assert 0 < row["best_ns_per_edge_step"] <= row["ns_per_edge_step"]
    assert row["floor_ns_per_edge_step"] > 0
    assert row["ratio_vs_floor"] == pytest.approx(row["ns_per_edge_step"] / row["floor_ns_per_edge_step"])
    # The engine's own work next to the step: checks, then the metrics of a recorded step.
    assert row["engine_ns_per_edge_step"] > 0 and row["metrics_ns_per_edge_step"] > 0
    assert row["run_over_step"] == pytest.approx(1 + row["engine_ns_per_edge_step"] / row["ns_per_edge_step"])
    assert row["recorded_run_over_step"] == pytest.approx(
        row["run_over_step"] + row["metrics_ns_per_edge_step"] / row["ns_per_edge_step"])


def test_bench_default_graphs_are_the_issue_three(capsys):
    # The default of --graphs is what `tokendist bench` runs with no option: it must parse into the
    # three graphs of the performance target (it once joined them with commas into one bad spec).
    from tokendist.cli._bench import BenchCommand, graph_list
    from tokendist.experiments._bench import DEFAULT_BENCH_GRAPHS

    parser = argparse.ArgumentParser()
    BenchCommand().add_arguments(parser)
    assert graph_list(parser.parse_args([]).graphs) == list(DEFAULT_BENCH_GRAPHS) == [
        "torus:1000x1000", "hypercube:20", "random-regular:1000000,4"]
    assert graph_list(" ring:6 ; kary:2,3 ;") == ["ring:6", "kary:2,3"]


@pytest.mark.parametrize("argv", [["--graphs", ";"], ["--graphs", "ring:6", "--algos", "nope"],
                                  ["--graphs", "ring:6", "--algos", ","],
                                  # Beyond the C time type of the child-process wait (was an OverflowError).
                                  ["--graphs", "ring:6", "--timeout", str(10**20)]])
def test_bench_bad_names_are_one_line_errors(capsys, argv):
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_bench_edgeless_graphs(capsys):
    # Times are per edge: an edgeless graph to bench gets a row saying so (found by fuzzing: it was a
    # ZeroDivisionError), an edgeless naive reference a one-line error.
    d = _json(capsys, ["bench", "--graphs", "path:1;ring:8", "--algos", "fos", "--naive-graph", "ring:8",
                       "--steps", "1", "--json"])
    empty, ring = d["rows"]
    assert empty["graph"] == "path:1" and empty["m"] == 0 and empty["ns_per_edge_step"] is None
    assert empty["note"].startswith("no edges")
    assert ring["ns_per_edge_step"] > 0
    assert main(["bench", "--graphs", "ring:8", "--algos", "fos", "--naive-graph", "complete:1", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "no edges" in err


def test_bench_gather_floor_sums_each_row():
    from tokendist.experiments._bench import gather_floor_step
    from tokendist.graphs._model import unsigned_view
    from tokendist.graphs import laplacian

    g = make_graph("grid:7x5")
    loads = np.arange(g.n, dtype=np.float64) ** 2
    out = np.empty(g.n)
    gather_floor_step(g.indptr, unsigned_view(g.indices), loads, out)
    adjacency = np.diag(np.diag(laplacian(g).toarray())) - laplacian(g).toarray()
    np.testing.assert_allclose(out, adjacency @ loads)


def test_bench_memory_counts_a_steps_temporaries():
    from tokendist.experiments._bench import _transient_bytes

    # 8 MB allocated and freed inside the measured call is counted; nothing allocated, nearly nothing.
    assert _transient_bytes(lambda: np.ones(10**6).sum()) >= 8 * 10**6
    keep = np.ones(10**6)
    assert _transient_bytes(lambda: keep.sum()) < 10**6


def test_bench_memory_counts_each_buffer_once_and_broadcasts_as_one_value():
    from types import SimpleNamespace

    from tokendist.experiments._bench import _resident_bytes
    from tokendist.graphs import make_graph

    g = make_graph("ring:1000")
    graph_only = _resident_bytes(g, SimpleNamespace(), ())
    big = np.zeros(1000)
    # Two views of one buffer: the buffer once, whole (a slice keeps all of it alive).
    views = SimpleNamespace(a=big[:10], b=big.reshape(10, 100))
    assert _resident_bytes(g, views, ()) - graph_only == big.nbytes
    # A value broadcast to n nodes holds one float64.
    ones = SimpleNamespace(s=np.broadcast_to(np.float64(1.0), 1000))
    assert _resident_bytes(g, ones, ()) - graph_only == 8
    # Load buffers are not counted, nor views of them.
    w = np.zeros(1000, np.int64)
    assert _resident_bytes(g, SimpleNamespace(w=w[5:]), (w,)) == graph_only


def test_reproduce_list(capsys):
    d = _json(capsys, ["reproduce", "list", "--json"])
    assert isinstance(d, list)


def test_compare_offline_ratio_is_at_least_one_for_token_protocols(capsys):
    d = _json(capsys, ["compare", "--graph", "torus:4x4", "--init", "random:0..30", "--algos",
                       "multi-port,threshold2,single-port", "--offline", "1", "--max-steps", "2000", "--no-files",
                       "--json"])
    off = d["offline"]
    assert off["exact"] and off["model"] == "multi-port" and off["steps"] >= 1
    ratios = [r["offline_ratio"] for r in d["rows"] if r["offline_ratio"] is not None]
    assert ratios, d["rows"]
    # Lemma 6.3's optimum bounds every algorithm that moves at most one token per edge per step.
    assert all(x >= 1 for x in ratios)


def test_bench_passes_params_to_the_protocols_that_declare_them(capsys):
    d = _json(capsys, ["bench", "--graphs", "torus:6x6", "--algos", "multi-port,diffusion", "--naive-graph", "torus:4x4",
                       "--steps", "1", "--param", "threshold=3", "--json"])
    notes = {r["algorithm"]: r["note"] for r in d["rows"]}
    assert notes == {"multi-port": "threshold=3", "diffusion": ""}


def test_ds_refuses_mobility_in_one_line(capsys):
    # Ghosh et al. Sec. 5: the live edges are a subset of one network's; mobility links new pairs.
    code = main(["run", "--graph", "ring:6", "--algo", "ds", "--init", "point:50", "--mobility", "radius=0.3"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "not in the base graph" in err and "--edge-failure" in err


@pytest.mark.parametrize("argv", [
    ["run", "--graph", "ring:6", "--algo", "fos", "--init", "point:6", "--out", "{file}"],
    ["run", "--graph", "ring:6", "--algo", "fos", "--init", "point:6", "--save-loads", "{tmp}"],
    ["run", "--graph", "ring:6", "--algo", "fos", "--init", "point:6", "--save-loads", "{tmp}/no/such/f.txt"],
    ["compare", "--graph", "ring:6", "--init", "point:6", "--algos", "fos", "--out", "{file}"],
    ["tree", "worst-case", "kary:2,3", "--save-loads", "{tmp}/no/such/w.txt"],
    ["reproduce", "houle-fig1", "--quick", "--out", "{file}"],
])
def test_unwritable_outputs_are_one_line_errors(capsys, tmp_path, argv):
    (tmp_path / "a-file").write_text("")
    argv = [a.format(file=tmp_path / "a-file", tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_bench_skip_times_a_later_stretch_of_the_run(monkeypatch):
    # --skip K: K untimed steps after the warm-up step, then the timed ones, numbered on from there.
    import multiprocessing

    from tokendist.engine import PROTOCOLS
    from tokendist.experiments._bench import _measure_case

    cls = PROTOCOLS.get("multi-port")
    seen, real_step = [], cls.step
    monkeypatch.setattr(cls, "step", lambda self, t, graph, w: seen.append(t) or real_step(self, t, graph, w))
    parent, child = multiprocessing.Pipe(duplex=False)
    _measure_case("multi-port", make_graph("torus:6x6"), np.arange(36) % 7, 3, 0, child, skip=4)
    assert parent.recv()[0] == "ok"
    assert seen == list(range(9))  # warm-up 0, skipped 1-4, timed 5-7, one more step for the memory


def test_bench_skip_on_the_command_line(capsys):
    d = _json(capsys, ["bench", "--graphs", "torus:6x6", "--algos", "multi-port", "--naive-graph", "torus:4x4",
                       "--steps", "2", "--skip", "3", "--json"])
    assert (d["steps"], d["skip"]) == (2, 3) and d["rows"][0]["ns_per_edge_step"] > 0
    assert main(["bench", "--graphs", "torus:6x6", "--algos", "multi-port", "--naive-graph", "torus:4x4",
                 "--steps", "2", "--skip", "3"]) == 0
    assert "median and best of 2: steps 4-5 of the run" in capsys.readouterr().out
    assert main(["bench", "--graphs", "ring:6", "--skip", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_a_piped_table_cuts_no_cell(capsys):
    # Piped (pytest captures stdout): a table wider than the 200 columns of a piped console is
    # printed whole, every cell as it is, none shortened to "…".
    from tokendist.cli._output import table

    columns = ["name", *[f"a long column heading {i}" for i in range(12)]]
    rows = [["torus:1000x1000", *[f"value {i} of a wide row" for i in range(12)]]]
    table("wide", columns, rows)
    out = capsys.readouterr().out
    assert "…" not in out
    assert "torus:1000x1000" in out and "value 11 of a wide row" in out
    assert max(len(line) for line in out.splitlines()) > 200
