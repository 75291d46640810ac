"""Bad input: one line on stderr, exit code 2, never a traceback, never exit 0.

The cases are the audit's list (huge and non-ASCII numbers in specs, unreadable files, malformed
scenario values, options a protocol would silently ignore), each run through the CLI's ``main``;
then the same mistakes made from the Python API, which must raise a TokendistError naming the
argument.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tokendist.cli import main
from tokendist.engine import simulate
from tokendist.errors import TokendistError
from tokendist.experiments import load_scenario

from ._argv import refused, with_option

RUN = ["run", "--graph", "torus:4x4", "--algo", "diffusion-floor", "--init", "point:100", "--max-steps", "2", "--json"]


@pytest.mark.parametrize("init, words", [
    ("point:1000000000000000000000000000000", "int64"),
    ("point:9223372036854775808", "int64"),
    ("uniform:1000000000000000000000000000000", "int64"),
    ("random:0..99999999999999999999", "int64"),
    ("ramp:0..9223372036854775807", "int64"),          # exact now: the total is beyond int64
    ("constant:9223372036854775807", "int64"),
    ("point:10@", "node id"),
    ("point:\u0664", "not a non-negative integer"),   # Arabic-Indic digit four
    ("point:1_000", "not a non-negative integer"),
    ("random:5..2", "empty range"),
])
def test_init_specs(init, words, capsys):
    refused(with_option(RUN, "--init", init), capsys, words)


def test_ramp_near_int64_is_exact(capsys):
    # ramp:0..10**17 on 100 nodes (4.95e18 tokens, fits int64) was 'infeasible' through an overflow.
    assert main(["run", "--graph", "torus:10x10", "--algo", "diffusion-floor", "--init", "ramp:0..100000000000000000",
                 "--max-steps", "1", "--json"]) == 0
    out = capsys.readouterr().out
    want = sum(i * 10**17 // 99 for i in range(100))
    assert f'"tokens": {want}' in out


@pytest.mark.parametrize("graph", ["torus:\u0664x\u0664", "ghosh-lower-bound:22,1", "random-regular:100000000,3"])
def test_graph_specs(graph, capsys):
    refused(with_option(RUN, "--graph", graph), capsys)


@pytest.mark.parametrize("algo, param, words", [
    ("multi-port", "threshold=99999999999999999999", "2**62"),
    ("multi-port", "threshold=-1", ">= 0"),
    ("async-multi-port", "max_delay=99999999999999999999", "2**62"),
    ("diffusion-oriented", "source=999", "not a node"),
    ("diffusion-oriented", "source=-2", ">= -1"),
    ("fos-floor", "c=nan", "finite"),
    ("sos", "beta=inf", "finite"),
    ("multi-port", "threads=abc", "integer"),
    ("multi-port", "threshold=\u0664", "integer"),
    ("perfect-tree", "max_delay=0", ">= 1"),
])
def test_protocol_params(algo, param, words, capsys):
    graph = "kary:2,3" if algo == "perfect-tree" else "torus:4x4"
    refused(["run", "--graph", graph, "--algo", algo, "--init", "point:100", "--max-steps", "2", "--param", param],
             capsys, words)


@pytest.mark.parametrize("mobility", ["speed=inf", "pause=99999999999999999999", "radius=nan", "speed=1..nan"])
def test_mobility_values(mobility, capsys):
    refused(["run", "--graph", "torus:4x4", "--algo", "fos", "--init", "point:100", "--max-steps", "2",
              "--mobility", mobility], capsys)


def test_mobility_disc_graph_too_large(capsys):
    refused(["run", "--graph", "torus:100x100", "--algo", "fos", "--init", "point:100", "--max-steps", "2",
              "--mobility", "radius=10,wrap=false"], capsys, "about")


@pytest.mark.parametrize("algo", ["multi-port", "threshold2", "diffusion-floor"])
def test_speeds_refused_where_ignored(algo, capsys):
    refused(["run", "--graph", "torus:4x4", "--algo", algo, "--init", "point:100", "--speeds", "uniform:1..2"],
             capsys, "does not use node speeds")


@pytest.mark.parametrize("text, words", [("", "0 speeds"), ("1\n2\n", "2 speeds"), ("x\n", "not a number"),
                                         ("-1\n" * 16, "positive"), ("nan\n" * 16, "positive")])
def test_speeds_files(tmp_path, text, words, capsys):
    p = tmp_path / "s.txt"
    p.write_text(text)
    refused(["run", "--graph", "torus:4x4", "--algo", "fos", "--init", "point:100", "--speeds", f"file:{p}"],
             capsys, words)


def test_loads_file_with_a_huge_value(tmp_path, capsys):
    p = tmp_path / "l.txt"
    p.write_text("1\n" + "12345678901234567890123\n")
    refused(with_option(with_option(RUN, "--graph", "path:2"), "--init", f"file:{p}"), capsys, "int64")


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("option", ["--graph", "--init", "--speeds"])
def test_devices_and_pipes_are_refused(option, fifo, capsys):
    base = ["run", "--graph", "torus:4x4", "--algo", "fos", "--init", "point:100", "--max-steps", "2"]
    for target in ("/dev/zero", fifo):
        refused(with_option(base, option, f"file:{target}"), capsys, "not a regular file")


def test_scenario_device_and_pipe(fifo, capsys):
    for target in ("/dev/zero", fifo):
        refused(["compare", "--scenario", target, "--no-files"], capsys, "not a regular file")


SCENARIO = 'name = "s"\ngraph = "ring:6"\ninit = "random:0..9"\nmax_steps = 10\nalgos = ["multi-port"]\n'


@pytest.mark.parametrize("line, words", [
    ('edge_failure = 2.0', "edge_failure"), ('edge_failure = nan', "edge_failure"),
    ('edge_failure = -0.5', "edge_failure"), ('edge_failure = "abc"', "edge_failure"),
    ('edge_failure = [0.1]', "edge_failure"),
    ('record_every = 0', "record_every"), ('record_every = -3', "record_every"), ('record_every = "a"', "record_every"),
    ('record_every = 1.5', "record_every"),
    ('speeds = "uniform:0..1"', "positive"), ('speeds = [1, 2]', "speeds"), ('speeds = nan', "speeds"),
    ('speeds = 5', "speeds"), ('speeds = ["a"]', "speeds"), ('speeds = "uniform:-2..-1"', "positive"),
    ('max_steps = true', "max_steps"), ('allow_infeasible = "no"', "allow_infeasible"),
    ('levels = 5', "levels"), ('levels = [1, "a"]', "levels"), ('seed = -1', "seed"), ('seed = 1.5', "seed"),
])
def test_scenario_values(tmp_path, line, words, capsys):
    p = tmp_path / "s.toml"
    p.write_text("[scenario]\n" + SCENARIO + line + "\n")
    with pytest.raises(TokendistError, match=words):
        load_scenario(p)
    refused(["compare", "--scenario", str(p), "--no-files", "--json"], capsys, words)


@pytest.mark.parametrize("text, words", [
    ("[scenario]\n" + SCENARIO.replace('name = "s"\n', ""), "needs 'name'"),
    ('params = 1\n[scenario]\n' + SCENARIO, "params"),
    ("[scenario]\n" + SCENARIO + "[params.multi-port]\nthreshold = [1]\n", "threshold"),
    ("[scenario]\n" + SCENARIO + "[params.multi-port]\nthreshold = -4\n", ">= 0"),
    ("x = " + "[" * 10000 + "]" * 10000 + "\n", "TOML"),
])
def test_scenario_structure(tmp_path, text, words, capsys):
    p = tmp_path / "s.toml"
    p.write_text(text)
    refused(["compare", "--scenario", str(p), "--no-files", "--json"], capsys, words)


@pytest.mark.parametrize("speeds", ["uniform:0..1", "file:/nonexistent/speeds.txt"])
def test_compare_bad_speeds_exit_2(speeds, capsys):
    refused(["compare", "--graph", "ring:6", "--init", "random:0..9", "--algos", "fos", "--no-files",
              "--speeds", speeds], capsys)


def test_compare_wrong_length_speeds_file(tmp_path, capsys):
    p = tmp_path / "s.txt"
    p.write_text("1\n2\n")
    refused(["compare", "--graph", "ring:6", "--init", "random:0..9", "--algos", "fos", "--no-files",
              "--speeds", f"file:{p}"], capsys, "2 speeds")


def test_bench_bad_param_exit_2(capsys):
    refused(["bench", "--graphs", "ring:8", "--algos", "multi-port", "--param", "threads=abc"], capsys, "threads")


def test_early_error_leaves_no_out_folder(tmp_path, capsys):
    out = tmp_path / "never"
    refused(with_option(RUN, "--init", "point:x") + ["--out", str(out)], capsys)
    assert not out.exists()


# ---------------------------------------------------------------------- the Python API
@pytest.mark.parametrize("kwargs, words", [
    ({"dynamics": "edge-failure"}, "dynamics"),
    ({"injection": "x"}, "injection"),
    ({"speeds": 5}, "speeds"),
    ({"speeds": [1.0, 2.0]}, "speeds"),
    ({"params": [1, 2]}, "params"),
    ({"keep_loads_every": 0}, "keep_loads_every"),
    ({"max_steps": True}, "max_steps"),
    ({"record_every": 1.5}, "record_every"),
])
def test_api_arguments(kwargs, words):
    algo = "fos" if "speeds" in kwargs else "multi-port"
    with pytest.raises(TokendistError, match=words):
        simulate("torus:4x4", algo, "point:100", max_steps=kwargs.pop("max_steps", 2), **kwargs)


@pytest.mark.parametrize("value", [[1], True, 2**70, -1, 1.5, None])
def test_api_param_values(value):
    with pytest.raises(TokendistError, match="threshold"):
        simulate("torus:4x4", "multi-port", "point:100", params={"threshold": value}, max_steps=2)


def test_api_loads_total_beyond_int64():
    with pytest.raises(TokendistError, match="int64"):
        simulate("ring:3", "multi-port", np.array([2**62, 2**62, 2**62]), max_steps=1)


def test_compare_with_speeds_skips_protocols_that_ignore_them(capsys):
    # They ran as if on the heterogeneous network, with results identical to the homogeneous run.
    assert main(["compare", "--graph", "ring:6", "--init", "random:0..9", "--algos", "multi-port,fos", "--max-steps",
                 "10", "--no-files", "--json", "--speeds", "uniform:1..2"]) == 0
    out = capsys.readouterr().out
    assert "multi-port does not use node speeds" in out
    assert out.count('"status": "ok"') == 1
