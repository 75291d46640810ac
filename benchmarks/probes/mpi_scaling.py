"""Time per step and halo bytes per step of partitioned runs (``--backend mpi``) for K = 1, 2, 4.

Usage: ``PYTHONPATH=src python benchmarks/probes/mpi_scaling.py [--steps 30] [--graphs torus:1000x1000 ...]``.
Each configuration is one ``mpiexec -n K python -m tokendist.cli run ... --backend mpi --json``;
the figures are the run's ``ranks`` field (the slowest rank's mean time per step after the first,
the bytes all ranks sent in halo exchanges divided by the steps) and the edge cut. The
single-process run of the same command is timed for reference. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")


def run(graph, algo, k, partition, steps):
    args = [sys.executable, "-m", "tokendist.cli", "run", "--graph", graph, "--algo", algo, "--init",
            "random:0..1000", "--seed", "5", "--max-steps", str(steps), "--record-every", "100000", "--json"]
    if k:
        args = [MPIEXEC, "-n", str(k), *args, "--backend", "mpi", "--partition", partition]
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=os.environ)
    if done.returncode:
        raise SystemExit(done.stderr)
    out = json.loads(done.stdout)
    out["wall"] = time.perf_counter() - started
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--algo", default="multi-port")
    ap.add_argument("--graphs", nargs="+", default=["torus:1000x1000"])
    ap.add_argument("--ranks", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--partitions", nargs="+", default=["contiguous", "metis"])
    a = ap.parse_args()
    print("| graph | K | partition | edge cut | halo bytes per step | at most 16 B x cut | "
          "ms per step | run seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for graph in a.graphs:
        single = run(graph, a.algo, 0, None, a.steps)
        # The single-process engine reports no time per step: the difference to a one-step run.
        one = run(graph, a.algo, 0, None, 1)
        per_step = (single["seconds"] - one["seconds"]) / (a.steps - 1)
        print(f"| {graph} | single process | - | - | - | - | {1000 * per_step:.1f} | {single['seconds']:.1f} |",
              flush=True)
        for k in a.ranks:
            for method in a.partitions if k > 1 else ["contiguous"]:
                r = run(graph, a.algo, k, method, a.steps)
                assert r["final"] == single["final"] and r["tokens_moved"] == single["tokens_moved"]
                x = r["ranks"]
                print(f"| {graph} | {k} | {method} | {x['edge_cut']:,} | {x['halo_bytes_per_step']:,.0f} | "
                      f"{16 * x['edge_cut']:,} | {1000 * x['seconds_per_step']:.1f} | {r['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
