"""Output helpers shared by the commands: JSON, rich tables, progress bars, key=value options."""

from __future__ import annotations

import contextlib
import json
import math
import sys

import numpy as np
from numba.core import event as numba_event

from ..errors import TokendistError

__all__ = ["print_json", "to_jsonable", "table", "console", "progress_bar", "parse_key_values", "fmt", "COMPILING"]

#: What the progress bar says while numba compiles (kernels are cached once compiled: a first run
#: after an install compiles what it uses, later runs load them from the cache).
COMPILING = "compiling kernels (once per install)"


class CompileNotice(numba_event.Listener):
    """A numba event listener calling ``show(True)`` when a compilation starts, ``show(False)`` at its end.

    Nested compilations (a kernel compiling the functions it calls) count as one.
    """

    def __init__(self, show):
        self.show = show
        self.depth = 0

    def on_start(self, event):
        self.depth += 1
        if self.depth == 1:
            self.show(True)

    def on_end(self, event):
        self.depth -= 1
        if self.depth == 0:
            self.show(False)


def to_jsonable(obj):
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe values."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def print_json(obj) -> None:
    json.dump(to_jsonable(obj), sys.stdout, indent=2)
    sys.stdout.write("\n")


def console():
    from rich.console import Console

    # Piped output (a report, a CI log) gets wide tables instead of rich's 80-column default.
    return Console() if sys.stdout.isatty() else Console(width=200)


def fmt(x) -> str:
    """Compact human formatting of a number (ints exactly, floats to 6 significant digits)."""
    if x is None:
        return "-"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if x.is_integer() and abs(x) < 1e15:
            return f"{int(x):,}"
        return f"{x:.6g}"
    return str(x)


def table(title: str, columns, rows) -> None:
    """Print a rich table."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(str(c), justify="left" if c == columns[0] else "right")
    for r in rows:
        t.add_row(*[fmt(x) for x in r])
    out = console()
    if not sys.stdout.isatty():  # piped: as wide as the widest row, never a cell cut to "torus:20…"
        from rich.measure import Measurement

        out.width = max(out.width, Measurement.get(out, out.options.update_width(10_000), t).maximum)
    out.print(t)


@contextlib.contextmanager
def progress_bar(description: str, total: int | None, enabled: bool = True):
    """A rich progress bar on a terminal; yields ``update(done, total)``. Quiet when disabled or piped."""
    if not enabled or not sys.stderr.isatty():
        yield lambda done, total=None, compiling=None: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, console=__import__("rich.console").console.Console(stderr=True)) as p:
        task = p.add_task(description, total=total)

        def show(on):
            p.update(task, description=f"{description}: {COMPILING}" if on else description)

        def update(done, total=None, compiling=None):
            # compiling: a worker process compiles (its numba events do not reach this process)
            p.update(task, completed=done, **({"total": total} if total is not None else {}))
            if compiling is not None:
                show(compiling)

        notice = CompileNotice(show)
        numba_event.register("numba:compile", notice)
        try:
            yield update
        finally:
            numba_event.unregister("numba:compile", notice)


def parse_key_values(items, what: str = "--param") -> dict:
    """Parse ``["c=1.5", "schedule=async"]`` (or "a=1,b=2" strings) into a dict of strings."""
    out = {}
    for item in items or []:
        for part in item.split(",") if what != "--param" else [item]:
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise TokendistError(f"{what} expects key=value, got {part!r}")
            if key.strip() in out:  # the last one would silently win
                raise TokendistError(f"{what}: {key.strip()} given twice")
            out[key.strip()] = value.strip()
    return out
