"""Dynamic load from the CLI (``--inject``, the scenario key ``inject``) and protocols on live edges."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tokendist.cli import main
from tokendist.engine import PROTOCOLS, EdgeFailures, simulate
from tokendist.engine._injection import Injection, InjectionSchedule, parse_injection, stream_summary
from tokendist.errors import TokendistError


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------ the spec grammar
def test_spec_grammar_builds_the_stream():
    inj = parse_injection("rate=2.5,consume=2,nodes=0;3;7,consume_from=lightest,start=10,stop=90,burst=100@50;7@60")
    d = inj.describe()
    assert (d["rate"], d["consume"], d["inject_at"], d["consume_from"]) == (2.5, 2.0, "nodes", "lightest")
    assert d["nodes"] == [0, 3, 7] and (d["start"], d["stop"]) == (10, 90) and d["bursts"] == [(50, 100), (60, 7)]
    assert parse_injection("rate=1,nodes=all").describe()["inject_at"] == "all"
    assert parse_injection("burst=5@0").describe()["rate"] == 0


@pytest.mark.parametrize("spec,words", [
    ("rate=-1", "rate must be a number >= 0"), ("rate=nan", "rate must be"), ("rate=x", "rate must be"),
    ("nodes=a;b", "integers separated by ';'"), ("burst=10", "COUNT@STEP"), ("colour=1", "unknown key 'colour'"),
    ("", "expected KEY=VALUE"), ("consume_from=nodes,rate=1", "needs nodes="), ("rate=1,rate=2", "given twice"),
    ("rate=1,start=5,stop=2", "stop comes before start"), ("nodes=0", "nothing would arrive"),
    ("rate", "expected key=value"), ("start=-1,rate=1", "start must be a step"),
    ("rate=1,nodes=0;1,consume_from=2;3", "one node list serves both"), ("file:", "file:PATH"),
])
def test_bad_specs_are_one_line_errors(spec, words):
    with pytest.raises(TokendistError, match=words.replace("(", r"\(")):
        parse_injection(spec)


@pytest.mark.parametrize("argv", [
    ["run", "--graph", "ring:8", "--algo", "multi-port", "--init", "point:8", "--inject", "rate=x"],
    ["run", "--graph", "ring:8", "--algo", "multi-port", "--init", "point:8", "--inject", "rate=1,nodes=0;99"],
    ["compare", "--graph", "ring:8", "--init", "point:8", "--inject", "burst=1", "--no-files"],
    ["compare", "--graph", "ring:8", "--init", "point:8", "--inject", "rate=1,nodes=0;99", "--no-files"],
    ["run", "--graph", "ring:8", "--algo", "multi-port", "--init", "point:8", "--inject", "file:/no/such/file"],
])
def test_cli_errors_are_one_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------ conservation and the stream metrics
@settings(max_examples=20, deadline=None)
@given(rate=st.floats(0, 6), consume=st.floats(0, 6), where=st.sampled_from(["random", "all", "heaviest", "0;5"]),
       taker=st.sampled_from(["random", "lightest", "heaviest"]), burst=st.integers(0, 50), seed=st.integers(0, 99))
def test_tokens_are_conserved_up_to_the_stream(rate, consume, where, taker, burst, seed):
    spec = f"rate={rate},consume={consume},nodes={where},consume_from={taker},burst={burst}@7"
    inj = parse_injection(spec)
    r = simulate("torus:4x4", "multi-port", "random:0..9", injection=inj, max_steps=40, seed=seed)
    assert r.loads.min() >= 0
    assert r.loads.sum() == r.tokens == r.initial_loads.sum() + inj.injected - inj.consumed
    s = r.stream
    assert s["backlog_final"] == r.tokens and s["injection"]["injected"] == inj.injected
    assert s["max_load_peak"] == r.trace["max"][1:].max()
    assert s["discrepancy_time_average"] == pytest.approx(r.trace["discrepancy"][1:].mean())


def test_all_spreads_evenly_and_bursts_arrive_once():
    inj = Injection(rate=8, inject_at="all", bursts=[(3, 16)])
    r = simulate("ring:8", "multi-port", "constant:0", injection=inj, max_steps=6, params={"threshold": 10**6})
    # 6 steps of 8 tokens in turn over 8 nodes, plus the burst of 16 (2 rounds): exactly even.
    assert inj.injected == 6 * 8 + 16 and np.all(r.loads == r.loads[0])


def test_stream_summary_by_hand():
    s = stream_summary([0, 1, 2, 3], [10, 12, 11, 13], [5, 7, 6, 8], [4, 6, 2, 1])
    assert s["backlog_final"] == 13 and s["backlog_peak"] == 13 and s["backlog_mean"] == 12
    assert s["max_load_peak"] == 8 and s["discrepancy_time_average"] == 3 and s["discrepancy_peak"] == 6


def test_schedule_file(tmp_path):
    f = tmp_path / "events.txt"
    f.write_text("# step node tokens\n0 0 10\n2 3 -4\n2 1 5\n9 2 -100\n")
    inj = parse_injection(f"file:{f}")
    assert isinstance(inj, InjectionSchedule)
    r = simulate("ring:6", "multi-port", "constant:3", injection=inj, max_steps=20)
    # node 2 cannot give 100 tokens: only what it holds leaves, and the run records that.
    assert inj.injected == 15 and 4 < inj.consumed < 104
    assert r.tokens == 18 + 15 - inj.consumed and r.loads.min() >= 0
    f.write_text("0 0\n")
    with pytest.raises(TokendistError, match="3 integers"):
        parse_injection(f"file:{f}")


# ------------------------------------------------------------------ the CLI and scenarios
def test_run_with_inject_json(capsys):
    d = _json(capsys, ["run", "--graph", "torus:16x16", "--algo", "multi-port", "--init", "random:0..100",
                       "--inject", "rate=5,consume=4,nodes=0;3;7,burst=100@50", "--max-steps", "300", "--json"])
    s = d["stream"]
    assert s["injection"]["injected"] == 5 * 300 + 100 and s["injection"]["consumed"] == 4 * 300
    assert d["tokens"] == s["backlog_final"]
    assert s["backlog_peak"] >= s["backlog_final"] and s["max_load_peak"] >= d["final"]["max"]


def test_run_with_inject_table(capsys):
    assert main(["run", "--graph", "ring:16", "--algo", "multi-port", "--init", "constant:4", "--inject",
                 "rate=1,consume=1", "--max-steps", "50"]) == 0
    out = capsys.readouterr().out
    assert "injection rate=1,consume=1" in out and "backlog final" in out and "discrepancy time average" in out


def test_scenario_inject_and_compare_give_every_protocol_the_same_stream(capsys, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[scenario]\nname = "stream"\ngraph = "torus:6x6"\ninit = "random:0..20"\nmax_steps = 200\n'
                 'algos = ["multi-port", "single-port", "diffusion-random"]\ninject = "rate=3,consume=3,nodes=0"\n')
    d = _json(capsys, ["compare", "--scenario", str(f), "--no-files", "--json"])
    assert d["scenario"]["inject"] == "rate=3,consume=3,nodes=0"
    injected = {r["stream"]["injection"]["injected"] for r in d["rows"]}
    assert injected == {600}  # same arrivals for every protocol
    assert "lowest_time_averaged_discrepancy" in d["verdict"]
    f.write_text('[scenario]\nname = "x"\ngraph = "ring:6"\ninit = "point:6"\ninject = "rate=oops"\n')
    assert main(["compare", "--scenario", str(f), "--no-files"]) == 2
    assert "rate must be" in capsys.readouterr().err


def test_compare_inject_flag_overrides(capsys):
    d = _json(capsys, ["compare", "--graph", "ring:10", "--init", "constant:5", "--algos", "multi-port",
                       "--inject", "rate=2,consume=1", "--max-steps", "100", "--no-files", "--json"])
    row = d["rows"][0]
    assert row["stream"]["injection"]["injected"] == 200 and row["stream"]["backlog_final"] == 50 + 200 - 100


# ------------------------------------------------------------------ live edges (edge failures)
NEWLY_DYNAMIC = ["diffusion", "diffusion-floor", "diffusion-ceil", "diffusion-random", "multi-port", "single-port"]


@pytest.mark.parametrize("name", NEWLY_DYNAMIC)
@pytest.mark.parametrize("kernel", ["numba", "numpy"])
def test_newly_dynamic_protocols_conserve_on_live_edges(name, kernel):
    for seed in (1, 2):
        r = simulate("torus:8x8", name, "random:0..60", seed=seed, max_steps=150, dynamics=EdgeFailures(0.3),
                     params={"kernel": kernel}, check=True, allow_infeasible=True)
        assert r.loads.sum() == pytest.approx(r.initial_loads.sum(), abs=1e-6)
        assert r.steps == 150 and r.final["discrepancy"] < r.initial["discrepancy"]


@pytest.mark.parametrize("name", NEWLY_DYNAMIC)
def test_no_token_crosses_a_failed_edge(name):
    """Every edge down: a step moves nothing (the rule applies to the live edges only)."""
    r = simulate("torus:6x6", name, "random:0..60", seed=3, max_steps=20, dynamics=EdgeFailures(1.0))
    np.testing.assert_array_equal(r.loads, r.initial_loads)
    assert r.tokens_moved == 0


def test_diffusion_on_live_edges_uses_the_base_coefficients():
    """One step with some edges down equals l - sum over live edges of P_ij (l_i - l_j), P from the base graph."""
    from tokendist.graphs import make_graph
    from tokendist.engine import make_protocol

    g = make_graph("torus:5x5")
    rng = np.random.default_rng(0)
    loads = rng.uniform(0, 50, g.n)
    proto = make_protocol("diffusion")
    proto.reset(g, loads.copy(), rng)
    alive = rng.random(g.m) >= 0.4
    h = g.edge_subgraph(alive)
    new = proto.step(0, h, loads).loads
    alpha = proto.alpha[alive]
    naive = loads.copy()
    for a, b, p in zip(g.u[alive], g.v[alive], alpha):
        flow = p * (loads[a] - loads[b])
        naive[a] -= flow
        naive[b] += flow
    np.testing.assert_allclose(new, naive, rtol=0, atol=1e-12)


def test_compare_edge_failure_runs_every_protocol_whose_rule_allows(capsys):
    d = _json(capsys, ["compare", "--graph", "torus:6x6", "--init", "random:0..30", "--edge-failure", "0.2",
                       "--max-steps", "100", "--no-files", "--json"])
    rows = {r["algorithm"]: r for r in d["rows"]}
    for name, cls in PROTOCOLS.items():
        if cls.dynamic:
            assert rows[name]["status"] in ("ok", "infeasible"), (name, rows[name]["reason"])
        else:
            assert rows[name]["status"] == "skipped" and cls.static_reason in rows[name]["reason"]
    assert sum(cls.dynamic for _, cls in PROTOCOLS.items()) >= 12


def test_scenario_file_paths_are_relative_to_the_scenario(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "loads.txt").write_text("\n".join(["8", "0", "0", "0", "0", "0"]) + "\n")
    (folder / "events.txt").write_text("0 0 6\n")
    (folder / "s.toml").write_text('[scenario]\nname = "rel"\ngraph = "ring:6"\ninit = "file:loads.txt"\n'
                                   'algos = ["multi-port"]\nmax_steps = 20\ninject = "file:events.txt"\n')
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    d = _json(capsys, ["compare", "--scenario", "exp/s.toml", "--no-files", "--json"])
    row = d["rows"][0]
    assert row["status"] == "ok" and row["stream"]["injection"]["injected"] == 6
    assert d["tokens"] == 8
