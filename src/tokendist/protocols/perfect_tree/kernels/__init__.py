"""Compiled form of ``perfect-tree``: the per-node program and its executor as one numba event loop.

The handlers of :mod:`.._node` stay the readable reference; :class:`PerfectTreeKernelRun` runs the
same program event for event (checked in ``tests/protocols/test_perfect_tree_kernels.py``) and is
what the engine's event-driven path uses when :func:`kernel_supports` accepts the options.
"""

from ._run import KERNEL_MIN_NODES, VARIANT, PerfectTreeKernelRun, kernel_supports, program_ready

__all__ = ["PerfectTreeKernelRun", "kernel_supports", "VARIANT", "KERNEL_MIN_NODES", "program_ready"]
