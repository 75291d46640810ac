"""Sweep results on disk: ``DIR/runs.parquet`` (one row per task) and ``DIR/traces/`` (optional).

Every write is atomic: the table goes to a temporary file in the same folder, then
:func:`os.replace` puts it in place, so a killed sweep leaves the last complete file, never a torn
one. The runner writes after each batch of finished tasks, so a kill loses at most one batch.

Columns are built from the union of the rows' keys (a failed task has no results; two algorithms
have different parameters). A column whose values mix types (a parameter that is ``1`` for one
protocol and ``"auto"`` for another) is stored as text; the exact resolved options of each run
are also in the JSON column ``params``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import TokendistError

__all__ = ["Store", "to_table", "write_table"]

RUNS = "runs.parquet"
TRACES = "traces"


def _column(values: list) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # (an int past int64 or float64's exact range)
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def _trace_column(values) -> pa.Array:
    # An object column holds ints past int64 (tokens moved near 2**63 a step): exact, as text.
    values = np.asarray(values)
    return _column(values.tolist()) if values.dtype == object else pa.array(values)


def to_table(rows: list[dict]) -> pa.Table:
    """A table from rows of plain values (columns in first-seen order; missing values are null)."""
    # A column first seen in a later row goes right after its neighbour in that row (the
    # parameters of a second protocol next to the first one's), not at the end.
    names: list[str] = []
    known: set[str] = set()
    shapes: set[tuple] = set()
    for r in rows:
        shape = tuple(r)
        if shape in shapes:
            continue
        shapes.add(shape)
        at = 0
        for k in r:
            if k in known:
                at = names.index(k) + 1
            else:
                names.insert(at, k)
                known.add(k)
                at += 1
    return pa.table({k: _column([r.get(k) for r in rows]) for k in names})


def write_table(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` atomically (temporary file in the same folder, then os.replace)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_rows(path: Path) -> list[dict]:
    """The rows of a runs.parquet file (a one-line error if it is not one)."""
    try:
        return pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowInvalid) as exc:
        raise TokendistError(f"{path}: cannot read sweep results ({exc})") from None


class Store:
    """The results folder of a sweep: rows by task key, rewritten atomically after each batch.

    Parameters
    ----------
    folder : path
        The sweep's output folder (created if missing).
    """

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / RUNS
        self.rows: dict[str, dict] = {}
        if self.path.exists():
            for r in read_rows(self.path):
                self.rows[r["key"]] = r

    @property
    def keys(self) -> set:
        return set(self.rows)

    def add(self, rows: list[dict], order: dict | None = None) -> None:
        """Add (or replace, by key) ``rows`` and rewrite runs.parquet.

        ``order`` maps task keys to their position in the sweep: rows are written in that order
        (rows of keys it does not know first, as they were), so the file does not depend on which
        worker finished first.
        """
        if not rows:
            return
        for r in rows:
            self.rows[r["key"]] = r
        ordered = list(self.rows.values())
        if order is not None:
            ordered.sort(key=lambda r: order.get(r["key"], -1))
            self.rows = {r["key"]: r for r in ordered}
        write_table(to_table(ordered), self.path)

    def add_trace(self, key: str, trace: dict) -> Path:
        """Write one task's per-step trace as ``traces/KEY.parquet`` (its rows carry the key)."""
        folder = self.folder / TRACES
        folder.mkdir(exist_ok=True)
        n = len(next(iter(trace.values()))) if trace else 0
        table = pa.table({"key": pa.array([key] * n, type=pa.string()),
                          **{k: _trace_column(v) for k, v in trace.items()}})
        path = folder / f"{key}.parquet"
        write_table(table, path)
        return path
