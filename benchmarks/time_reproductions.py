"""Measure the wall time of every reproduction, as ``tokendist reproduce list`` shows it.

Each entry runs in its own ``python -m tokendist.cli reproduce NAME --json`` child process,
sequentially (a user's ``tokendist reproduce NAME``: imports, numba cache loading and all), once
with ``--quick`` and once in full. Prints one line per run (wall seconds, the child's CPU seconds,
the load average before it) and, at the end, the lines of
``tokendist.experiments._repro_times.WALL_SECONDS`` to paste: the CPU seconds, which are the wall
time of the sequential run on a free core (on a shared machine the wall time depends on the other
tenants). With ``--workers`` the CPU seconds include only the worker processes the command waited
for; compare wall times there. Run it twice when the numba cache is
cold: the first pass compiles.

Usage::

    PYTHONPATH=src python benchmarks/time_reproductions.py            # every entry, quick and full
    PYTHONPATH=src python benchmarks/time_reproductions.py --quick     # quick runs only
    PYTHONPATH=src python benchmarks/time_reproductions.py --full ghosh-scaling --workers 2
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

from tokendist.experiments import REPRODUCTIONS
from tokendist.experiments import _modules  # noqa: F401  (registers every entry)


def timed(name: str, quick: bool, workers: int | None) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + sys of the child and its children) of one reproduction."""
    cmd = [sys.executable, "-m", "tokendist.cli", "reproduce", name, "--json"]
    cmd += ["--quick"] if quick else []
    cmd += ["--workers", str(workers)] if workers else []
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, load


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="entries (default: every entry)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="only the --quick runs")
    which.add_argument("--full", action="store_true", help="only the full runs")
    p.add_argument("--workers", type=int, default=None, help="pass --workers N to each run")
    args = p.parse_args()
    names = args.names or REPRODUCTIONS.names()
    modes = [True] if args.quick else [False] if args.full else [True, False]
    got: dict = {}
    for name in names:
        for quick in modes:
            wall, cpu, load = timed(name, quick, args.workers)
            got.setdefault(name, {})[quick] = cpu
            print(f"{name:24s} {'quick' if quick else 'full ':5s} wall {wall:8.1f} s  cpu {cpu:8.1f} s  "
                  f"load before {load}", flush=True)
    print("\n# WALL_SECONDS lines (full, quick); figures not measured in this run stay as they were")
    for name in names:
        full, quick = got[name].get(False), got[name].get(True)
        print(f'    "{name}": ({"None" if full is None else round(full)}, {"None" if quick is None else round(quick, 1)}),')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
