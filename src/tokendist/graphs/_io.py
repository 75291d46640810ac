"""Graph files: the plain edge-list text format, a JSON form, and the ``file:PATH`` topology family.

Edge-list format (``.txt``, ``.edges``, anything not ending in ``.json``)::

    # comments start with '#', anywhere on a line; blank lines are ignored
    n 5          # optional header, before the first edge: the number of nodes
    m 2          # optional header, before the first edge: the number of edges (checked at the end,
                 # so that a truncated file is an error, not a smaller graph)
    0 1          # one edge a line: two node ids 0 <= id < n, separated by spaces or tabs
    1 2

Without the header, ``n`` is the largest id plus one; a file with neither a header nor an edge is
an error. Self-loops and repeated edges (in either
orientation) are errors. JSON form: ``{"n": 5, "edges": [[0, 1], [1, 2]], "speeds": [...] or null,
"capacities": [...] or null, "spec": "..."}``. Every problem raises :class:`GraphFileError`
(a :class:`TokendistError`) with one line naming the file, the line where there is one, and what is
wrong.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np

from .._files import GRAPH_FILE_LIMIT, atomic_path, read_text
from ..errors import GraphFileError, TokendistError
from ._model import Graph
from ._specs import topology

__all__ = ["read_edgelist", "write_edgelist", "read_graph_json", "write_graph_json", "graph_to_json",
           "read_graph_file"]

_MAX_ID = 2**31 - 2
_MAX_NODES = 200_000_000  # as for spec strings (graphs._specs.check_size)
_NUM = re.compile(r"^[+-]?[0-9]+$")  # ASCII digits: \d also matches non-ASCII digits ("\u0664" is 4)


def _read_text(path) -> str:
    # A regular file of bounded size only (/dev/zero or a named pipe would be read for ever).
    return read_text(path, "graph", GRAPH_FILE_LIMIT, GraphFileError)


def _parse_id(token: str, where: str) -> int:
    if not _NUM.match(token):
        raise GraphFileError(f"{where}: {token[:40]!r} is not a node id (a non-negative integer)")
    if len(token) > 12:
        raise GraphFileError(f"{where}: node id {token[:20]}... is too large")
    x = int(token)
    if x < 0:
        raise GraphFileError(f"{where}: negative node id {x}")
    if x > _MAX_ID:
        raise GraphFileError(f"{where}: node id {x} is too large")
    return x


def parse_edgelist(text: str, name: str = "<text>") -> Graph:
    """Parse the edge-list format from a string; ``name`` is used in error messages."""
    n = None
    m = None
    a, b, lines = [], [], []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0]
        parts = line.split()
        if not parts:
            continue
        where = f"{name}:{lineno}"
        if parts[0].lower() == "n":
            if len(parts) != 2:
                raise GraphFileError(f"{where}: malformed header, expected 'n N'")
            if n is not None:
                raise GraphFileError(f"{where}: second 'n' header")
            if a:
                raise GraphFileError(f"{where}: the 'n N' header must come before the first edge")
            n = _parse_id(parts[1], where)
            if n < 1:
                raise GraphFileError(f"{where}: a graph needs at least one node (n = {n})")
            if n > _MAX_NODES:
                raise GraphFileError(f"{where}: n {n} is more nodes than tokendist builds ({_MAX_NODES:,})")
            continue
        if parts[0].lower() == "m":
            if len(parts) != 2 or m is not None or a:
                raise GraphFileError(f"{where}: malformed or misplaced 'm M' header (once, before the first edge)")
            if not _NUM.match(parts[1]) or len(parts[1]) > 12:
                raise GraphFileError(f"{where}: {parts[1][:40]!r} is not an edge count")
            m = int(parts[1])
            continue
        if len(parts) != 2:
            raise GraphFileError(f"{where}: malformed line {line.strip()[:60]!r}, expected two node ids 'u v'")
        x, y = _parse_id(parts[0], where), _parse_id(parts[1], where)
        if n is not None and max(x, y) >= n:
            raise GraphFileError(f"{where}: node id {max(x, y)} out of range 0..{n - 1} (header says n {n})")
        if x == y:
            raise GraphFileError(f"{where}: self-loop at node {x}")
        a.append(x)
        b.append(y)
        lines.append(lineno)
    if m is not None and m != len(a):
        raise GraphFileError(f"{name}: the header says m {m} but the file has {len(a)} edges (truncated?)")
    if n is None and not a:
        raise GraphFileError(f"{name}: no edges and no 'n N' header: not a graph file")
    ea, eb = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if n is None:
        n = int(max(ea.max(), eb.max())) + 1
    lo, hi = np.minimum(ea, eb), np.maximum(ea, eb)
    key = lo * n + hi
    order = np.argsort(key, kind="stable")
    ks = key[order]
    dup = np.flatnonzero(ks[1:] == ks[:-1])
    if dup.size:
        # Report the duplicate that comes first in the file.
        second = order[dup + 1]
        first = order[dup]
        k = int(np.argmin(second))
        e2, e1 = second[k], first[k]
        raise GraphFileError(f"{name}:{lines[e2]}: duplicate edge ({lo[e2]}, {hi[e2]}), first given on line {lines[e1]}")
    return Graph(n, lo[order], hi[order])


def read_edgelist(path) -> Graph:
    """Read a graph from the edge-list text format (see the module docstring).

    Raises
    ------
    GraphFileError
        Missing or unreadable file, binary content, a malformed line, a negative or out-of-range id,
        a self-loop or a repeated edge; the message names the file and the line.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("n 3\\n0 1\\n1 2  # a path\\n")
    >>> g = read_edgelist(p); (g.n, g.m)
    (3, 2)
    """
    g = parse_edgelist(_read_text(path), str(path))
    g.spec = f"file:{path}"
    return g


def write_edgelist(graph: Graph, path, *, comment: str | None = None) -> None:
    """Write ``graph`` in the edge-list format, with an ``n`` header (so isolated nodes survive).

    Speeds and capacities are not part of this format; use :func:`write_graph_json` for them.
    """
    head = f"# {comment or graph.spec or 'tokendist graph'}\n# nodes {graph.n}, edges {graph.m}\n{_header(graph)}"
    # Atomically (a temporary name, then a rename): an interrupted export leaves no partial file.
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write(head)
        if graph.m:
            np.savetxt(f, np.stack([graph.u, graph.v], axis=1), fmt="%d")


def _header(graph: Graph) -> str:
    """The ``n N`` and ``m M`` header lines (the reader checks the edge count against ``m``)."""
    return f"n {graph.n}\nm {graph.m}\n"


def edgelist_text(graph: Graph) -> str:
    """The edge-list file content as a string (for writing to stdout)."""
    import io

    buf = io.StringIO()
    buf.write(f"# {graph.spec or 'tokendist graph'}\n# nodes {graph.n}, edges {graph.m}\n{_header(graph)}")
    if graph.m:
        np.savetxt(buf, np.stack([graph.u, graph.v], axis=1), fmt="%d")
    return buf.getvalue()


def graph_to_json(graph: Graph) -> dict:
    """The JSON form: ``{"n", "edges", "speeds", "capacities", "spec"}`` (positions when present)."""
    out = {"n": graph.n, "spec": graph.spec, "edges": np.stack([graph.u, graph.v], axis=1).tolist(),
           "speeds": None if graph.speeds is None else graph.speeds.tolist(),
           "capacities": None if graph.capacities is None else graph.capacities.tolist()}
    if graph.positions is not None:
        out["positions"] = graph.positions.tolist()
    return out


def write_graph_json(graph: Graph, path) -> None:
    """Write the JSON form of ``graph`` to ``path``."""
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        json.dump(graph_to_json(graph), f)
        f.write("\n")


def _numbers(obj, key: str, length: int, name: str):
    val = obj.get(key)
    if val is None:
        return None
    if not isinstance(val, list) or len(val) != length:
        raise GraphFileError(f"{name}: '{key}' must be a list of {length} numbers")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in val):
        raise GraphFileError(f"{name}: '{key}' must hold finite positive numbers")
    return np.asarray(val, dtype=np.float64)


#: The keys of the JSON form (what :func:`graph_to_json` writes).
_JSON_KEYS = {"n", "spec", "edges", "speeds", "capacities", "positions"}


def parse_graph_json(text: str, name: str = "<json>") -> Graph:
    """Parse the JSON form (validated like an edge list; errors name the file and the edge)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphFileError(f"{name}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise GraphFileError(f"{name}: invalid JSON (nested too deeply)") from None
    if not isinstance(obj, dict) or "edges" not in obj:
        raise GraphFileError(f"{name}: expected a JSON object with 'n' and 'edges'")
    unknown = sorted(set(obj) - _JSON_KEYS)
    if unknown:  # a misspelt key ('speed') would be silently ignored
        raise GraphFileError(f"{name}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_JSON_KEYS))})")
    n = obj.get("n")
    edges = obj["edges"]
    if not isinstance(edges, list):
        raise GraphFileError(f"{name}: 'edges' must be a list of [u, v] pairs")
    for k, e in enumerate(edges):
        if not (isinstance(e, list) and len(e) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
            raise GraphFileError(f"{name}: edge {k} is {json.dumps(e)[:40]}, expected [u, v] with integer ids")
        if e[0] < 0 or e[1] < 0:
            raise GraphFileError(f"{name}: edge {k}: negative node id {min(e)}")
        if e[0] > _MAX_ID or e[1] > _MAX_ID:
            raise GraphFileError(f"{name}: edge {k}: node id {max(e)} is too large")
    if n is None:
        n = max((max(e) for e in edges), default=0) + 1
    if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > _MAX_NODES:
        raise GraphFileError(f"{name}: 'n' must be an integer from 1 to {_MAX_NODES:,}")
    ea = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if ea.size and ea.max() >= n:
        k = int(np.flatnonzero(ea.max(axis=1) >= n)[0])
        raise GraphFileError(f"{name}: edge {k}: node id {int(ea[k].max())} out of range 0..{n - 1}")
    speeds = _numbers(obj, "speeds", n, name)
    caps = _numbers(obj, "capacities", len(edges), name)
    loops = np.flatnonzero(ea[:, 0] == ea[:, 1]) if ea.size else []
    if len(loops):
        raise GraphFileError(f"{name}: edge {int(loops[0])}: self-loop at node {int(ea[loops[0], 0])}")
    try:
        g = Graph.from_edges(n, ea, speeds=speeds, capacities=caps)
    except TokendistError as exc:
        raise GraphFileError(f"{name}: {exc}") from None
    pos = obj.get("positions")
    if pos is not None:
        try:
            arr = np.asarray(pos, dtype=np.float64)
        except (TypeError, ValueError):
            raise GraphFileError(f"{name}: 'positions' must be a list of coordinate lists") from None
        if arr.ndim != 2 or arr.shape[0] != n or not np.all(np.isfinite(arr)):
            raise GraphFileError(f"{name}: 'positions' must be {n} lists of finite coordinates")
        g = Graph(g.n, g.u, g.v, speeds=g.speeds, capacities=g.capacities, positions=arr)
    return g


def read_graph_json(path) -> Graph:
    """Read the JSON form written by :func:`write_graph_json` (or ``tokendist graph export --format json``)."""
    g = parse_graph_json(_read_text(path), str(path))
    g.spec = f"file:{path}"
    return g


def read_graph_file(path) -> Graph:
    """Read a graph file: JSON if the name ends in ``.json``, otherwise the edge-list format."""
    return read_graph_json(path) if str(path).lower().endswith(".json") else read_edgelist(path)


@topology("file", "file:PATH", "graph read from a file: edge list ('u v' a line, '# comments', optional 'n N'), or .json")
def _file_spec(arg, rng):
    if not arg:
        raise GraphFileError("file: needs a path, e.g. file:net.txt")
    return read_graph_file(os.path.expanduser(arg))
