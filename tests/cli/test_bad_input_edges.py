"""Bad inputs an option-by-option sweep of every command still let through: each one line, exit 2.

Every option of every command (``build_parser()``) was fed empty and blank text, negative and huge
integers (2**63, 10**30), non-ASCII digits, ``1_0``, ``nan`` and ``inf``, specs with a missing or
extra part, empty, binary and wrong-length files and paths that name no file. What was accepted as
something else (``--seed 1_0`` as 10, ``--max-steps 10**30``, ``--until-discrepancy inf``,
``--out ''`` as the current folder, ``--algos ''`` as every algorithm, a ``--param`` given twice,
last one winning, ``compare --out X --no-files``) or failed with a traceback (``--inject
rate=1e20``, ``sweep /dev/zero``) or ran for ever (``tree conjecture --h-max 1000000``, ``sweep`` on
a named pipe) is refused here, and an output path naming a device or pipe is refused instead of
being replaced by a regular file.
"""

from __future__ import annotations

import os
import stat

import pytest

from tokendist import simulate
from tokendist.cli import main
from tokendist.engine._injection import MAX_TOKENS_PER_STEP, Injection, InjectionSchedule
from tokendist.errors import TokendistError
from tokendist.experiments import load_scenario

from ._argv import refused, with_option

RUN = ["run", "--graph", "torus:4x4", "--algo", "multi-port", "--init", "point:100", "--max-steps", "3", "--json"]
COMPARE = ["compare", "--graph", "ring:6", "--init", "random:0..9", "--algos", "multi-port,fos", "--max-steps", "10",
           "--no-files", "--json"]
BENCH = ["bench", "--graphs", "ring:8", "--algos", "multi-port", "--steps", "2", "--naive-graph", "ring:8", "--json"]


# ---------------------------------------------------------------------- integer options
INT_OPTIONS = [
    (RUN, "--seed"), (RUN, "--max-steps"), (RUN, "--record-every"),
    (COMPARE, "--workers"),
    (["graph", "info", "ring:6", "--json"], "--exact-limit"),
    (["tree", "worst-case", "kary:2,3", "--json", "--save-loads", os.devnull], "--base"),
    (["tree", "conjecture", "--k-max", "3", "--h-max", "3", "--json"], "--k-max"),
]


@pytest.mark.parametrize("base, option", INT_OPTIONS, ids=[f"{b[0]}{o}" for b, o in INT_OPTIONS])
@pytest.mark.parametrize("value, words", [
    ("9223372036854775808", "at most 2**63 - 1"),
    (str(10**30), "at most 2**63 - 1"),
    ("\u0664", "digits 0-9"),        # Arabic-Indic four: int() reads it as 4
    ("\uff11", "digits 0-9"),        # full-width one
    ("1_0", "digits 0-9"),           # int() reads it as 10
])
def test_integer_options_are_ascii_and_int64(base, option, value, words, capsys):
    refused(with_option(base, option, value), capsys, words)


@pytest.mark.parametrize("argv", [COMPARE + ["--offline", "{}"],
                                  ["offline", "--graph", "ring:6", "--init", "point:12", "--json", "--slack", "{}"]],
                         ids=["compare-offline", "offline-slack"])
@pytest.mark.parametrize("value", ["\u0664", "\uff11", "1_0", "1e3", "-1", ""])
def test_slack_options_are_ascii(argv, value, capsys):
    # A slack may be any size (10**20 is met at once) but is written in ASCII digits.
    refused([value if a == "{}" else a for a in argv], capsys, "digits 0-9")


def test_integer_option_at_int64_max_is_taken(capsys):
    # The limit is the largest int64, not below it: the seed 2**63 - 1 runs.
    assert main(with_option(RUN, "--seed", str(2**63 - 1))) == 0
    assert '"seed": 9223372036854775807' in capsys.readouterr().out


# ---------------------------------------------------------------------- number options
@pytest.mark.parametrize("option", ["--until-discrepancy", "--until-local-discrepancy"])
@pytest.mark.parametrize("value", ["inf", "1e999", "nan", "\u0664", "1_0", "0x10"])
def test_number_options_are_finite_ascii(option, value, capsys):
    refused(with_option(RUN, option, value), capsys, "finite number")


@pytest.mark.parametrize("value", ["\u0664", "0.2_5", "0x0"])
def test_probability_is_ascii(value, capsys):
    refused(with_option(RUN, "--edge-failure", value), capsys, "probability")


# ---------------------------------------------------------------------- paths
@pytest.mark.parametrize("argv", [
    RUN + ["--out", ""], RUN + ["--out", " "], RUN + ["--save-loads", ""],
    [a for a in COMPARE if a != "--no-files"] + ["--out", ""], ["compare", "--scenario", "", "--no-files"],
    ["graph", "export", "ring:6", "-o", ""], ["graph", "colour", "ring:6", "--output", " "],
    ["tree", "worst-case", "kary:2,3", "--save-loads", ""], ["sweep", "x.toml", "--out", ""],
    ["reproduce", "list", "--out", ""],
], ids=lambda a: " ".join(a[:2]) + " " + a[-2])
def test_empty_paths_are_refused(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # '' was Path('.'): the outputs went into the current folder
    refused(argv, capsys, "expected a path")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    RUN + ["--save-loads", "{}"], ["graph", "export", "ring:6", "-o", "{}"],
    ["graph", "colour", "ring:6", "--output", "{}"], ["tree", "worst-case", "kary:2,3", "--save-loads", "{}"],
], ids=lambda a: " ".join(a[:2]))
def test_output_to_a_pipe_is_refused_and_the_pipe_kept(argv, tmp_path, capsys):
    # The atomic write renames over its target: as root, --save-loads /dev/null replaced the device
    # with a regular file. A named pipe stands for any non-file here (making a device needs root).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused([str(fifo) if a == "{}" else a for a in argv], capsys, "not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left either


def test_output_through_a_symlink_writes_the_file_it_names(tmp_path, capsys):
    # As a shell's '>': the link stays and its file gets the graph (the rename replaced the link).
    target = tmp_path / "kept.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert main(["graph", "export", "ring:6", "-o", str(link)]) == 0
    assert link.is_symlink() and "0 1" in target.read_text()


def test_output_through_a_symlink_to_a_pipe_is_refused(tmp_path, capsys):
    # /dev/stdout is such a link (to a terminal or a pipe): it was replaced by a regular file.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    refused(["graph", "export", "ring:6", "-o", str(link)], capsys, "not a regular file")
    assert link.is_symlink() and stat.S_ISFIFO(os.stat(link).st_mode)


# ---------------------------------------------------------------------- lists and key=value options
@pytest.mark.parametrize("argv, words", [
    (RUN + ["--param", "threshold=1", "--param", "threshold=2"], "threshold given twice"),
    (["run", "--graph", "torus:4x4", "--algo", "fos", "--init", "point:100", "--max-steps", "2",
      "--mobility", "radius=0.1,radius=0.2"], "radius given twice"),
    (COMPARE + ["--param", "fos.c=2", "--param", "fos.c=3"], "fos.c given twice"),
    (BENCH + ["--param", "threads=1", "--param", "threads=2"], "threads given twice"),
])
def test_a_key_given_twice_is_refused(argv, words, capsys):
    refused(argv, capsys, words)


@pytest.mark.parametrize("value, words", [
    ("", "an empty name"), (" ", "an empty name"), (",", "an empty name"), ("fos,,", "an empty name"),
    (",fos", "an empty name"), ("fos,,sos", "an empty name"), ("fos,fos", "given twice"), ("fos,FOS", "given twice"),
])
def test_compare_algos(value, words, capsys):
    refused(with_option(COMPARE, "--algos", value), capsys, words)


@pytest.mark.parametrize("value, words", [
    ("", "--levels expects"), (",", "--levels expects"), ("1,", "--levels expects"), ("1,,2", "--levels expects"),
    ("1_0", "--levels expects"), ("\u0664", "--levels expects"), ("nan", "--levels expects"),
    ("2,1,2", "twice"), ("2,2.0", "twice"),
])
def test_compare_levels(value, words, capsys):
    refused(with_option(COMPARE, "--levels", value), capsys, words)


@pytest.mark.parametrize("option, value, words", [
    ("--graphs", ";ring:8", "an empty name"), ("--graphs", ";", "an empty name"), ("--graphs", "", "names no graph"),
    ("--graphs", "ring:8;;ring:9", "an empty name"), ("--graphs", "ring:8;ring:8", "given twice"),
    ("--algos", "", "an empty name"), ("--algos", "multi-port,,", "an empty name"),
    ("--algos", "multi-port,multi-port", "given twice"),
])
def test_bench_lists(option, value, words, capsys):
    refused(with_option(BENCH, option, value), capsys, words)


def test_bounds_empty_speeds(capsys):
    # '' was read as "no speeds" by bounds (run and compare refused it).
    refused(["bounds", "--graph", "ring:6", "--init", "point:12", "--algo", "sos", "--no-run", "--speeds", ""],
             capsys)


SCENARIO = 'name = "s"\ngraph = "ring:6"\ninit = "random:0..9"\nmax_steps = 10\n'


@pytest.mark.parametrize("lines, words", [
    ('algos = ["fos", "fos"]', "algos lists 'fos' twice"),
    ('algos = ["fos", "FOS"]', "algos lists 'fos' twice"),
    ('levels = [2, 1, 2]', "levels lists 2 twice"),
    ('seed = 9223372036854775808', "at most 2**63 - 1"),
    ('record_every = 99999999999999999999', "at most 2**63 - 1"),
])
def test_scenario_lists_and_huge_integers(lines, words, tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text("[scenario]\n" + SCENARIO + lines + "\n")
    with pytest.raises(TokendistError, match=words.replace("*", r"\*")):
        load_scenario(p)
    refused(["compare", "--scenario", str(p), "--no-files", "--json"], capsys, words)


# ---------------------------------------------------------------------- injection
@pytest.mark.parametrize("spec, words", [
    ("rate=99999999999999999999", "one by one"),              # a traceback inside numpy
    (f"rate={MAX_TOKENS_PER_STEP + 1}", "one by one"),
    ("consume=1e12", "one by one"),
    ("burst=99999999999999999999@1", "one by one"),           # a traceback inside numpy
    ("burst=5@99999999999999999999", "beyond the last step"),
    ("rate=1,start=99999999999999999999", "beyond the last step"),
    ("rate=\u0664", "must be a number"),                      # float() reads it as 4.0
    ("rate=1_0", "must be a number"),
    ("start=\u0664,rate=1", "must be a step"),
    ("burst=\u0664@1", "COUNT@STEP"),
    ("nodes=\u0664,rate=1", "integers separated by ';'"),
    ("nodes=1;;2,rate=1", "integers separated by ';'"),       # the empty item was skipped
    ("nodes=1;,rate=1", "integers separated by ';'"),
])
def test_inject_specs(spec, words, capsys):
    refused(with_option(RUN, "--inject", spec), capsys, words)


@pytest.mark.parametrize("text, words", [
    ("", "schedules nothing"),                      # was a schedule of nothing, with numpy's warning on stderr
    ("# only a comment\n\n", "schedules nothing"),
    ("0 0 99999999999999999999\n", "beyond int64"),
    ("0 0 1.5\n", "3 integers"),
    ("0 0\n", "3 integers"),
    ("0 0 1 2\n", "3 integers"),
    ("0 0 1_0\n", "3 integers"),
    ("0 0 \u0664\n", "3 integers"),
    ("-1 0 5\n", "steps must be >= 0"),
    ("0 99 5\n", "nodes must be in"),
])
def test_inject_files(text, words, tmp_path, capsys):
    p = tmp_path / "inj.txt"
    p.write_text(text)
    refused(with_option(RUN, "--inject", f"file:{p}"), capsys, words)


def test_inject_file_errors_name_the_line(tmp_path):
    p = tmp_path / "inj.txt"
    p.write_text("# step node tokens\n0 0 5\n3 1 x\n")
    with pytest.raises(TokendistError, match=r"inj.txt:3: expected 'step node tokens'"):
        InjectionSchedule(p)


def test_inject_file_must_be_a_regular_file(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # np.loadtxt would have blocked on it until a writer came
    refused(with_option(RUN, "--inject", f"file:{fifo}"), capsys, "not a regular file")


@pytest.mark.parametrize("kwargs", [{"rate": 1e20}, {"consume": float("nan")}, {"rate": "x"},
                                    {"bursts": [(3, MAX_TOKENS_PER_STEP), (3, 1)]}])
def test_injection_api_values(kwargs):
    with pytest.raises(TokendistError, match="injection"):
        Injection(**kwargs)


def test_inject_file_with_negative_tokens_still_consumes(tmp_path, capsys):
    # Negative token counts are the schedule's documented way to take tokens out: still accepted.
    p = tmp_path / "inj.txt"
    p.write_text("0 0 -5\n")
    assert main(with_option(RUN, "--inject", f"file:{p}")) == 0
    assert '"tokens": 95' in capsys.readouterr().out


# ---------------------------------------------------------------------- files named by the user
@pytest.mark.parametrize("option", ["--init", "--speeds", "--graph"])
def test_file_spec_without_a_path(option, capsys):
    # Was "error: : no such file".
    argv = ["run", "--graph", "ring:6", "--algo", "fos", "--init", "point:5", "--max-steps", "2"]
    err = refused(with_option(argv, option, "file:"), capsys)
    assert "file:" in err and ": :" not in err


@pytest.mark.parametrize("option", ["--out", "--save-loads"])
def test_output_under_a_file(option, tmp_path, capsys):
    # --out a-file/sub was "cannot write (File exists)".
    (tmp_path / "f.txt").write_text("x\n")
    refused(RUN + [option, str(tmp_path / "f.txt" / "sub")], capsys, "f.txt")


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "", "dir"])
def test_sweep_file_must_be_a_regular_file(target, tmp_path, capsys):
    # /dev/zero was read until memory ran out (a MemoryError traceback), a pipe blocked for ever.
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    elif target == "dir":
        target = str(tmp_path)
    err = refused(["sweep", target, "--out", str(tmp_path / "out")], capsys)
    assert "regular file" in err or "empty path" in err or "directory" in err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- the Python API
@pytest.mark.parametrize("kwargs, words", [
    ({"max_steps": 2**63}, "max_steps must be at most 2\\*\\*63 - 1"),
    ({"record_every": 2**70}, "record_every must be at most"),
    ({"until_discrepancy": float("inf")}, "finite number"),
    ({"until_local_discrepancy": float("inf")}, "finite number"),
    ({"allow_infeasible": "no"}, "allow_infeasible must be True or False"),   # "no" was true
    ({"check": 1}, "check must be True or False"),
])
def test_simulate_arguments(kwargs, words):
    kwargs.setdefault("max_steps", 3)
    with pytest.raises(TokendistError, match=words):
        simulate("torus:4x4", "multi-port", "point:100", **kwargs)


@pytest.mark.parametrize("argv", [["--k-max", "3", "--h-max", "1000000"], ["--k-max", str(10**18), "--h-max", "1"],
                                  ["--k-max", "1", "--h-max", "100000000"]])
def test_tree_conjecture_too_large_is_refused_at_once(argv, capsys):
    # Each ran for ever: every k**h built exactly, every k iterated, or 10**8 paths tabulated.
    refused(["tree", "conjecture", *argv, "--json"], capsys, "tree too large")


@pytest.mark.parametrize("command", [["tree", "orderings", "kary:2,3"],
                                     ["tree", "worst-case", "kary:2,3", "--save-loads", os.devnull]])
@pytest.mark.parametrize("value", ["", " "])
def test_tree_empty_colouring(command, value, capsys):
    # '' was read as auto.
    refused([*command, "--colouring", value, "--json"], capsys, "--colouring expects")


@pytest.mark.parametrize("argv, words", [([], "tokendist: expected a command"),
                                         (["graph"], "tokendist graph: expected a subcommand"),
                                         (["tree"], "tokendist tree: expected a subcommand")])
def test_a_missing_command_is_one_error_line_after_the_help(argv, words, capsys):
    # The help was printed (stdout) with exit code 2 but no error line.
    err = refused(argv, capsys, words)
    assert err.count("\n") == 1


@pytest.mark.parametrize("extra", [["--out", "x"], ["--workers", "2"], ["--scheduler", "tcp://127.0.0.1:1"],
                                   ["--quick"]])
def test_reproduce_list_refuses_options_it_ignores(extra, capsys):
    refused(["reproduce", "list", *extra], capsys, "applies to running entries")


def test_reproduce_out_checked_before_the_runs(tmp_path, capsys):
    (tmp_path / "f.txt").write_text("x\n")
    refused(["reproduce", "houle-kary-msd", "--quick", "--out", str(tmp_path / "f.txt")], capsys, "not a folder")


def test_out_and_save_loads_on_one_path(tmp_path, capsys):
    # The loads were written to the path, then the folder failed: half the outputs, after the run.
    target = tmp_path / "o"
    refused(RUN + ["--out", str(target), "--save-loads", str(target)], capsys, "both as the output folder")
    assert not target.exists()


@pytest.mark.parametrize("init, words", [
    ("msd-stable:c=1,c=2", "c given twice"),                 # the last one won
    ("msd-stable:c=1_0", "non-negative integers"),           # int() read 10
    ("msd-stable:base=\u0664", "'\u0664' is not a non-negative integer"),   # int() read 4
    ("distance:\u0664", "'\u0664' is not a non-negative integer"),          # str.isdigit() and int() read 4
])
def test_worst_case_init_specs(init, words, capsys):
    refused(["run", "--graph", "kary:2,3", "--algo", "threshold1", "--init", init, "--max-steps", "2"], capsys,
             words)


def test_compare_out_and_no_files_contradict(tmp_path, capsys):
    refused(COMPARE + ["--out", str(tmp_path / "o")], capsys, "choose --out or --no-files")


SWEEP = '[sweep]\nname = "s"\ngraphs = ["ring:6"]\ninits = ["point:10"]\nalgos = ["sos"]\n'


@pytest.mark.parametrize("lines, words", [
    ("seeds = 1000000000000\n", "at most 1,000,000 seeds"),           # list(range(10**12)): a MemoryError
    ("seeds = [9223372036854775808]\n", "at most 2**63 - 1"),
    ("max_steps = 9223372036854775808\n", "at most 2**63 - 1"),
    ("seeds = 1000\n[params.sos]\nbeta = [" + ", ".join(str(i / 10) for i in range(1001)) + "]\n",
     "expands to 1,001,000 tasks"),
    ("[params.sos]\n" + "".join(f"{k} = [{', '.join(map(str, range(1, 102)))}]\n" for k in ("beta", "c", "threads")),
     "combinations"),                                                 # 101**3 combinations built before a check
])
def test_sweep_sizes(lines, words, tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text(SWEEP + lines)
    refused(["sweep", str(p), "--out", str(tmp_path / "out")], capsys, words)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("algo, param", [("fos", "c=1_0"), ("fos", "c=\u0664"), ("sos", "beta=\uff11"),
                                         ("diffusion", "min_diag=0_5"), ("diffusion-floor", "threads=1_0"),
                                         ("diffusion-floor", "threads=\u0664")])
def test_numeric_params_are_ascii(algo, param, capsys):
    # float() read c=1_0 as 10.0 and c=\u0664 as 4.0; int() read threads=1_0 as 10.
    refused(["run", "--graph", "ring:6", "--algo", algo, "--init", "point:5", "--max-steps", "1",
              "--param", param], capsys, f"parameter {param.split('=')[0]} expects")


@pytest.mark.parametrize("speeds, words", [("uniform:1_0..2_0", "expected uniform:A..B"),
                                           ("uniform:1..2_0", "expected uniform:A..B"),
                                           ("file:{}", "s.txt:1: '1_0' is not a number")])
def test_speeds_without_underscores(speeds, words, tmp_path, capsys):
    # float() read '1_0' as 10: a speed of 10 from a typo.
    p = tmp_path / "s.txt"
    p.write_text("1_0\n" + "1\n" * 5)
    refused(["run", "--graph", "ring:6", "--algo", "fos", "--init", "point:5", "--max-steps", "1",
              "--speeds", speeds.format(p)], capsys, words)


@pytest.mark.parametrize("argv", [
    ["graph", "info", "geometric:10,0_3", "--json"],          # radius 3: the complete graph K_10
    ["graph", "info", "gnp:10,0_0_1", "--json"],              # P = 1.0
    ["graph", "info", "ring:1_0", "--json"],
    ["run", "--graph", "ring:6", "--algo", "fos", "--init", "point:5", "--max-steps", "1",
     "--mobility", "radius=0_1,wrap=false"],                  # radius 1
])
def test_no_underscores_in_spec_numbers(argv, capsys):
    refused(argv, capsys, "_")


@pytest.mark.parametrize("text, words", [
    ('{"n": 3, "edges": [[0, 1], [1, 2]], "speed": [1, 2, 3]}', "unknown key 'speed'"),   # was silently ignored
    ("0 1\n1 \u0664\n", "is not a node id"),                                              # \d took it for 4
])
def test_graph_files(text, words, tmp_path, capsys):
    p = tmp_path / ("g.json" if text.startswith("{") else "g.txt")
    p.write_text(text)
    refused(["graph", "info", f"file:{p}", "--json"], capsys, words)


@pytest.mark.parametrize("spec", ["kary:\u0664,2", "kary:\u00b2,2", "star:\u00b2", "path:\u0664", "kary:1_0,2"])
def test_tree_msd_closed_form_specs_are_ascii(spec, capsys):
    # The closed forms tested str.isdigit(): kary:\u0664,2 ran as kary:4,2, and '\u00b2' (superscript
    # two, a digit to isdigit()) reached int(): a ValueError traceback.
    refused(["tree", "msd", spec, "--json"], capsys, "ASCII")


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_colouring_is_refused_not_read_as_auto(value, capsys):
    refused(["run", "--graph", "torus:4x4", "--algo", "threshold2", "--init", "random:0..9", "--max-steps", "3",
              "--param", f"colouring={value}", "--json"], capsys, "colouring: empty")
