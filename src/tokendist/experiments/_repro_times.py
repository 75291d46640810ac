"""Measured wall times of the reproductions, shown by ``tokendist reproduce list``.

Each entry's figures are measured, not estimated at list time: one ``tokendist reproduce NAME
--json`` process per entry (and one with ``--quick``), sequential (no ``--workers``), warm numba
cache, on the project's reference machine (2 cores). The figure is the process's CPU time
(user + sys), which is its wall time on a free core (they were measured at load average 1.0-1.3,
the wall times within 0.2 s of the CPU times; docs/performance.md, "Reproductions").
Re-measure with

    python benchmarks/time_reproductions.py [--quick|--full] [NAME ...]

which prints the lines of :data:`WALL_SECONDS` to paste here. A missing figure (None) is shown as
``-``.
"""

from __future__ import annotations

__all__ = ["WALL_SECONDS"]

#: name -> (seconds of the full run, seconds of the ``--quick`` run).
WALL_SECONDS: dict[str, tuple[float | None, float | None]] = {
    "houle-sg1": (1, 0.8),
    "houle-fig1": (1, 0.9),
    "houle-stars-paths": (1, 0.9),
    "houle-kary-msd": (1, 0.8),
    "houle-termination": (2, 0.9),
    "table1": (2, 1.7),
    "margara": (3, 1.1),
    "subramanian-fig3": (1, 0.9),
    "subramanian-fig4": (1, 0.9),
    "subramanian-roundings": (3, 1.1),
    "subramanian-fig1": (1, 0.8),
    "elsasser-fig1": (2, 1.2),
    "elsasser-fig2": (1, 1.1),
    "elsasser-fig3": (1, 1.0),
    "elsasser-fig4": (77, 1.6),
    "elsasser-fig5": (78, 1.7),
    "elsasser-choices": (7, 2.4),
    "ghosh-scaling": (205, 1.0),
    "ghosh-local-balance": (11, 1.0),
    "ghosh-dynamic": (10, 1.6),
    "sos-iou-readings": (14, 1.6),
    "quasirandom": (17, 0.9),
    "rotor-router": (14, 1.0),
    "randomized-diffusion": (3, 1.0),
    "random-matching": (11, 1.5),
    "flow-imitation": (2, 1.3),
    "stratified-diffusion": (3, 1.0),
    "pairwise-averaging": (39, 1.1),
    "rsw-lower-bound": (1, 1.0),
    "modern-vs-classic": (19, 1.9),
}
