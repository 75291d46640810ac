"""single-port's blocks of steps (:meth:`Protocol.steps <tokendist.engine.Protocol.steps>`).

:meth:`.._rules.SinglePort.steps`: up to ``k`` steps of the stencil kernel (tori and rings, per-edge
coins, serial) in one compiled call, :func:`.kernels._blocks.single_port_stencil_steps`.
"""

from __future__ import annotations

import numpy as np

from ...kernels._report import block_kernel_ready, kernel_label
from .kernels._blocks import single_port_stencil_steps
from .kernels._serial import INT32_MAX
from .kernels._stencil import single_port_stencil_step

__all__ = ["single_port_steps"]

#: What a step of the stencil kernel reports as its variant (RunResult.variants), blocks of steps too.
_STENCIL_VARIANT = kernel_label(single_port_stencil_step)


def single_port_steps(self, t, k, graph, loads, block, moved, messages, stop_idle):
    """Up to ``k`` steps of the stencil kernel in one call (:meth:`Protocol.steps`): the kernel of
    :meth:`step` on each, the same coins, matchings and loads, the Lemma 3.2 counts as step by
    step. Declined for a negative load: only from loads >= 0 is every transfer feasible (the
    sender holds at least ``threshold`` more than its partner), which the engine's block check
    takes for granted instead of reading the flows."""
    if self._edge_runs is None or graph is not self._graph or np.minimum.reduce(loads) < 0:
        return None
    if self._steps + k >= INT32_MAX and self._selected.dtype == np.int32:
        self._selected = self._selected.astype(np.int64)  # (as step() does, up to k steps earlier)
    args = (*self._stencil_head, self.key, self._bound, self.threshold, self._flows, self._selected, self._flags,
            self._partner, t, k, stop_idle, loads, block, moved)
    if not block_kernel_ready(single_port_stencil_steps, args):
        return None
    done = single_port_stencil_steps(*args)
    self._steps += done
    self._ncand = 0
    self._flows_dense = True
    messages[:done] = self._messages
    return done, _STENCIL_VARIANT
