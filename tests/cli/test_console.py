"""The ``tokendist`` program itself (``tokendist.cli.console``): exit codes and complete outputs.

``console`` freezes the garbage collector's objects before the interpreter's teardown (see its
docstring); these tests run it as a user does, in its own process, and check that nothing a
command writes is lost and that the exit code is :func:`tokendist.cli.main`'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path



def _tokendist(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tokendist.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_a_run_writes_every_file_and_its_json_whole(tmp_path: Path):
    out = tmp_path / "run"
    proc = _tokendist("run", "--graph", "ring:8", "--algo", "multi-port", "--init", "point:80", "--seed", "1",
                      "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)  # the whole document, not a truncated one
    assert payload["tokens"] == 80
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == payload["steps"]
    trace = (out / "trace.csv").read_text().splitlines()
    assert len(trace) == payload["steps"] + 2  # the header, step 0 and every step after
    assert (out / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_bad_input_exits_2_with_one_line():
    proc = _tokendist("run", "--graph", "ring:8", "--algo", "no-such-protocol", "--init", "point:80")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")


def test_the_exit_code_is_mains(tmp_path: Path):
    # The same arguments in this process and through the program: the same code and output.
    from tokendist.cli import main

    args = ["algos", "multi-port", "--json"]
    proc = _tokendist(*args)
    assert proc.returncode == main(args) == 0
    assert json.loads(proc.stdout)["name"] == "multi-port"
