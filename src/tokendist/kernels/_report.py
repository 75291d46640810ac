"""Which variant of a protocol ran: every run says so, step by step.

A family's rules choose, per step, among a reference numpy step and compiled kernels (CSR rows,
an offset stencil for tori and rings, a cube walk for hypercubes; serial or threaded). The choice
depends on the graph, the parameters and, for ``threads=auto``, on measured times. So that a user
never has to guess, each ``_rules`` module passes its namespace to :func:`instrument_kernels`
once: the compiled kernels it imports are then called through a thin wrapper that notes their
name, and the engine counts, per run, how many steps each variant ran (``RunResult.variants``,
``--json`` and the run summary). A step that calls no compiled kernel ran the reference code.

The wrapper is one Python call per step, outside the compiled loops.

Compiling costs more than a small run. The same wrapper lets the engine run a small run on the
reference instead (:func:`tokendist.kernels._choice.reference_is_cheaper`): while
:func:`avoid_compiling` is on, the first call of each kernel in the run checks that numba has
machine code for its argument types, in memory or in its on-disk cache (``cache=True``); if not,
the call raises :class:`CompileAvoided` before compiling anything, and the engine runs the whole
run again on the numpy reference step, which gives the same loads bit for bit (integer
protocols, tests/protocols/test_every_variant.py; the real-valued ones that declare it,
tests/protocols/test_real_references.py). A warm cache costs the check once per kernel
and run (a few microseconds), nothing per step.
"""

from __future__ import annotations

import os

__all__ = ["instrument_kernels", "begin_step", "step_variant", "describe_kernel", "REFERENCE", "CompileAvoided",
           "avoid_compiling", "kernel_ready", "dispatchers_ready", "block_kernel_ready", "kernel_label"]

#: The variant of a step that called no compiled kernel: the plain numpy (or per-node) rule.
REFERENCE = "reference"

_last: list = [None]
#: While True (:func:`avoid_compiling`), a kernel call that would compile raises CompileAvoided.
_avoid: list = [False]
#: The kernels found compiled (or cached) since the last avoid_compiling(): not checked again.
_ready: set = set()


class CompileAvoided(Exception):
    """A kernel call that would have compiled, refused while :func:`avoid_compiling` is on.

    ``label`` is the kernel's description (:func:`describe_kernel`). Not a TokendistError: the
    engine catches it and runs the reference step instead; it never reaches a user.
    """

    def __init__(self, label: str):
        super().__init__(f"{label} is not compiled yet")
        self.label = label


def avoid_compiling(on: bool) -> None:
    """Refuse (``on``) or allow kernel calls that would compile; the engine sets it per run."""
    _avoid[0] = bool(on)
    _ready.clear()


def _cached_on_disk(dispatcher, types) -> bool:
    cache = getattr(dispatcher, "_cache", None)
    if cache is None:
        return False
    try:
        # The lookup numba's Dispatcher.compile makes before compiling: index, then object code.
        return cache.load_overload(types, dispatcher.targetctx) is not None
    except Exception:  # noqa: BLE001 - a cache numba cannot read is a cache that would recompile
        return False


def kernel_ready(kernel, args) -> bool:
    """Whether calling ``kernel(*args)`` runs without compiling: machine code for the argument
    types in memory or in numba's on-disk cache.

    ``kernel`` is a numba dispatcher, or a Python entry point of a kernel module (then every
    dispatcher it names must have been compiled or cached for some types: its arguments are not
    the inner kernels' arguments).
    """
    if hasattr(kernel, "overloads"):
        try:
            types = tuple(kernel.typeof_pyval(a) for a in args)
        except Exception:  # noqa: BLE001 - an argument numba cannot type: let the call say so
            return True
        return types in kernel.overloads or _cached_on_disk(kernel, types)
    code, names = getattr(kernel, "__code__", None), getattr(kernel, "__globals__", {})
    return dispatchers_ready(*(names[k] for k in (code.co_names if code else ()) if hasattr(names.get(k), "overloads")))


def dispatchers_ready(*dispatchers) -> bool:
    """Whether each numba dispatcher has machine code for some argument types, in memory or in
    numba's on-disk cache (for kernels whose argument types never vary)."""
    return all(d.overloads or _has_index(d) for d in dispatchers)


def block_kernel_ready(kernel, args) -> bool:
    """Whether a kernel of several steps (``Protocol.steps``) may run: always, but while
    :func:`avoid_compiling` is on only when it would not compile (the run then steps one at a time
    instead; checked once per kernel and run)."""
    if not _avoid[0]:
        return True
    label = f"block {kernel.__module__}.{kernel.__name__}"
    if label in _ready:
        return True
    if not kernel_ready(kernel, args):
        return False
    _ready.add(label)
    return True


def kernel_label(kernel) -> str:
    """The variant a step of ``kernel`` reports (its instrumented wrapper's label)."""
    return describe_kernel(kernel.__module__, kernel.__name__)


def _has_index(dispatcher) -> bool:
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    path = getattr(cache_file, "_index_path", None)
    return path is not None and os.path.exists(path)


def begin_step() -> None:
    """Forget the kernel of the previous step (the engine calls this before each step)."""
    _last[0] = None


def step_variant() -> str:
    """The variant of the step just taken: a kernel's description, or :data:`REFERENCE`."""
    return _last[0] or REFERENCE


def describe_kernel(module: str, name: str) -> str:
    """``"<shape>, <serial|threaded> (<function>)"`` from a kernel's module and function name."""
    low = f"{module.rsplit('.', 1)[-1]} {name}"
    if "numpy" in name:
        return f"numpy ({name})"
    shape = "stencil" if "stencil" in low else "cube" if "cube" in low else "regular rows" if "regular" in low \
        else "csr"
    threads = "threaded" if (name.endswith("_par") or "threaded" in low or "parallel" in low) else "serial"
    return f"{shape}, {threads} ({name})"


def _is_kernel(obj) -> bool:
    module = getattr(obj, "__module__", "") or ""
    if ".kernels." not in module or not callable(obj) or isinstance(obj, type):
        return False
    # A numba dispatcher, or a Python entry point of a kernel module that runs a step.
    return hasattr(obj, "py_func") or "step" in getattr(obj, "__name__", "")


def instrument_kernels(namespace: dict) -> None:
    """Wrap every compiled kernel imported into ``namespace`` so that calling it records its variant."""
    for key, obj in list(namespace.items()):
        if key.startswith("_") or not _is_kernel(obj):
            continue
        namespace[key] = _wrap(obj, describe_kernel(obj.__module__, obj.__name__))


def _wrap(kernel, label: str):
    last, avoid = _last, _avoid  # (closure cells: no module-global lookups on the per-step path)

    def call(*args, **kwargs):
        last[0] = label
        if avoid[0] and label not in _ready:
            if not kernel_ready(kernel, args):
                raise CompileAvoided(label)
            _ready.add(label)
        return kernel(*args, **kwargs)

    call.__name__ = kernel.__name__
    call.__qualname__ = kernel.__qualname__
    call.__doc__ = kernel.__doc__
    call.__module__ = kernel.__module__
    call.__wrapped__ = kernel
    if hasattr(kernel, "py_func"):
        call.py_func = kernel.py_func
    return call
