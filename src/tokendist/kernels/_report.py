"""Which variant of a protocol ran: every run says so, step by step.

A family's rules choose, per step, among a reference numpy step and compiled kernels (CSR rows,
an offset stencil for tori and rings, a cube walk for hypercubes; serial or threaded). The choice
depends on the graph, the parameters and, for ``threads=auto``, on measured times. So that a user
never has to guess, each ``_rules`` module passes its namespace to :func:`instrument_kernels`
once: the compiled kernels it imports are then called through a thin wrapper that notes their
name, and the engine counts, per run, how many steps each variant ran (``RunResult.variants``,
``--json`` and the run summary). A step that calls no compiled kernel ran the reference code.

The wrapper is one Python call per step, outside the compiled loops.
"""

from __future__ import annotations

__all__ = ["instrument_kernels", "begin_step", "step_variant", "describe_kernel", "REFERENCE"]

#: The variant of a step that called no compiled kernel: the plain numpy (or per-node) rule.
REFERENCE = "reference"

_last: list = [None]


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
    def call(*args, **kwargs):
        _last[0] = label
        return kernel(*args, **kwargs)

    call.__name__ = kernel.__name__
    call.__qualname__ = kernel.__qualname__
    call.__doc__ = kernel.__doc__
    call.__module__ = kernel.__module__
    call.__wrapped__ = kernel
    if hasattr(kernel, "py_func"):
        call.py_func = kernel.py_func
    return call
