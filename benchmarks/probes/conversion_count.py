"""Scalar against packed float/int conversions in the compiled rounded-diffusion kernels.

AVX2 converts float64 to and from int32 four at a time (``vcvttpd2dq``, ``vcvtdq2pd``) but to and
from int64 only one at a time (``vcvttsd2si``, ``vcvtsi2sd``; the packed int64 forms are
AVX-512). This script compiles a fresh copy of :func:`rounded_stencil_step` (numba's cache keeps
no assembly), runs one step of each rounded protocol on ``--graph`` so that it is compiled for
the protocols' types, and counts those instructions in its assembly, e.g.::

    python benchmarks/conversion_count.py --graph torus:100x100

Run against an older commit (``PYTHONPATH=/path/to/worktree/src``) to compare: the counts are
of the kernel that commit has.
"""

from __future__ import annotations

import argparse
import re

import numba
import numpy as np

from tokendist.engine import make_protocol
from tokendist.graphs import make_graph
from tokendist.protocols.diffusion import _rules as diffusion
from tokendist.protocols.diffusion.kernels import _serial as kernels

#: Scalar (int64) and packed (int32) conversions between float64 and integers.
INSTRUCTIONS = ("vcvttsd2si", "vcvtsi2sd", "vcvttpd2dq", "vcvtdq2pd")
ROUNDED = ("diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented")


def count(asm: str) -> dict[str, int]:
    """How often each of :data:`INSTRUCTIONS` stands in ``asm`` (AT&T suffixes such as ``q`` included)."""
    return {name: len(re.findall(rf"\b{name}[lq]?\b", asm)) for name in INSTRUCTIONS}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", default="torus:100x100", help="a graph with an offset stencil (a torus or a ring)")
    args = p.parse_args(argv)
    g = make_graph(args.graph)
    if g.stencil is None:
        raise SystemExit(f"conversion_count: {args.graph} has no offset stencil")
    fresh = numba.njit(nogil=True)(kernels.rounded_stencil_step.py_func)
    original = diffusion.rounded_stencil_step
    diffusion.rounded_stencil_step = fresh
    try:
        loads = np.random.default_rng(0).integers(0, 100, g.n)
        for algo in ROUNDED:
            proto = make_protocol(algo, {"threads": 1})
            proto.reset(g, loads.copy(), np.random.default_rng(0))
            proto.step(0, g, loads.copy())
    finally:
        diffusion.rounded_stencil_step = original
    if not fresh.signatures:
        raise SystemExit(f"conversion_count: the protocols did not take the stencil kernel on {args.graph}")
    print(f"rounded_stencil_step on {args.graph}: conversions in its assembly, per compiled signature")
    print(" ".join(f"{name:>11}" for name in INSTRUCTIONS))
    for sig in fresh.signatures:
        c = count(fresh.inspect_asm(sig))
        print(" ".join(f"{c[name]:>11}" for name in INSTRUCTIONS))


if __name__ == "__main__":
    main()
