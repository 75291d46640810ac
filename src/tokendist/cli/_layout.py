"""Tables that fit the terminal they print to: split into column groups, never cut.

rich shrinks a table that is wider than the console by cutting cells ("thres…", "17,0…"). The
commands with many columns (``compare``, ``algos``, ``reproduce list``) instead choose a layout:
the columns come in named groups, and the groups are packed into as few tables as fit the width,
each table repeating the key column (the algorithm's name). Text columns (titles, parameter
lists) wrap at spaces; number columns never wrap. ``--wide`` puts every column in one table at its
natural width, whatever the terminal.

The width is the terminal's (rich reads ``COLUMNS`` and the terminal size); piped output, which
has no width of its own, is laid out for :data:`PIPE_WIDTH` columns unless ``COLUMNS`` says
otherwise.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["Col", "Group", "terminal_width", "fit_tables", "print_fitted", "PIPE_WIDTH"]

#: Width assumed for piped output (a log, a report) when ``COLUMNS`` is not set.
PIPE_WIDTH = 100
# Wide enough that rich never shrinks a table while we measure it.
_MEASURE = Console(width=100_000, file=open(os.devnull, "w"), color_system=None)


@dataclass
class Col:
    """One column: a header, its cells (already formatted), alignment and whether text may wrap."""

    header: str
    cells: list
    justify: str = "right"
    wrap: bool = False


@dataclass
class Group:
    """Columns that belong together (shown in one table when they fit); ``label`` names the table."""

    label: str
    cols: list = field(default_factory=list)


def terminal_width(stream=None) -> int:
    """The width to lay tables out for: the terminal's, ``COLUMNS``, or :data:`PIPE_WIDTH` when piped."""
    stream = sys.stdout if stream is None else stream
    columns = os.environ.get("COLUMNS", "")
    if columns.isascii() and columns.isdigit() and int(columns) > 0:  # isdigit() alone takes "\u00b2"
        return int(columns)
    try:
        if stream.isatty():
            return Console(file=stream).width
    except (AttributeError, ValueError):
        pass
    return PIPE_WIDTH


def _table(title, key: Col, cols) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for c in [key, *cols]:
        # A number column never wraps, and neither does its header: rich would otherwise count the
        # header at its longest word and cut it ("wall…") when the table is exactly the width.
        t.add_column(c.header, justify=c.justify, no_wrap=not c.wrap, overflow="fold" if c.wrap else "ellipsis",
                     min_width=None if c.wrap else len(c.header))
    for i in range(len(key.cells)):
        t.add_row(*[str(c.cells[i]) for c in [key, *cols]])
    return t


def _min_width(table: Table) -> int:
    return _MEASURE.measure(table).minimum


def _natural_width(table: Table) -> int:
    return _MEASURE.measure(table).maximum


def fit_tables(title: str, key: Col, groups, width: int, *, wide: bool = False) -> list[Table]:
    """Pack the column ``groups`` into tables no wider than ``width`` (one table when ``wide``).

    A group goes whole into the current table if it fits, else starts a new one; a group wider
    than ``width`` on its own is split column by column. A table's width is rich's minimum
    rendering width: number columns at full width, text columns at their longest word.
    """
    cols_all = [c for g in groups for c in g.cols]
    if wide:
        return [_table(title, key, cols_all)]
    chunks: list[tuple[list, list]] = []  # (labels, cols)
    labels, cur = [], []

    def fits(cols) -> bool:
        return _min_width(_table(None, key, cols)) <= width

    for g in groups:
        if fits(cur + g.cols):
            cur += g.cols
            labels.append(g.label)
            continue
        if cur:
            chunks.append((labels, cur))
            labels, cur = [], []
        if fits(g.cols):
            labels, cur = [g.label], list(g.cols)
            continue
        part = []
        for c in g.cols:
            if part and not fits(part + [c]):
                chunks.append(([g.label], part))
                part = []
            part.append(c)
        labels, cur = [g.label], part
    if cur:
        chunks.append((labels, cur))
    tables = []
    for labs, cols in chunks:
        labs = [lab for lab in labs if lab]
        sub = ", ".join(dict.fromkeys(labs))
        head = title if len(chunks) == 1 or not sub else f"{title} ({sub})"
        tables.append(_table(head, key, cols))
    return tables


def print_fitted(title: str, key: Col, groups, *, wide: bool = False, notes=(), width: int | None = None,
                 file=None) -> None:
    """Print ``groups`` as tables fitting the terminal, then ``notes`` (abbreviations) once, wrapped."""
    width = terminal_width(file) if width is None else width
    tables = fit_tables(title, key, groups, width, wide=wide)
    out_width = max([width] + [_natural_width(t) for t in tables]) if wide else width
    console = Console(width=out_width, file=file if file is not None else sys.stdout,
                      highlight=False, soft_wrap=False)
    for t in tables:
        console.print(t)
    for note in notes:
        console.print(note, markup=False)
