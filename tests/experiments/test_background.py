"""The kernels a small run did not compile compile after the command, at idle priority.

``tokendist compare`` (and ``tokendist run``) on a cold numba cache runs small runs on the numpy
reference (tokendist.kernels._choice) and then starts one detached process that makes those runs
again with their kernels compiled (tokendist.experiments._background): the next command finds them
in the cache.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from tokendist.experiments import CompareRow, Scenario
from tokendist.experiments._background import avoided_rows, compile_later
from tokendist.kernels._choice import avoided_compiling, why_reference


def test_the_rows_that_avoided_compiling_are_the_ones_their_variants_name():
    avoided = {f"reference: {why_reference('stencil, serial (multi_port_step_stencil)')}": 53}
    rows = [CompareRow("multi-port", "ok", variants=avoided),
            CompareRow("single-port", "ok", variants={"stencil, serial (single_port_stencil_step)": 10}),
            CompareRow("perfect-tree", "ok", variants={"reference": 7}),  # no kernel to compile
            CompareRow("ds", "skipped", reason="not a tree")]
    assert avoided_compiling(avoided) and not avoided_compiling({"reference": 3})
    assert avoided_rows(rows) == ["multi-port"]


def test_nothing_starts_without_protocols_or_when_switched_off(monkeypatch):
    scenario = Scenario("s", "ring:8", "point:80", algos=["multi-port"], max_steps=10)
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "1")
    assert compile_later(scenario, []) is None
    monkeypatch.setenv("TOKENDIST_BACKGROUND_COMPILE", "0")
    assert compile_later(scenario, ["multi-port"]) is None
    monkeypatch.delenv("TOKENDIST_BACKGROUND_COMPILE")
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "0")  # no run avoids compiling: nothing to do later
    assert compile_later(scenario, ["multi-port"]) is None


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has finished
    except FileNotFoundError:
        return False


_COMMANDS = {
    "compare": ["compare", "--graph", "torus:6x6", "--init", "random:0..50", "--algos", "multi-port",
                "--max-steps", "300", "--no-files", "--json"],
    "run": ["run", "--graph", "torus:6x6", "--init", "random:0..50", "--algo", "multi-port", "--max-steps", "300",
            "--json"],
    # A message protocol: its handlers on a cold cache, its compiled program once compiled.
    "compare-perfect-tree": ["compare", "--graph", "random-tree:40", "--init", "random:0..9", "--algos",
                             "perfect-tree", "--no-files", "--json"],
}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_the_next_command_finds_the_kernels_the_first_one_left_to_compile(tmp_path, command):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), TMPDIR=str(tmp_path),
               TOKENDIST_SMALL_RUN_REFERENCE="1")
    env.pop("TOKENDIST_BACKGROUND_COMPILE", None)
    argv = [sys.executable, "-m", "tokendist.cli", *_COMMANDS[command]]

    def once():
        out = json.loads(subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout)
        return out, (out["rows"][0] if command.startswith("compare") else out)

    first, row = once()
    assert avoided_compiling(row["variants"])  # a cold cache: the reference ran
    later = first["compiling_later"]
    assert later["protocols"] == ["perfect-tree" if command == "compare-perfect-tree" else "multi-port"]
    with open(f"/proc/{later['pid']}/stat") as fh:  # idle priority: SCHED_IDLE is policy 5
        assert int(fh.read().rsplit(")", 1)[1].split()[38]) == 5 or not _running(later["pid"])
    if os.path.exists("/proc/self/autogroup") and _running(later["pid"]):  # its session's group idle too
        with open(f"/proc/{later['pid']}/autogroup") as fh:
            assert fh.read().split()[-1] == "19" or not _running(later["pid"])
    deadline = time.monotonic() + 300
    while _running(later["pid"]):
        assert time.monotonic() < deadline, "the compilation after the command did not finish in 300 s"
        time.sleep(0.5)
    second, again = once()
    assert not avoided_compiling(again["variants"]) and "reference" not in again["variants"]
    assert second["compiling_later"] is None
    # The same run either way (the kernel and the reference give the same loads).
    keep = ("steps", "stop_reason", "tokens_moved", "messages")
    assert {k: row[k] for k in keep} == {k: again[k] for k in keep}


def _group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_kill_of_the_background_process_ends_its_workers_too(tmp_path, monkeypatch):
    # The command names the process; `kill PID` must not leave its forked workers behind (they
    # blocked for good on a result queue nobody reads).
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("TOKENDIST_SMALL_RUN_REFERENCE", "1")
    monkeypatch.delenv("TOKENDIST_BACKGROUND_COMPILE", raising=False)
    scenario = Scenario("s", "torus:6x6", "random:0..50", algos=["multi-port", "sos-iou", "quasirandom"],
                        max_steps=300)
    pid = compile_later(scenario, scenario.algos)
    assert pid is not None
    deadline = time.monotonic() + 120
    while len(_group(pid)) < 3:  # the process and its two workers (one per core, at least two here)
        assert time.monotonic() < deadline and _running(pid), "the background process forked no workers"
        time.sleep(0.1)
    os.kill(pid, 15)
    deadline = time.monotonic() + 30
    while _group(pid):
        assert time.monotonic() < deadline, f"left behind after SIGTERM: {_group(pid)}"
        time.sleep(0.1)
