"""``tokendist compare``'s verdict and tables that fit the terminal (80 and 120 columns, through a pty)."""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import numpy as np
import pytest

from tokendist.cli import main
from tokendist.cli._compare_view import render
from tokendist.experiments import Scenario, compare, default_scenario
from tokendist.experiments._verdict import settle_step
from tokendist.experiments.defaults import DEFAULT_LEVELS, DEFAULT_MAX_STEPS, DEFAULT_SEED

SRC = Path(__file__).resolve().parents[2] / "src"
ALGOS = "threshold2,diffusion,diffusion-floor,sos,sos-iou,multi-port,single-port,random-walk"


@pytest.fixture(scope="module")
def point_run():
    """The issue's case: a point load on torus:16x16 (sos overdraws; diffusion is real-valued)."""
    sc = Scenario("t", "torus:16x16", "point:5000", algos=ALGOS.split(","), max_steps=1500)
    return compare(sc.validate())


@pytest.fixture(scope="module")
def point_run_overdrawing():
    sc = Scenario("t", "torus:16x16", "point:5000", algos=["sos", "multi-port"], max_steps=600,
                  allow_infeasible=True)
    return compare(sc.validate())


def test_verdict_names_only_comparable_runs(point_run):
    v = point_run.verdict()
    rows = {r.algorithm: r for r in point_run.rows}
    assert rows["sos"].status == "infeasible" and "sos" not in v["comparable"]
    assert rows["diffusion"].divisible and "diffusion" in v["excluded"]
    named = set()
    for entry in v["levels"]:
        for what in ("reached", "settled"):
            if entry[what]["by_steps"]:
                named |= set(entry[what]["by_steps"]["algorithms"])
                named.add(entry[what]["by_wall_time"]["algorithm"])
    named |= set(v["best_final_discrepancy"]["algorithms"])
    assert named and named <= set(v["comparable"])
    for name in v["comparable"]:
        r = rows[name]
        assert r.status == "ok" and not r.divisible and r.infeasible_steps == 0


def test_verdict_winners_are_the_minima(point_run):
    v = point_run.verdict()
    comparable = [r for r in point_run.rows if r.algorithm in v["comparable"]]
    for entry in v["levels"]:
        lv = entry["level"]
        for what, attr, secs in (("reached", "steps_to_level", "seconds_to_level"),
                                 ("settled", "settled_at_level", "seconds_to_settle")):
            values = [getattr(r, attr)[lv] for r in comparable if getattr(r, attr)[lv] is not None]
            best = entry[what]["by_steps"]
            if not values:
                assert best is None
                continue
            assert best["steps"] == min(values)
            assert set(best["algorithms"]) == {r.algorithm for r in comparable if getattr(r, attr)[lv] == min(values)}
            fastest = min(getattr(r, secs)[lv] for r in comparable if getattr(r, secs)[lv] is not None)
            assert entry[what]["by_wall_time"]["seconds"] == round(fastest, 4)
    finals = [r.final_discrepancy for r in comparable]
    assert v["best_final_discrepancy"]["discrepancy"] == min(finals)
    enders = [r for r in comparable if r.final_discrepancy == min(finals)]
    assert v["fewest_messages"]["value"] == min(r.messages for r in enders)
    assert v["fewest_tokens_moved"]["value"] == min(r.tokens_moved for r in enders)


def test_settled_means_stays_at_or_below_to_the_end(point_run):
    for r in point_run.rows:
        if r.status != "ok":
            continue
        steps, disc = r.result.trace["step"], r.result.trace["discrepancy"]
        for lv in point_run.scenario.levels:
            s, reach = r.settled_at_level[lv], r.steps_to_level[lv]
            if s is None:
                assert disc[-1] > lv
                continue
            assert reach is not None and reach <= s
            i = int(np.searchsorted(steps, s))
            assert np.all(disc[i:] <= lv)
            assert i == 0 or disc[i - 1] > lv
            assert r.seconds_to_level[lv] <= r.seconds_to_settle[lv]


def test_settle_step_against_a_naive_scan():
    rng = np.random.default_rng(3)
    for _ in range(200):
        values = rng.integers(0, 6, size=rng.integers(1, 12))
        steps = np.arange(values.size) * 2
        level = int(rng.integers(0, 6))
        naive = None
        for i in range(values.size):
            if all(v <= level for v in values[i:]):
                naive = int(steps[i])
                break
        assert settle_step(steps, values, level) == naive


def test_overdrawing_runs_go_to_the_marked_section(point_run_overdrawing):
    rows = {r.algorithm: r for r in point_run_overdrawing.rows}
    assert rows["sos"].status == "ok" and rows["sos"].infeasible_steps > 0
    v = point_run_overdrawing.verdict()
    assert v["comparable"] == ["multi-port"] and "sos" in v["excluded"]
    out = io.StringIO()
    render(point_run_overdrawing, width=100, file=out)
    text = out.getvalue()
    marked = text.index("NOT COMPARABLE")
    verdict = text.index("VERDICT")
    assert "infeasible steps" in text[marked:verdict]
    assert "sos" not in text[verdict:].replace("sos-iou", "")


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_render_fits_every_width(point_run, width):
    out = io.StringIO()
    render(point_run, width=width, file=out)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= width
    assert not any("…" in line for line in lines)
    for name in ALGOS.split(","):  # every name whole somewhere
        assert any(name in line.split() for line in lines), name


def test_wide_is_one_table_per_section(point_run):
    out = io.StringIO()
    render(point_run, wide=True, width=80, file=out)
    text = out.getvalue()
    assert "…" not in text
    assert text.count("comparable runs (integer loads") == 1
    header = next(line for line in text.splitlines() if line.startswith("algorithm") and "r<=100" in line)
    assert "s<=1" in header and "wall s" in header and len(header) > 80


def test_json_includes_the_verdict(capsys):
    assert main(["compare", "--graph", "torus:8x8", "--init", "point:640", "--algos", "diffusion,multi-port,threshold2",
                 "--max-steps", "500", "--no-files", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["verdict"]["comparable"]) == {"multi-port", "threshold2"}
    assert d["verdict"]["excluded"]["diffusion"].startswith("real-valued")
    assert [e["level"] for e in d["verdict"]["levels"]] == list(DEFAULT_LEVELS)
    assert d["scenario"]["seed"] == DEFAULT_SEED and d["scenario"]["allow_infeasible"] is False
    for r in d["rows"]:
        assert r["comparable"] == (r["algorithm"] != "diffusion")


def test_one_set_of_defaults():
    sc = default_scenario()
    assert sc.seed == DEFAULT_SEED and sc.max_steps == DEFAULT_MAX_STEPS and list(sc.levels) == list(DEFAULT_LEVELS)
    assert sc.allow_infeasible is False and sc.params == {}
    plain = Scenario("x", "ring:4", "point:4")
    assert plain.seed == DEFAULT_SEED and plain.max_steps == DEFAULT_MAX_STEPS and not plain.allow_infeasible


def test_compare_row_is_reproduced_by_run(capsys):
    """A compare row and `tokendist run` with no other option are the same run (same defaults)."""
    assert main(["compare", "--graph", "torus:6x6", "--init", "random:0..40", "--algos", "threshold1,single-port",
                 "--no-files", "--json"]) == 0
    rows = {r["algorithm"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    for name in ("threshold1", "single-port"):
        assert main(["run", "--graph", "torus:6x6", "--init", "random:0..40", "--algo", name, "--json"]) == 0
        run = json.loads(capsys.readouterr().out)
        assert run["steps"] == rows[name]["steps"] and run["messages"] == rows[name]["messages"]
        assert run["final"]["discrepancy"] == rows[name]["final_discrepancy"]


def test_override_does_not_inherit_allow_infeasible(capsys):
    assert main(["compare", "--graph", "torus:16x16", "--init", "point:5000", "--algos", "sos", "--max-steps", "300",
                 "--no-files", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["status"] == "infeasible" and row["comparable"] is False


def _pty_run(argv, columns: int) -> str:
    """Run the CLI with its stdout on a pseudo-terminal of ``columns`` columns; return what it printed."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "PYTHONPATH": str(SRC), "TERM": "dumb",
           "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tokendist.cli", *argv], stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 240)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # colour codes take no columns


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_tables_fit_a_real_terminal(columns):
    argv = ["compare", "--graph", "torus:8x8", "--init", "point:2000", "--algos", ALGOS, "--max-steps", "800",
            "--no-files"]
    for cmd in (argv, ["algos"], ["reproduce", "list"], ["algos", "sos-iou"]):
        text = _pty_run(cmd, columns)
        if cmd is argv:
            assert "VERDICT" in text and "NOT COMPARABLE" in text
        lines = [line for line in text.split("\n") if line.strip()]
        assert lines, cmd
        too_long = [line for line in lines if len(line) > columns]
        assert not too_long, (cmd, too_long[:3])
        assert not any("…" in line for line in lines), cmd


def test_reproduce_all_ends_with_a_summary_of_claims(capsys, monkeypatch):
    import tokendist.cli._reproduce as reproduce_cli
    from tokendist.experiments import _modules  # noqa: F401  (registers the entries)

    monkeypatch.setattr(reproduce_cli.REPRODUCTIONS, "names", lambda: ["houle-sg1", "houle-fig1"])
    assert main(["reproduce", "all", "--quick"]) == 0
    out = capsys.readouterr().out
    summary = out[out.index("summary of the claims"):]
    held = out[:out.index("summary of the claims")].count("holds:")
    assert f"{held} of {held} claims held in 2 entries; every claim held" in summary
    assert "houle-sg1" in summary and "houle-fig1" in summary


def test_algos_name_describes_one_protocol(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["algos", "threshold2"]) == 0
    out = capsys.readouterr().out
    assert "Houle, Symvonis, Wood" in out and "real-valued" in out and "colour_start" in out
    assert "dynamic networks   no: the schedule is an edge colouring" in out
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    d = json.loads((main(["algos", "sos", "--json"]), capsys.readouterr().out)[1])
    assert d["name"] == "sos" and d["divisible"] is True and all("help" in p for p in d["params"])
    assert main(["algos", "nope"]) == 2
