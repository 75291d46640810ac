"""Quick start: run one protocol, read the result, compare two protocols.

Run: python examples/quickstart.py
"""

import tokendist as td

# One run: the multi-port algorithm of Ghosh et al. on a 16x16 torus, all tokens on node 0.
r = td.simulate("torus:16x16", "multi-port", "point:5000", seed=1)
print(f"{r.algorithm}: {r.steps} steps, stopped because {r.stop_reason}")
print(f"  discrepancy {r.initial['discrepancy']} -> {r.final['discrepancy']}, "
      f"local discrepancy {r.final['local_discrepancy']} (the paper promises <= 2d = 8)")

# The same start under continuous diffusion (real-valued loads).
d = td.simulate("torus:16x16", "diffusion", "point:5000", seed=1, until_discrepancy=1.0)
print(f"{d.algorithm}: discrepancy <= 1 after {d.steps} steps")

# Every metric is recorded per step in r.trace (arrays), ready for plotting.
print("first steps of the discrepancy trace:", r.trace["discrepancy"][:5].tolist())
