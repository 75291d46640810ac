"""Outputs written atomically, inputs read bounded.

An interrupted ``graph export`` must leave the target absent or complete (it left 161,401 of 18M
edge lines, which read back as a valid graph); a graph file carries its edge count (``m M``) and a
truncated one is refused; ``run --out`` and ``compare --out`` write their set of files or none.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tokendist._files import atomic_dir, atomic_path, read_bytes
from tokendist.cli import main
from tokendist.errors import GraphFileError, TokendistError
from tokendist.graphs import make_graph, read_edgelist, write_edgelist

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _complete_or_absent(path: Path, spec: str) -> None:
    if path.exists():
        g = read_edgelist(path)  # the reader checks the 'm M' header: a partial file would fail here
        assert g == make_graph(spec)


@pytest.mark.slow
def test_sigint_during_graph_export_leaves_target_absent_or_complete(tmp_path):
    spec = "torus:700x700"  # about 1M edge lines: long enough to interrupt in the middle
    target = tmp_path / "g.txt"
    env = {**os.environ, "PYTHONPATH": SRC}
    outcomes = set()
    for delay in (0.0, 0.3):
        target.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "tokendist.cli", "graph", "export", spec, "--output",
                                 str(target)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Interrupt while the file is being written: once the temporary file exists (a Ctrl-C during
        # the imports would test nothing about the file).
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if any(p.name.endswith(".partial") for p in tmp_path.iterdir()):
                break
            time.sleep(0.01)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 130), err
        if proc.returncode == 130:
            assert err.strip().splitlines() == ["error: interrupted"], err
            assert not target.exists()
        outcomes.add(proc.returncode)
        _complete_or_absent(target, spec)
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]  # no temporary left behind
    assert 130 in outcomes  # interrupted mid-write at least once (writing 1M edge lines takes over a second)


def test_interrupt_inside_atomic_path_keeps_the_old_file(tmp_path):
    target = tmp_path / "loads.txt"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_text("half of the new")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["loads.txt"]


def test_interrupt_inside_atomic_dir_leaves_no_folder(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(out) as tmp:
            (tmp / "trace.csv").write_text("x")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_truncated_graph_file_is_refused(tmp_path):
    g = make_graph("torus:6x6")
    p = tmp_path / "g.txt"
    write_edgelist(g, p)
    lines = p.read_text().splitlines(keepends=True)
    assert f"m {g.m}\n" in lines
    assert read_edgelist(p) == g
    p.write_text("".join(lines[:-5]))
    with pytest.raises(GraphFileError, match=f"m {g.m} but the file has {g.m - 5} edges"):
        read_edgelist(p)


def test_graph_export_then_read_back(tmp_path, capsys):
    p = tmp_path / "g.txt"
    assert main(["graph", "export", "hypercube:4", "--output", str(p)]) == 0
    assert read_edgelist(p) == make_graph("hypercube:4")
    assert [f.name for f in tmp_path.iterdir()] == ["g.txt"]


def test_run_out_and_save_loads_written_whole(tmp_path, capsys):
    out, loads = tmp_path / "out", tmp_path / "loads.txt"
    argv = ["run", "--graph", "ring:6", "--algo", "multi-port", "--init", "point:12", "--max-steps", "5",
            "--out", str(out), "--save-loads", str(loads), "--json"]
    assert main(argv) == 0
    assert sorted(f.name for f in out.iterdir()) == ["run.png", "summary.json", "trace.csv"]
    assert np.loadtxt(loads, dtype=np.int64).sum() == 12
    assert sorted(f.name for f in tmp_path.iterdir()) == ["loads.txt", "out"]


def test_compare_out_written_whole(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--graph", "ring:6", "--init", "random:0..9", "--max-steps", "10", "--algos", "multi-port",
            "--out", str(out), "--json"]
    assert main(argv) == 0
    assert {"compare.csv", "compare.json"} <= {f.name for f in out.iterdir()}
    assert [f.name for f in tmp_path.iterdir()] == ["cmp"]


def test_read_bytes_limits(tmp_path):
    p = tmp_path / "big.txt"
    p.write_bytes(b"1\n" * 100)
    assert len(read_bytes(p, "loads", 200)) == 200
    with pytest.raises(TokendistError, match="more than the 199 bytes"):
        read_bytes(p, "loads", 199)
    with pytest.raises(TokendistError, match="is a directory"):
        read_bytes(tmp_path, "loads", 10)
    with pytest.raises(TokendistError, match="not a regular file"):
        read_bytes("/dev/zero", "loads", 10)
