"""The measurement scripts in benchmarks/ run (on small graphs) and print what their docstrings say."""

import importlib.util
import pathlib
import re

import numba
import pytest

BENCHMARKS = pathlib.Path(__file__).parent.parent / "benchmarks" / "probes"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sos_iou_cost_split(capsys):
    _load("sos_iou_cost_split").main(["--graph", "torus:12x12", "--steps", "3", "--reps", "2"])
    out = capsys.readouterr().out
    assert "kernel sos_iou_stencil at step 3" in out
    for variant in ("as captured", "no short node", "no pay", "no short, no exception"):
        assert variant in out


@pytest.mark.parametrize("algo, kernel", [("random-walk", "fos_pair_cube"),
                                         ("multi-port", "multi_port_step_regular")])
def test_kernel_share(capsys, algo, kernel):
    _load("kernel_share").main(["--graph", "hypercube:4", "--algo", algo, "--steps", "2"])
    out = capsys.readouterr().out
    assert out.splitlines()[1].lstrip().startswith("whole step") and kernel in out


def test_hypercube_gather(capsys):
    _load("hypercube_gather").main(["--dim", "5", "--rounds", "1"])
    assert "CSR / xor" in capsys.readouterr().out


def test_diffusion_random_parts(capsys):
    _load("diffusion_random_parts").main(["--graph", "torus:8x8", "--rounds", "1"])
    assert "HEAD pass / random step / floor step" in capsys.readouterr().out


def test_conversion_count(capsys):
    # The counts of the four conversions in the compiled stencil kernel; the kernel compiles to
    # packed float -> int32 conversions where the CPU has them (AVX2 or newer).
    _load("conversion_count").main(["--graph", "torus:8x8"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["vcvttsd2si", "vcvtsi2sd", "vcvttpd2dq", "vcvtdq2pd"]
    counts = [[int(v) for v in line.split()] for line in out[2:]]
    assert counts and all(len(c) == 4 for c in counts)
    if _cpu_has("avx2"):  # numba compiles for the host; VEX forms only there
        assert max(c[2] for c in counts) > 0


def _cpu_has(flag):
    try:
        return flag in pathlib.Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


def test_conversion_count_refuses_a_graph_without_a_stencil():
    with pytest.raises(SystemExit, match="has no offset stencil"):
        _load("conversion_count").main(["--graph", "hypercube:4"])


def test_hypercube_scaling(capsys):
    # Each call covers about 2^20 nodes (a tiny cube repeats its kernels 2^20 / n times): 8 and 10
    # keep the repeats few.
    _load("hypercube_scaling").main(["--dims", "8,10", "--rounds", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["graph", "row", "cube", "floor"]
    assert [line.split()[0] for line in out[2:]] == ["hypercube:8", "hypercube:10"]


def test_sos_hypercube(capsys):
    # 13 dimensions: blocks of 2^12 nodes and one dimension across them; the script itself checks
    # that both chains' loads stay equal after every step.
    _load("sos_hypercube").main(["--dim", "13", "--steps", "2", "--warm", "2"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["case", "row", "cube", "row", "/", "cube"]
    assert [line.split(",")[0].split()[0] for line in out[2:]] == ["sos", "sos-iou", "sos-iou"]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="the threaded chain needs two numba threads")
def test_sos_hypercube_threaded_chain(capsys):
    # The threaded cube kernel as a third chain of the sos-iou cases (its loads checked against
    # the others' by the script after every step); sos has none.
    _load("sos_hypercube").main(["--dim", "13", "--steps", "2", "--warm", "2", "--threads", "2"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[-6:] == ["cube,", "2", "threads", "cube", "/", "threaded"]
    rows = [line.split() for line in out[2:]]
    assert rows[0][-2:] == ["-", "-"]
    assert all(float(r[-1]) > 0 for r in rows[1:])


def test_sos_iou_torus(capsys):
    # 40 x 40 has an offset stencil; beta 1.9 and the bench's loads leave nodes short within a few
    # steps. The script itself checks that both chains agree after every step.
    _load("sos_iou_torus").main(["--side", "40", "--steps", "6", "--warm", "1", "--beta", "1.9"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("torus:40x40, beta 1.900000")
    shorts = [int(v) for v in out[1].split(":")[1].split(",")]
    assert len(shorts) == 6 and max(shorts) > 0  # payments ran on the stencil's rows
    assert out[2].split() == ["csr", "rows", "stencil", "csr", "/", "stencil"]


def test_sos_iou_torus_threads(capsys):
    # The third chain: the threaded stencil kernel, checked against the other two after every step.
    _load("sos_iou_torus").main(["--side", "40", "--steps", "3", "--warm", "1", "--beta", "1.9", "--threads", "2"])
    out = capsys.readouterr().out.splitlines()
    assert out[2].split() == ["csr", "rows", "stencil", "csr", "/", "stencil", "stencil", "x2", "stencil", "/", "x2"]
    assert len(re.findall(r"\d+\.\d+", out[3])) == 8  # three medians, three minima, two ratios


def test_single_port_torus(capsys):
    # The script itself checks that both kernels agree after every step.
    _load("single_port_torus").main(["--side", "30", "--steps", "3", "--warm", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("torus:30x30, p = 1/16")
    assert out[1].split() == ["counter", "stencil", "counter", "/", "stencil"]
    assert len(re.findall(r"\d+\.\d+", out[2])) == 5  # two medians, two minima, the ratio


def test_sos_iou_long_run(capsys):
    _load("sos_iou_long_run").main(["--side", "40", "--steps", "7", "--every", "3"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sos-iou on torus:40x40, threads=1, 7 steps")
    # windows 2-3, 4-6 and 7-7 (the first step compiles and is not timed)
    assert [line.split()[0] for line in out[1:]] == ["2-3", "4-6", "7-7"]
    assert all(float(line.split()[-1]) > 0 for line in out[1:])


def test_message_executor(capsys):
    _load("message_executor").main(["--graph", "random-tree:40", "--reps", "1", "--sync-loop"])
    out = capsys.readouterr().out
    for variant in ("whole run (compiled)", "compiled program", "whole run (handlers)", "whole run (sync loop)",
                    "executor + handlers", "plain heapq baseline"):
        assert variant in out
    assert "messages, last delivery at time" in out


def test_kernel_crossover(capsys):
    _load("kernel_crossover").main(["--sides", "4", "--algos", "multi-port,fos", "--steps", "2", "--reps", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["protocol", "n"] and len(lines) == 3


def test_program_exit(capsys):
    _load("program_exit").main(["--runs", "1", "--", "algos", "multi-port", "--json"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "tokendist algos multi-port --json"
    assert [line.split()[0] for line in lines[1:]] == ["console", "main", "console"]
    assert float(lines[-1].split()[-1]) > 0


def test_pass_cost(capsys):
    _load("pass_cost").main(["--graph", "ring:8", "--steps", "20", "--reps", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("pass on ring:8: compiling (int64 loads)")
    assert "compiled" in lines[1] and "numpy form" in lines[1] and float(lines[1].split()[-1]) > 0


def test_engine_step(capsys):
    _load("engine_step").main(["--graph", "ring:8", "--steps", "20", "--reps", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["int64", "float64"]
    for line in lines:
        figures = [float(part.split()[-1]) for part in line.split(": ", 2)[-1].split(", ")]
        assert len(figures) == 3 and all(f > 0 for f in figures)


def test_block_steps(capsys):
    _load("block_steps").main(["--graph", "ring:8", "--steps", "50", "--reps", "1",
                               "--algos", "random-matching,pairwise-averaging,rotor-router,threshold1"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["random-matching", "pairwise-averaging", "rotor-router",
                                                      "threshold1"]
    assert all(line.endswith("same run True") for line in lines)


def test_csr_build(capsys):
    _load("csr_build").main(["--nodes", "64,512", "--reps", "1"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert len(rows) == 2 and all(row.split()[-1] == "True" for row in rows)
