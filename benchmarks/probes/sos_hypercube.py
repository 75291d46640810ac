"""sos and sos-iou on a hypercube: the row loops against the kernels by dimensions.

For ``hypercube:d`` (``--dim``), each case runs two chains of steps side by side from the same
loads, one with the row loop (state by edge id) and one with the kernel by dimensions (state by
dimension), alternating a step of each, and times the steps after ``--warm`` untimed ones. After
every step the two chains' loads must be equal, bit for bit. The chains keep their state from step
to step, as a run does, so neither finds the other's arrays in the caches:

* ``sos``: ``sos_real_step`` against ``sos_real_cube``, from loads uniform in 0..99 (the bench's);
* ``sos-iou``: ``sos_iou_step`` against ``sos_iou_cube`` from the same loads (no node short after a
  few steps);
* ``sos-iou, beta 1.9``: from loads in 0..19, where many nodes are short and pay, and exceptions
  (IOUs of at least 1) are read back every step.

Prints median (min) ns per edge and the row loop's median over the cube kernel's, e.g.::

    python benchmarks/sos_hypercube.py --dim 20 --steps 7

With ``--threads K`` (K > 1) the sos-iou cases run a third chain, the threaded cube
kernel ``sos_iou_cube_par`` on K numba threads, and print the serial cube kernel's median over
its; its loads must equal the others' after every step too (the ``sos`` case has no threaded
cube kernel and prints ``-``)::

    python benchmarks/sos_hypercube.py --dim 20 --steps 7 --threads 2
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from tokendist.graphs import make_graph
from tokendist.protocols.heterogeneous.kernels._serial import COEF_SCALAR, sos_iou_step, sos_real_step
from tokendist.protocols.heterogeneous.kernels._threaded import run_blocks
from tokendist.protocols.heterogeneous.kernels._sos_cube import sos_iou_cube, sos_real_cube
from tokendist.protocols.heterogeneous.kernels._sos_cube_threaded import cube_chunk_bits, sos_iou_cube_par


def _sos_chains(g, d, beta, loads):
    """Two step functions (row loop, cube kernel) of real SOS, each with its own state; each returns its loads."""
    a0 = 1.0 / (2 * d)
    chains = []
    for by_dim in (False, True):
        state = {"w": loads.astype(np.float64), "flow": np.zeros((d, g.n // 2)) if by_dim else np.zeros(g.m), "k": 0}

        def step(state=state, by_dim=by_dim):
            w, out, outflow = state["w"], np.empty(g.n), np.empty(g.n)
            first = state["k"] == 0
            if by_dim:
                sos_real_cube(d, a0, beta, first, w, w, state["flow"], out, outflow)
            else:
                sos_real_step(g.indptr, g.indices, g.csr_edges, COEF_SCALAR, a0, None, None, beta, first, w, w,
                              state["flow"], out, outflow)
            state["w"], state["k"] = out, state["k"] + 1
            return out

        chains.append(step)
    return chains


def _sos_iou_chains(g, d, beta, loads, threads=1):
    """As :func:`_sos_chains` for integer SOS with IOUs (short nodes pay: ``overdraw=iou``); with
    ``threads > 1`` a third chain runs the threaded cube kernel."""
    a0 = 1.0 / (2 * d)
    q = cube_chunk_bits(d, threads) if threads > 1 else 0
    chains = []
    for kind in ("row", "cube", "cube-par")[:3 if q else 2]:
        by_dim = kind != "row"
        shape = (d, g.n // 2) if by_dim else (g.m,)
        state = {"w": loads, "yhat": np.zeros(shape), "iou": np.zeros(shape),
                 "bits": np.zeros((g.m + 7) // 8, np.uint8), "k": 0, "exc": False}

        def step(state=state, kind=kind):
            w, out, owe = state["w"], np.zeros(g.n, np.int64), np.empty(g.n)
            tail = (beta, state["k"] == 0, state["k"] > 0, state["exc"], state["bits"], True, w, w, state["yhat"],
                    state["iou"], out, owe)
            if kind == "cube-par":
                res = run_blocks(sos_iou_cube_par, d, q, a0, *tail)
            elif kind == "cube":
                res = sos_iou_cube(d, a0, *tail)
            else:
                res = sos_iou_step(g.indptr, g.indices, g.csr_edges, COEF_SCALAR, a0, None, None, *tail)
            state["w"], state["k"], state["exc"] = out, state["k"] + 1, res[4]
            return out

        chains.append(step)
    return chains


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=20)
    p.add_argument("--steps", type=int, default=7, help="timed steps per chain")
    p.add_argument("--warm", type=int, default=3, help="untimed steps first (the first compiles)")
    p.add_argument("--threads", type=int, default=1, help="K > 1: also the threaded cube kernel on K threads")
    args = p.parse_args(argv)
    d = args.dim
    if args.threads > 1:
        numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    g = make_graph(f"hypercube:{d}")
    rng = np.random.default_rng(1)
    light, heavy = rng.integers(0, 100, g.n), rng.integers(0, 20, g.n)
    cases = {
        "sos": _sos_chains(g, d, 1.5, light),
        "sos-iou": _sos_iou_chains(g, d, 1.5, light, args.threads),
        "sos-iou, beta 1.9": _sos_iou_chains(g, d, 1.9, heavy, args.threads),
    }
    times = {}
    for t in range(args.warm + args.steps):
        for name, chains in cases.items():
            outs = []
            for kind, step in zip(("row", "cube", "cube-par"), chains):
                t0 = time.perf_counter()
                outs.append(step())
                if t >= args.warm:
                    times.setdefault((name, kind), []).append((time.perf_counter() - t0) / g.m * 1e9)
            if any(not np.array_equal(outs[0], o) for o in outs[1:]):
                raise SystemExit(f"{name}: the kernels disagree at step {t}")
    print(f"hypercube:{d}, ns per edge, median (min) of steps {args.warm} .. {args.warm + args.steps - 1}; "
          "the loads equal after every step")
    par = any(kind == "cube-par" for _, kind in times)
    extra = f"  {f'cube, {args.threads} threads':>17}  {'cube / threaded':>15}" if par else ""
    print(f"{'case':>18}  {'row':>14}  {'cube':>14}  {'row / cube':>10}{extra}")
    for name in cases:
        r, c = times[name, "row"], times[name, "cube"]
        cells = [f"{np.median(x):6.2f} ({min(x):5.2f})" for x in (r, c)]
        line = f"{name:>18}  {cells[0]:>14}  {cells[1]:>14}  {np.median(r) / np.median(c):10.2f}"
        if par:
            tp = times.get((name, "cube-par"))
            line += (f"  {f'{np.median(tp):6.2f} ({min(tp):5.2f})':>17}  {np.median(c) / np.median(tp):15.2f}" if tp
                     else f"  {'-':>17}  {'-':>15}")
        print(line)


if __name__ == "__main__":
    main()
