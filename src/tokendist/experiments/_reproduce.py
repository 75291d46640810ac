"""Reproductions of the papers' tables, figures and worked examples: one registered entry each.

An entry is a function ``fn(ctx) -> Reproduction``; ``ctx`` says where to write figures, whether a
quick (smaller) version is wanted, the seed and a progress callback. ``tokendist reproduce NAME``
runs one, ``tokendist reproduce all`` runs every entry. Each :class:`Reproduction` carries the
tables it regenerated, the figures it drew and the paper's claims it checked, each with whether it
holds here: a failed claim is reported, never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..registry import Registry

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
    name: str
    title: str
    paper: str
    fn: Callable[[ReproContext], Reproduction]


REPRODUCTIONS: Registry[Entry] = Registry("reproduce entry")


def reproduction(name: str, title: str, paper: str):
    """Register ``fn(ctx) -> Reproduction`` as ``tokendist reproduce NAME``."""

    def deco(fn):
        REPRODUCTIONS.add(name, Entry(name, title, paper, fn))
        return fn

    return deco


def run_reproduction(name: str, ctx: ReproContext | None = None) -> Reproduction:
    from . import _modules  # noqa: F401  (registers every entry)

    return REPRODUCTIONS.get(name).fn(ctx or ReproContext())
