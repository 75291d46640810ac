"""Compiling, at idle priority after the command, the kernels a small run did not compile.

On a cold numba cache a small run takes the numpy reference step instead of compiling its kernels
(:func:`tokendist.kernels._choice.reference_is_cheaper`): the same loads, at once, instead of a
minute of compilation before the first row of ``tokendist compare``. But the reference does not
fill numba's cache, so every later run of that size would take the reference again, at several
times a compiled step's cost. So when a ``tokendist compare`` had runs that avoided compiling, it
starts one detached process (:func:`compile_later`) that makes those runs again with compilation
allowed, on every core at idle priority (``SCHED_IDLE`` where Linux has it, else ``nice 19``:
it runs on cores nobody else wants), and writes nothing but numba's cache; the command itself
does not wait for it. A later run finds the kernels compiled, as after the test suite. The results
never depend on it: a compiled kernel and the reference give the same loads, bit for bit.

At most one such process runs at a time (a lock file in the temporary folder); it changes nothing
that a run reads but numba's cache, whose files numba writes whole, so a run starting meanwhile
finds a kernel compiled or not, never half written. ``TOKENDIST_BACKGROUND_COMPILE=0`` in the
environment turns it off; with ``TOKENDIST_SMALL_RUN_REFERENCE=0`` no run avoids compiling, so
there is nothing to compile later.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile

try:
    import fcntl
except ImportError:  # not on Windows: no compilation after the command there
    fcntl = None

from ..kernels._choice import SMALL_RUN_ENV, avoided_compiling
from ._compare import compare
from ._scenario import Scenario
from ._workers import default_workers

__all__ = ["compile_later", "BACKGROUND_ENV", "avoided_rows"]

#: ``TOKENDIST_BACKGROUND_COMPILE=0`` in the environment: no compilation after the command.
BACKGROUND_ENV = "TOKENDIST_BACKGROUND_COMPILE"


def avoided_rows(rows) -> list[str]:
    """The protocols among ``rows`` (:class:`tokendist.experiments.CompareRow`) whose run took the
    reference step instead of compiling a kernel."""
    return [r.algorithm for r in rows if r.status == "ok" and avoided_compiling(r.variants)]


def _lock_path() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"tokendist-compile-{uid}.lock")


def compile_later(scenario, algos) -> int | None:
    """Start the detached process that runs ``algos`` of ``scenario`` again with compiled kernels.

    Returns its process id, or None when nothing is started: no protocol to compile, switched off
    (``TOKENDIST_BACKGROUND_COMPILE=0``), kernels kept on every run anyway
    (``TOKENDIST_SMALL_RUN_REFERENCE=0``) or no way to start a process.
    """
    algos = list(algos)
    if (not algos or fcntl is None or os.environ.get(BACKGROUND_ENV, "1") == "0"
            or os.environ.get(SMALL_RUN_ENV, "1") == "0"):
        return None
    spec = dataclasses.asdict(scenario)
    spec["algos"] = algos
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "tokendist.experiments._background", json.dumps(spec)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # not stopped by the terminal's Ctrl-C meant for the next command
            close_fds=True)
    except OSError:
        return None
    _idle_priority(child.pid)  # from its first import on (the child sets it again, for where this fails)
    return child.pid


def _idle_priority(pid: int = 0) -> None:
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        if pid == 0:
            try:
                os.nice(19)
            except (AttributeError, OSError):
                pass
    # Its own session is its own scheduling group where Linux groups by session (autogroup), and
    # groups share the cores equally whatever their tasks' priorities: the group's nice value makes
    # it idle too (without it, a compare started meanwhile got half the cores, measured).
    try:
        with open(f"/proc/{pid or 'self'}/autogroup", "w") as fh:
            fh.write("19")
    except OSError:
        pass


def _end_with_workers() -> None:
    """On SIGTERM (a user's ``kill PID`` of the process the command named), end the workers too.

    They are forked into this process's group (its own session). Left alone they would outlive it,
    blocked for good on a result queue nobody reads (seen here: two processes asleep on its lock).
    """
    leader = os.getpid()

    def stop(signum, frame):  # (the workers inherit it: they just exit)
        if os.getpid() == leader:
            signal.signal(signum, signal.SIG_IGN)
            os.killpg(leader, signum)
        os._exit(128 + signum)

    if os.getpgrp() == leader:  # (started by compile_later: the group is this process and its workers)
        signal.signal(signal.SIGTERM, stop)


def _main(argv) -> int:
    _idle_priority()
    _end_with_workers()
    with open(_lock_path(), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another one is compiling: it (or a later run) does this
        os.environ[SMALL_RUN_ENV] = "0"  # compile, as the test suite does
        # On every core: at idle priority (inherited by the workers) they take only cores left free.
        compare(Scenario(**json.loads(argv[0])), workers=default_workers())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
