"""Graph helpers on small graphs without compiling them: the same code, run by the interpreter.

The graph helpers (bipartiteness, edge colourings, biconnectivity, st-numbering, offset stencils)
are numba kernels, and with a cold numba cache each costs 0.1-1 s of compilation on its first
call; on a graph of a few hundred nodes the helper's own work is a few milliseconds. So a helper
whose machine code is neither in this process nor in numba's on-disk cache runs, on a small
graph, as plain Python: :func:`interpreted` takes the kernel's own Python function
(``dispatcher.py_func``) and rebinds the kernels it calls to their Python functions too. It is
the same code on the same integer arrays, so the result is the same, element for element
(``tests/graphs/test_interpreted.py`` compares the two on a zoo and on Hypothesis graphs).

What would differ between the interpreter and numba here is integer overflow, which needs
values near 2**31 (an int32 times a Python int stays int32 in numpy); :data:`SMALL_GRAPH_SIZE`
keeps every index and product far below that.
"""

from __future__ import annotations

import os
import time
import types

import numpy as np

__all__ = ["run_kernel", "interpreted", "kernel_compiled", "SMALL_GRAPH_SIZE", "INTERPRETED_BUDGET"]

#: ``n + m`` up to which a helper not compiled yet runs interpreted. The helpers are linear or
#: near-linear there; interpreted they cost 2-25 us per node or edge (1-25 ms on torus:16x16, at
#: most about 0.1 s at this size; ``benchmarks/probes/interpreted_helpers.py``), compiled cold 0.2-1 s.
SMALL_GRAPH_SIZE = 5_000

#: Seconds of interpreted runs of one kernel after which it is compiled instead: about what its
#: compilation costs, so that interpreting never costs more than twice the compilation.
INTERPRETED_BUDGET = 0.25

_interpreted: dict = {}
_spent: dict = {}  # id(kernel) -> seconds spent running it interpreted in this process


def interpreted(kernel):
    """The Python function of the numba dispatcher ``kernel``, with every dispatcher it calls
    (looked up in its module's globals) replaced by that dispatcher's interpreted form."""
    done = _interpreted.get(id(kernel))
    if done is not None:
        return done
    func = kernel.py_func
    names = dict(func.__globals__)
    fresh = types.FunctionType(func.__code__, names, func.__name__, func.__defaults__, func.__closure__)
    _interpreted[id(kernel)] = fresh  # before the callees: a kernel may call itself
    for key in func.__code__.co_names:
        callee = names.get(key)
        if hasattr(callee, "py_func") and hasattr(callee, "overloads"):
            names[key] = interpreted(callee)
    fresh.__doc__ = func.__doc__
    return fresh


def kernel_compiled(kernel, args) -> bool:
    """Whether ``kernel(*args)`` would run without compiling: machine code for the arguments'
    types in this process or in numba's on-disk cache (``cache=True``, ``NUMBA_CACHE_DIR``)."""
    try:
        sig = tuple(kernel.typeof_pyval(a) for a in args)
    except Exception:  # noqa: BLE001 - numba cannot type an argument: let the compiled call say so
        return True
    if sig in kernel.overloads:
        return True
    cache = getattr(kernel, "_cache", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    if index is None or not os.path.exists(index):
        return False
    try:
        # The lookup numba's Dispatcher.compile makes before compiling: index, then object code.
        return cache.load_overload(sig, kernel.targetctx) is not None
    except Exception:  # noqa: BLE001 - a cache numba cannot read is a cache that would recompile
        return False


def run_kernel(kernel, size: int, *args):
    """``kernel(*args)``, or the same code interpreted when ``size`` (the graph's ``n + m``) is at
    most :data:`SMALL_GRAPH_SIZE`, the kernel would have to compile first, and the process has
    spent less than :data:`INTERPRETED_BUDGET` seconds running it interpreted (a caller that asks
    for it on many graphs, such as a dynamic network's steps, soon gets it compiled)."""
    if (size <= SMALL_GRAPH_SIZE and _spent.get(id(kernel), 0.0) < INTERPRETED_BUDGET
            and os.environ.get(SMALL_ENV, "1") != "0" and not kernel_compiled(kernel, args)):
        start = time.perf_counter()
        try:
            return _as_compiled_returns(interpreted(kernel)(*args))
        finally:
            _spent[id(kernel)] = _spent.get(id(kernel), 0.0) + time.perf_counter() - start
    return kernel(*args)


def _as_compiled_returns(value):
    """What the compiled kernel returns for the interpreted code's ``value``: numba hands scalars
    back as Python's ``bool``, ``int`` and ``float``, not numpy's (``np.False_`` printed where
    ``False`` was meant), in tuples too; arrays stay arrays."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return tuple(_as_compiled_returns(v) for v in value)
    return value


#: ``TOKENDIST_SMALL_GRAPH_PYTHON=0`` always calls the compiled helpers (tests compare the two).
SMALL_ENV = "TOKENDIST_SMALL_GRAPH_PYTHON"
