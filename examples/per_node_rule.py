"""The same protocol as a vectorised kernel and as per-node code exchanging real messages.

Run: python examples/per_node_rule.py
"""

import numpy as np

import tokendist as td

spec, init, steps = "torus:5x5", "random:0..60", 30
kernel = td.simulate(spec, "multi-port", init, seed=4, max_steps=steps, keep_loads_every=1, detect_cycles=False)
history, stats = td.run_node_rules(spec, "multi-port", init, kernel.steps, seed=4, schedule="async")
print("per-node code under random message delays agrees with the kernel at every step:",
      bool(np.array_equal(history, kernel.load_history)))
print("messages:", stats["messages"], "simulated time units:", stats["time"])
