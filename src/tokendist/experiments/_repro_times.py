"""Measured wall times of the reproductions, shown by ``tokendist reproduce list``.

Each entry's figures are measured, not estimated at list time: one ``tokendist reproduce NAME
--json`` process per entry (and one with ``--quick``), sequential (no ``--workers``), warm numba
cache, on the project's reference machine (2 shared cores; the load average is in
docs/performance.md). Re-measure with

    python benchmarks/time_reproductions.py [--quick|--full] [NAME ...]

which prints the lines of :data:`WALL_SECONDS` to paste here. A missing figure (None) is shown as
``-``.
"""

from __future__ import annotations

__all__ = ["WALL_SECONDS"]

#: name -> (seconds of the full run, seconds of the ``--quick`` run).
WALL_SECONDS: dict[str, tuple[float | None, float | None]] = {
}
