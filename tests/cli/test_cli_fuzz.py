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
"""

import contextlib
import io
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tokendist.cli import main
from tokendist.engine import PROTOCOLS

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


def _with(base, option, value):
    argv = list(base)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return argv


@pytest.mark.parametrize("command, option", [(c, o) for c, (_, opts) in OTHERS.items() for o in sorted(opts)])
def test_other_commands_option_fuzz(command, option):
    base, strategies = OTHERS[command]

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(strategies[option])
    def check(value):
        _one_line_or_result(_with(base, option, value), json_out=command != "tree-worst-case")

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
