"""The commands with one option fuzzed at a time: a result or one error line, exit code 2, never a traceback.

``run``, ``compare``, ``offline``, ``bounds``, ``tree worst-case`` and ``tree orderings``, and the spec
argument of ``tree msd`` and ``graph info | colour | export``. Each example keeps every other option
valid, so that the fuzzed value is what the command has to judge (a command with several bad options
stops at the first and tests nothing else). Values mix numbers at the edges of float64 (inf, nan,
1e308, subnormals, integers beyond int64), ranges of them, and short arbitrary text. This found
``--speeds uniform:1..inf`` (numpy's OverflowError), ``uniform:1e308..1e308`` (speeds summing to inf:
a ZeroDivisionError), ``offline --slack 10**20`` / ``compare --offline 10**20`` and ``tree worst-case
--base 10**20`` (int64 overflows), ``tree msd kary:50,50`` (an OverflowError) and ``bounds --speeds
uniform:1e-320..1e-320`` (subnormal speeds: 1 / s overflows, numpy's LinAlgError), all now one-line
errors or results.

The second half generates values that are invalid by construction (integers beyond int64,
non-ASCII digits, nan and inf, malformed ranges, scenario values of the wrong TOML type, loads and
speeds files with a bad line or the wrong count) and requires exit 2 with one line: a bad value must
never be read as a good one.
"""

import contextlib
import io
import math
import os
import tempfile
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tokendist.cli import main
from tokendist.engine import PROTOCOLS

from ._argv import with_option

NUMBERS = st.sampled_from(["0", "1", "-1", "0.5", "2", "3", "10", "1e5", "1e308", "-1e308", "inf", "-inf", "nan",
                           "1e-320", "100000000000000000000", "", "x", "0x10", "1_0", " 1"])
TEXT = st.text(alphabet="0123456789.:-=,e+xnaifuromlpsdt@ ", max_size=12)
RANGES = st.builds(lambda a, b: f"{a}..{b}", NUMBERS, NUMBERS)
VALUES = st.one_of(NUMBERS, TEXT, RANGES)
ALGOS = sorted(PROTOCOLS)
GRAPHS = ["ring:6", "torus:4x4", "kary:2,3", "hypercube:3"]


def _mobility():
    pair = st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["radius", "speed", "pause", "wrap", "x"]), VALUES)
    return st.one_of(VALUES, pair, st.lists(pair, min_size=2, max_size=4).map(",".join))


OPTIONS = {
    "--graph": st.builds(lambda k, v: f"{k}:{v}",
                         st.sampled_from(["ring", "torus", "path", "hypercube", "star", "kary"]),
                         st.sampled_from(["3", "1", "0", "2x2", "1x1", "3x0", "2,2", "2,0", "-1", "1e3", "x", ""])),
    "--init": st.one_of(st.builds(lambda k, v: f"{k}:{v}",
                                  st.sampled_from(["point", "uniform", "random", "ramp", "file"]), VALUES), VALUES),
    "--speeds": st.one_of(RANGES.map("uniform:".__add__), st.builds(lambda v: f"file:{v}", TEXT), VALUES),
    "--edge-failure": VALUES,
    "--mobility": _mobility(),
    "--until-discrepancy": VALUES,
    "--until-local-discrepancy": VALUES,
    "--record-every": VALUES,
    "--seed": VALUES,
    "--max-steps": VALUES,
}


@st.composite
def _argv(draw, option):
    algo = draw(st.sampled_from(ALGOS))
    argv = {"--graph": draw(st.sampled_from(GRAPHS)), "--algo": algo, "--init": "random:0..9", "--max-steps": "10"}
    if option == "--param":
        params = PROTOCOLS.get(algo).params
        names = [p.name for p in params] or ["x"]
        choices = sorted({str(c) for p in params for c in (p.choices or ())}) or ["x"]
        value = draw(st.builds(lambda k, v: f"{k}={v}", st.sampled_from(names),
                               st.one_of(VALUES, st.sampled_from(choices))))
    else:
        value = draw(OPTIONS[option])
    argv[option] = value
    return ["run", "--json"] + [x for kv in argv.items() for x in kv]


def _one_line_or_result(argv, json_out=True):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (0, 2), (argv, code, err.getvalue())
    if code == 2:
        assert err.getvalue().startswith("error: ") and err.getvalue().count("\n") == 1, (argv, err.getvalue())
    elif json_out:
        assert out.getvalue().lstrip().startswith("{"), argv


@pytest.mark.parametrize("option", sorted(OPTIONS) + ["--param"])
def test_run_option_fuzz(option):
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_argv(option))
    def check(argv):
        _one_line_or_result(argv)

    check()


@pytest.mark.parametrize("spec", ["uniform:1..inf", "uniform:nan..2", "uniform:1e308..1e308", "uniform:-inf..1",
                                  "uniform:1e-320..1e-320"])
def test_speeds_beyond_float64_are_one_line_errors(spec, capsys):
    for command in ("run", "bounds"):
        argv = [command, "--graph", "ring:4", "--algo", "sos", "--init", "point:10", "--speeds", spec, "--json"]
        assert main(argv) == 2
        assert capsys.readouterr().err.count("\n") == 1


COMPARE = ["compare", "--graph", "ring:6", "--init", "random:0..9", "--max-steps", "20", "--no-files", "--json",
           "--algos", "multi-port,fos,sos"]
COMPARE_OPTIONS = {
    "--algos": st.one_of(VALUES, st.lists(st.sampled_from(ALGOS + ["x", ""]), max_size=3).map(",".join)),
    "--levels": st.one_of(VALUES, st.lists(NUMBERS, max_size=4).map(",".join)),
    "--param": st.builds(lambda a, k, v: f"{a}.{k}={v}", st.sampled_from(ALGOS + ["x"]),
                         st.sampled_from(["threshold", "beta", "c", "probability", "threads", "x"]), VALUES),
    "--scenario": st.one_of(VALUES, st.sampled_from(["default", "x"])),
    "--offline": VALUES,
    "--speeds": RANGES.map("uniform:".__add__),
    "--edge-failure": VALUES,
    "--init": OPTIONS["--init"],
}
OFFLINE = ["offline", "--graph", "ring:6", "--init", "point:12", "--json"]
OFFLINE_OPTIONS = {"--slack": VALUES, "--max-steps": VALUES, "--model": st.sampled_from(["single-port", "x", ""]),
                   "--init": OPTIONS["--init"]}
BOUNDS = ["bounds", "--graph", "ring:6", "--init", "point:12", "--json", "--max-steps", "20"]
BOUNDS_OPTIONS = {"--algo": st.sampled_from(ALGOS + ["x"]), "--until-discrepancy": VALUES,
                  "--speeds": RANGES.map("uniform:".__add__)}
WORST_CASE = ["tree", "worst-case", "kary:2,3", "--json", "--save-loads",
              os.path.join(tempfile.gettempdir(), "tokendist-fuzz-worst-case.txt")]
WORST_CASE_OPTIONS = {"--base": VALUES, "--node": VALUES, "--colour-start": VALUES, "--colouring": VALUES}
ORDERINGS = ["tree", "orderings", "kary:2,3", "--json"]
ORDERINGS_OPTIONS = {"--from": VALUES, "--colouring": VALUES, "--seed": VALUES}
OTHERS = {"compare": (COMPARE, COMPARE_OPTIONS), "offline": (OFFLINE, OFFLINE_OPTIONS),
          "bounds": (BOUNDS + ["--algo", "sos"], BOUNDS_OPTIONS), "tree-worst-case": (WORST_CASE, WORST_CASE_OPTIONS),
          "tree-orderings": (ORDERINGS, ORDERINGS_OPTIONS)}


@pytest.mark.parametrize("command, option", [(c, o) for c, (_, opts) in OTHERS.items() for o in sorted(opts)])
def test_other_commands_option_fuzz(command, option):
    base, strategies = OTHERS[command]

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(strategies[option])
    def check(value):
        _one_line_or_result(with_option(base, option, value), json_out=command != "tree-worst-case")

    check()


SPECS = st.one_of(OPTIONS["--graph"], VALUES,
                  st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(["kary", "star", "path", "random-tree"]),
                            st.sampled_from(["50,50", "1000,1000", "1,100000000000000000000", "0", "1", "2,0",
                                             "100000000000000000000", "3,-1", "2,2,2"])))
POSITIONAL = {"tree-msd": ["tree", "msd", None, "--json"], "graph-info": ["graph", "info", None, "--json"],
              "graph-colour": ["graph", "colour", None, "--json"], "graph-export": ["graph", "export", None]}


@pytest.mark.parametrize("command", sorted(POSITIONAL))
def test_spec_argument_fuzz(command):
    # The commands that take the spec as their argument (tree msd found kary:50,50: an OverflowError).
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(SPECS)
    def check(spec):
        argv = [spec if a is None else a for a in POSITIONAL[command]]
        _one_line_or_result(argv, json_out=command != "graph-export")

    check()


@pytest.mark.parametrize("argv", [OFFLINE + ["--slack", str(10**20)], COMPARE + ["--offline", str(10**20)]],
                         ids=["offline-slack", "compare-offline"])
def test_a_huge_slack_is_met_at_once(argv, capsys):
    assert main(argv) == 0


# ---------------------------------------------------------------------- invalid means exit 2
# The tests above accept a result or one error line. These generate values that are invalid by
# construction and require exit 2 (one line): no bad value may be read as a good one (point:10@ was
# node 0, torus:٤x٤ a 4x4 torus, threshold=99999999999999999999 a numba error, "no" a true boolean).
BAD_INTS = st.sampled_from(["99999999999999999999", "9223372036854775808", "-1", "1_0", "\u0664", "\uff11", "0x10",
                            "1e3", "nan", "inf", "", "x", "2.5", "+-1"])
BAD_INIT = st.one_of(
    st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(["point", "uniform", "constant"]), BAD_INTS),
    st.builds(lambda a, b: f"random:{a}..{b}", BAD_INTS, st.sampled_from(["5", "9"])),
    st.builds(lambda a, b: f"ramp:{a}..{b}", st.sampled_from(["0", "1"]), BAD_INTS),
    st.builds(lambda v: f"point:10@{v}", st.one_of(BAD_INTS, st.sampled_from(["16", "100"]))),
    st.sampled_from(["ramp:0..9223372036854775807", "constant:4611686018427387904", "random:9..2"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(BAD_INIT)
def test_invalid_init_specs_exit_2(init):
    code, err = _code(["run", "--graph", "torus:4x4", "--algo", "multi-port", "--init", init, "--max-steps", "2"])
    assert code == 2 and err.count("\n") == 1, (init, code, err)


INT_PARAMS = [(a, p.name) for a in ALGOS for p in PROTOCOLS.get(a).params if p.type is int]
FLOAT_PARAMS = [(a, p.name) for a in ALGOS for p in PROTOCOLS.get(a).params if p.type is float]


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.sampled_from(INT_PARAMS), st.sampled_from(["99999999999999999999", "-99999999999999999999", "1_0",
                                                      "\u0664", "1.5", "nan", "x", "", "1e3"]))
def test_invalid_int_params_exit_2(algo_param, value):
    algo, name = algo_param
    graph = "kary:2,3" if "tree" in PROTOCOLS.get(algo).requires else "torus:4x4"
    code, err = _code(["run", "--graph", graph, "--algo", algo, "--init", "point:10", "--max-steps", "2",
                       "--param", f"{name}={value}"])
    assert code == 2 and err.count("\n") == 1, (algo, name, value, err)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.sampled_from(FLOAT_PARAMS), st.sampled_from(["nan", "inf", "-inf", "x", "", "1e999"]))
def test_invalid_float_params_exit_2(algo_param, value):
    algo, name = algo_param
    code, err = _code(["run", "--graph", "torus:4x4", "--algo", algo, "--init", "point:10", "--max-steps", "2",
                       "--param", f"{name}={value}"])
    assert code == 2 and err.count("\n") == 1, (algo, name, value, err)


def _code(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


# Scenario TOML: every key with values of every TOML type; the valid ones must run, the others exit 2.
TOML_VALUES = st.sampled_from(['true', 'false', '"no"', '"abc"', '0', '1', '-3', '1.5', 'nan', 'inf', '2.0', '[1, 2]',
                               '["a"]', '[]', '{}', '"uniform:1..2"', '"uniform:0..1"', '"file:/dev/zero"', '0.25',
                               '99999999999999999999'])
SCENARIO_KEYS = ["seed", "max_steps", "levels", "algos", "speeds", "edge_failure", "allow_infeasible",
                 "record_every", "offline_slack", "description", "name"]


def _scenario_valid(key, value) -> bool:
    v = tomllib.loads(f"v = {value}")["v"]
    is_int = isinstance(v, int) and not isinstance(v, bool)
    is_num = (is_int or isinstance(v, float)) and math.isfinite(v)
    return {"seed": is_int and v >= 0, "max_steps": is_int and v >= 0, "record_every": is_int and v >= 1,
            "offline_slack": is_int and v >= 0, "allow_infeasible": isinstance(v, bool),
            "edge_failure": is_num and 0 <= v <= 1, "speeds": v == "uniform:1..2",
            "levels": isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                  for x in v),
            "algos": v == [], "description": isinstance(v, str), "name": isinstance(v, str) and bool(v.strip()),
            }[key] and not (key == "seed" and v > 2**63)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.sampled_from(SCENARIO_KEYS), TOML_VALUES)
def test_scenario_toml_fuzz(tmp_path_factory, key, value):
    p = tmp_path_factory.mktemp("sc") / "s.toml"
    base = {"name": '"s"', "graph": '"ring:6"', "init": '"random:0..9"', "max_steps": "5", "algos": '["fos"]',
            key: value}
    if key == "algos" and value == "[]":
        base["algos"] = '["fos"]'
    p.write_text("[scenario]\n" + "".join(f"{k} = {v}\n" for k, v in base.items()))
    code, err = _code(["compare", "--scenario", str(p), "--no-files", "--json"])
    if _scenario_valid(key, value) or (key == "algos" and value == "[]"):
        assert code in (0, 2) and (code == 0 or err.count("\n") == 1), (key, value, err)
    else:
        assert code == 2 and err.count("\n") == 1, (key, value, code, err)


# Loads and speeds files: arbitrary lines; a file is valid only if every line is an ASCII integer
# (a float for speeds) in range, one per node.
LINES = st.lists(st.sampled_from(["1", "0", "5", "-1", "x", "1.5", "\u0664", "99999999999999999999", "# c", "",
                                  "9223372036854775807", "nan", "inf", "1e3", "2 3"]), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(LINES)
def test_loads_file_fuzz(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp("ld") / "l.txt"
    p.write_text("\n".join(lines) + "\n")
    values = [x for x in (line.split("#")[0].strip() for line in lines) if x]
    ok_lines = all(x.isascii() and x.isdigit() and int(x) < 2**63 for x in values)
    valid = ok_lines and len(values) == 3 and sum(int(x) for x in values) < 2**63
    code, err = _code(["run", "--graph", "path:3", "--algo", "multi-port", "--init", f"file:{p}", "--max-steps", "1",
                       "--json"])
    assert code == (0 if valid else 2), (lines, code, err)
    if code == 2:
        assert err.count("\n") == 1


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(LINES)
def test_speeds_file_fuzz(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp("sp") / "s.txt"
    p.write_text("\n".join(lines) + "\n")
    values = [x for x in (line.split("#")[0].strip() for line in lines) if x]

    def positive(x):
        if not x.isascii():
            return False
        try:
            v = float(x)
        except ValueError:
            return False
        return math.isfinite(v) and v > 0

    valid = len(values) == 3 and all(positive(x) for x in values)
    code, err = _code(["run", "--graph", "path:3", "--algo", "fos", "--init", "point:9", "--max-steps", "1",
                       "--speeds", f"file:{p}", "--json"])
    assert code == (0 if valid else 2), (lines, code, err)


BAD_MOBILITY = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["radius", "speed", "pause"]),
              st.sampled_from(["nan", "inf", "-1", "x", "", "\u0664", "1..nan", "2..1", "-inf..1"])),
    st.sampled_from(["pause=99999999999999999999", "radius=99999999999999999999", "pause=1.5", "wrap=maybe"]))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(BAD_MOBILITY)
def test_invalid_mobility_exit_2(mobility):
    code, err = _code(["run", "--graph", "torus:4x4", "--algo", "fos", "--init", "point:10", "--max-steps", "2",
                       "--mobility", mobility])
    assert code == 2 and err.count("\n") == 1, (mobility, code, err)


BAD_GRAPHS = st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(["ring", "torus", "path", "hypercube", "kary", "star"]),
                       st.sampled_from(["\u0664", "\u0664x\u0664", "99999999999999999999", "-3", "1_0", "x", "4x",
                                        "2,", "1e3", "nan"]))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(BAD_GRAPHS)
def test_invalid_graph_specs_exit_2(graph):
    code, err = _code(["run", "--graph", graph, "--algo", "multi-port", "--init", "point:10", "--max-steps", "2"])
    assert code == 2 and err.count("\n") == 1, (graph, code, err)
