"""Time a ``tokendist`` command's process end to end: the program (``tokendist.cli.console``)
against the same command through :func:`tokendist.cli.main` with the interpreter's usual exit.

    python benchmarks/probes/program_exit.py --runs 7 -- run --graph torus:16x16 --algo multi-port --init random:0..200

Alternates the two forms ``--runs`` times each and prints each form's wall times, their medians
and the ratio of the medians. The only difference between them is the exit: ``console`` freezes
the garbage collector's objects before the interpreter's teardown (see its docstring), so the
difference is the teardown's full collections over every object the command left alive.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

FORMS = {
    "console": "from tokendist.cli import console; console()",
    "main": "import sys; from tokendist.cli import main; sys.exit(main())",
}


def timed(code: str, args: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the tokendist command and its arguments, after --")
    args = ap.parse_args(argv)
    command = [a for a in args.command if a != "--"] or ["algos", "--json"]
    times = {form: [] for form in FORMS}
    timed(FORMS["main"], command)  # bytecode and numba caches written before anything is timed
    for _ in range(args.runs):
        for form, code in FORMS.items():
            times[form].append(timed(code, command))
    print(f"tokendist {' '.join(command)}")
    for form, values in times.items():
        print(f"  {form:8} median {statistics.median(values):.3f} s   " + " ".join(f"{v:.2f}" for v in values))
    ratio = statistics.median(times["console"]) / statistics.median(times["main"])
    print(f"  console / main: {ratio:.2f}")


if __name__ == "__main__":
    main()
