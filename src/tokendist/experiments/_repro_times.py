"""Measured wall times of the reproductions, shown by ``tokendist reproduce list``.

Each entry's figures are measured, not estimated at list time: one ``tokendist reproduce NAME
--json`` process per entry (and one with ``--quick``), sequential (no ``--workers``), warm numba
cache, on the project's reference machine (2 shared cores). The figure is the process's CPU time
(user + sys), which is its wall time on a free core: the machine was shared at load average 9-22
while they were measured, and the wall times were 3-10x longer (docs/performance.md, "Reproductions").
Re-measure with

    python benchmarks/time_reproductions.py [--quick|--full] [NAME ...]

which prints the lines of :data:`WALL_SECONDS` to paste here. A missing figure (None) is shown as
``-``.
"""

from __future__ import annotations

__all__ = ["WALL_SECONDS"]

#: name -> (seconds of the full run, seconds of the ``--quick`` run).
WALL_SECONDS: dict[str, tuple[float | None, float | None]] = {
    "houle-sg1": (1, 1.4),
    "houle-fig1": (2, 1.5),
    "houle-stars-paths": (2, 1.5),
    "houle-kary-msd": (1, 1.4),
    "houle-termination": (11, 1.9),
    "table1": (7, 10.8),
    "margara": (5, 1.5),
    "subramanian-fig3": (1, 1.4),
    "subramanian-fig4": (1, 1.5),
    "subramanian-roundings": (8, 1.6),
    "subramanian-fig1": (6, 1.4),
    "elsasser-fig1": (4, 1.9),
    "elsasser-fig2": (2, 1.6),
    "elsasser-fig3": (2, 1.7),
    "elsasser-fig4": (114, 2.3),
    "elsasser-fig5": (110, 2.2),
    "elsasser-choices": (8, 3.0),
    "ghosh-scaling": (243, 1.4),
    "ghosh-local-balance": (17, 1.6),
    "ghosh-dynamic": (14, 2.1),
    "sos-iou-readings": (31, 16.5),
    "quasirandom": (30, 1.5),
    "rotor-router": (24, 1.4),
    "randomized-diffusion": (14, 1.6),
    "random-matching": (39, 3.8),
    "flow-imitation": (2, 1.4),
    "stratified-diffusion": (18, 1.6),
    "pairwise-averaging": (35, 2.3),
    "rsw-lower-bound": (2, 1.7),
    "modern-vs-classic": (156, 5.3),
}
