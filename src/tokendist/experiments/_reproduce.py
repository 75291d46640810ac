"""Reproductions of the papers' tables, figures and worked examples: one registered entry each.

An entry is a function ``fn(ctx) -> Reproduction``; ``ctx`` says where to write figures, whether a
quick (smaller) version is wanted, the seed and a progress callback. ``tokendist reproduce NAME``
runs one, ``tokendist reproduce all`` runs every entry. An entry whose time goes to independent runs
hands them to :meth:`ReproContext.map`, which runs them one after the other, or on Dask workers when
the context holds a client (``tokendist reproduce NAME --workers N``); the results are the same
either way, in the same order, because each run's seed is part of its arguments. Each :class:`Reproduction` carries the
tables it regenerated, the figures it drew and the paper's claims it checked, each with whether it
holds here: a failed claim is reported, never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..registry import Registry
from ._repro_times import WALL_SECONDS

__all__ = ["Reproduction", "ReproContext", "Claim", "Table", "REPRODUCTIONS", "reproduction", "run_reproduction"]


@dataclass
class Claim:
    """A statement of a paper and whether it holds in this reproduction."""

    statement: str
    holds: bool
    detail: str = ""


@dataclass
class Table:
    title: str
    columns: list
    rows: list


@dataclass
class Reproduction:
    name: str
    title: str
    paper: str
    tables: list[Table] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "name": self.name, "title": self.title, "paper": self.paper,
            "tables": [{"title": t.title, "columns": t.columns, "rows": t.rows} for t in self.tables],
            "figures": self.figures,
            "claims": [{"statement": c.statement, "holds": c.holds, "detail": c.detail} for c in self.claims],
            "notes": self.notes, "data": self.data,
        }


@dataclass
class ReproContext:
    """Where and how a reproduction runs."""

    out: Path | None = None
    quick: bool = False
    seed: int = 0
    progress: Callable[[int, int], None] = lambda done, total: None
    client: Any = None
    """A ``distributed.Client`` to run :meth:`map`'s calls on; None runs them here, one by one."""

    def map(self, fn: Callable, items: Iterable) -> list:
        """``[fn(x) for x in items]``, on the context's Dask client when it has one.

        Parameters
        ----------
        fn : callable
            A module-level function (workers receive it pickled by reference) of one argument
            that carries everything the run needs, its seed included, so that where it runs
            cannot change what it returns.
        items : iterable
            The arguments, one per independent run.

        Returns
        -------
        list
            The results in the order of ``items``, whatever order the workers finish in.
            ``progress(done, total)`` is called after each finished call.
        """
        items = list(items)
        total = len(items)
        if self.client is None:
            results = []
            for x in items:
                results.append(fn(x))
                self.progress(len(results), total)
            return results
        # dask is the optional `sweep` extra: a context holds a client only when it is installed.
        from distributed import as_completed

        futures = self.client.map(fn, items, pure=False)
        where = {f.key: i for i, f in enumerate(futures)}
        results: list = [None] * total
        for done, fut in enumerate(as_completed(futures), start=1):
            results[where[fut.key]] = fut.result()
            fut.release()
            self.progress(done, total)
        return results

    def figure_path(self, filename: str) -> Path | None:
        """Path for a figure in the output folder (None when no folder was asked for).

        Names use hyphens, as the entries and their JSON files do (``elsasser-fig1.json`` next to
        ``elsasser-fig1.png``, not ``elsasser_fig1.png``).
        """
        if self.out is None:
            return None
        self.out.mkdir(parents=True, exist_ok=True)
        return self.out / filename.replace("_", "-")


@dataclass(frozen=True)
class Entry:
    """A registered reproduction; ``seconds`` and ``quick_seconds`` are its measured wall times
    (full and ``--quick``, sequential, from :data:`._repro_times.WALL_SECONDS`; None if not measured)."""

    name: str
    title: str
    paper: str
    fn: Callable[[ReproContext], Reproduction]
    seconds: float | None = None
    quick_seconds: float | None = None


REPRODUCTIONS: Registry[Entry] = Registry("reproduce entry")


def reproduction(name: str, title: str, paper: str):
    """Register ``fn(ctx) -> Reproduction`` as ``tokendist reproduce NAME``."""

    def deco(fn):
        seconds, quick_seconds = WALL_SECONDS.get(name, (None, None))
        REPRODUCTIONS.add(name, Entry(name, title, paper, fn, seconds, quick_seconds))
        return fn

    return deco


def run_reproduction(name: str, ctx: ReproContext | None = None) -> Reproduction:
    from . import _modules  # noqa: F401  (registers every entry)

    return REPRODUCTIONS.get(name).fn(ctx or ReproContext())
