"""sos-iou on a torus: the CSR row loop against the offset-stencil kernel.

For ``torus:W x W`` (``--side``), two chains of integer SOS steps with IOUs run side by side from
the same loads (``tokendist bench``'s: uniform in 0..99 from seed 0), with the protocol's coefficient and ``beta``, one with ``sos_iou_step`` (CSR rows,
lower slots through ``csr_edges``) and one with ``sos_iou_stencil`` (the stencil's runs, what the
protocol runs on a torus), alternating a step of each; the steps after ``--warm`` untimed ones
are timed. After every step the two chains' loads, IOUs and returned tallies must be equal, bit
for bit. From these loads more and more nodes are short (they owe more than they hold and pay
what they can, leaving IOUs of 1 or more: the exceptions), as in the bench's ten steps.

With ``--threads K`` (K > 1) a third chain runs ``sos_iou_stencil_par`` on K numba threads
(what the protocol runs with ``--param threads=K`` on a torus; ``4 K`` node ranges), checked
against the other two the same way.

Prints, per timed step, the number of short nodes, and the median (min) ns per edge of each
chain and the row loop's median over the stencil kernel's (and the serial stencil's over the
threaded one's), e.g.::

    python benchmarks/sos_iou_torus.py --side 1000 --steps 10
    python benchmarks/sos_iou_torus.py --side 1000 --steps 10 --threads 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tokendist._random import stream
from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.graphs._stencil import lower_edge_runs
from tokendist.protocols.heterogeneous.kernels._serial import COEF_SCALAR, sos_iou_step
from tokendist.protocols.heterogeneous.kernels._stencil import sos_iou_stencil
from tokendist.protocols.heterogeneous.kernels._threaded import run_blocks, use_threads
from tokendist.protocols.heterogeneous.kernels._stencil_threaded import (STENCIL_CHUNKS_PER_THREAD, sos_iou_stencil_par,
                                                                 stencil_chunks)


def _chains(g, a0, beta, loads, threads=0):
    """Step functions (CSR rows, stencil runs, and with ``threads`` > 1 the threaded stencil kernel).

    Each has its own state and returns ``(loads, result)``.
    """
    st = g.stencil
    runs = lower_edge_runs(st, g.csr_edges)
    chunks = None
    if threads > 1:
        use_threads("sos-iou", threads)
        chunks = stencil_chunks(*runs[:2], st.lower, st.upper, runs[2], g.indptr, g.indices, g.u,
                                STENCIL_CHUNKS_PER_THREAD * threads)
    chains = []
    for stencil in (False, True) + ((2,) if threads > 1 else ()):
        state = {"w": loads, "yhat": np.zeros(g.m), "iou": np.zeros(g.m), "bits": np.zeros((g.m + 7) // 8, np.uint8),
                 "k": 0, "exc": False}

        def step(state=state, stencil=stencil):
            w, out, owe = state["w"], np.zeros(g.n, np.int64), np.empty(g.n)
            tail = (beta, state["k"] == 0, state["k"] > 0, state["exc"], state["bits"], True, w, w, state["yhat"],
                    state["iou"], out, owe)
            if stencil == 2:
                res = run_blocks(sos_iou_stencil_par, g.indptr, g.indices, g.csr_edges, *chunks, a0, *tail)
            elif stencil:
                res = sos_iou_stencil(g.indptr, g.indices, g.csr_edges, runs[0], runs[1], st.lower, st.upper, runs[2],
                                      a0, *tail)
            else:
                res = sos_iou_step(g.indptr, g.indices, g.csr_edges, COEF_SCALAR, a0, None, None, *tail)
            state["w"], state["k"], state["exc"] = out, state["k"] + 1, res[4]
            return out, res

        chains.append((step, state))
    return chains


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", type=int, default=1000, help="the torus is side x side")
    p.add_argument("--steps", type=int, default=10, help="timed steps per chain")
    p.add_argument("--warm", type=int, default=1, help="untimed steps first (the first compiles)")
    p.add_argument("--beta", type=float, default=None,
                   help="SOS's beta; default the protocol's own, from the graph's spectrum (as the bench runs it)")
    p.add_argument("--threads", type=int, default=0,
                   help="K > 1: a third chain, the stencil kernel on K numba threads")
    args = p.parse_args(argv)
    g = make_graph(f"torus:{args.side}x{args.side}")
    if g.stencil is None:
        raise SystemExit(f"torus:{args.side}x{args.side} has no offset stencil (too small)")
    loads = stream(0, "init").integers(0, 100, size=g.n).astype(np.int64)  # the bench's loads
    # The protocol's own coefficient (and beta, unless given), as the bench runs it.
    proto = make_protocol("sos-iou", {} if args.beta is None else {"beta": args.beta})
    proto.reset(g, loads, np.random.default_rng(0))
    mode, a0, _, _ = proto._kernel_coefs(g)
    assert mode == COEF_SCALAR
    beta = proto.beta
    chains = _chains(g, a0, beta, loads, args.threads)
    kinds = ("csr", "stencil", "threads")[:len(chains)]
    times = {kind: [] for kind in kinds}
    shorts = []
    for t in range(args.warm + args.steps):
        results = []
        for kind, (step, state) in zip(kinds, chains):
            t0 = time.perf_counter()
            results.append(step())
            if t >= args.warm:
                times[kind].append((time.perf_counter() - t0) / g.m * 1e9)
        w1, r1 = results[0]
        for (w2, r2), (_, state) in zip(results[1:], chains[1:]):
            same_state = np.array_equal(chains[0][1]["iou"], state["iou"])
            if r1 != r2 or not np.array_equal(w1, w2) or not same_state:
                raise SystemExit(f"the kernels disagree at step {t}")
        if t >= args.warm:
            shorts.append(int(r1[1]))
    print(f"torus:{args.side}x{args.side}, beta {beta:.6f}, ns per edge, median (min) of steps {args.warm} .. "
          f"{args.warm + args.steps - 1}; loads, IOUs and tallies equal after every step")
    print(f"short nodes per step: {', '.join(map(str, shorts))}")
    r, s = times["csr"], times["stencil"]
    head = f"{'csr rows':>14}  {'stencil':>14}  {'csr / stencil':>13}"
    row = f"{np.median(r):6.2f} ({min(r):5.2f})  {np.median(s):6.2f} ({min(s):5.2f})  {np.median(r) / np.median(s):13.2f}"
    if "threads" in times:
        k = times["threads"]
        head += f"  {f'stencil x{args.threads}':>14}  {f'stencil / x{args.threads}':>14}"
        row += f"  {np.median(k):6.2f} ({min(k):5.2f})  {np.median(s) / np.median(k):14.2f}"
    print(head)
    print(row)


if __name__ == "__main__":
    main()
