"""The diffusivity matrix P of Algorithm DIFFUSE (Subramanian and Scherson 1994, Sec. 2).

P is stored as one coefficient per edge (``alpha[e] = P_uv`` for edge ``e = (u, v)``); the diagonal
completes every row to 1. The paper asks of P (Sec. 2, the bulleted conditions after Figure 2):

* ``P_ii >= 1/2`` ("any positive constant will do"; the parameter ``min_diag`` holds the constant);
* for ``i != j``, ``P_ij > 0`` if ``ij`` is an edge and ``P_ij = 0`` otherwise;
* P is symmetric;
* P is stochastic (rows sum to 1).

:func:`diffusivity` builds the per-edge coefficients from a spec and validates them once, at the
boundary; every diffusion protocol and bound then trusts them.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ..._files import DATA_FILE_LIMIT, read_text
from ...errors import TokendistError

__all__ = ["diffusivity", "diffusion_matrix", "default_diffusivity", "validate_diffusivity", "MATRIX_SPECS",
           "coefficient_ratios", "RATIO_DENOMINATOR_LIMIT"]

#: The matrix specs the ``matrix`` parameter accepts.
MATRIX_SPECS = "degree | uniform:W | file:PATH"
_TOL = 1e-9
#: The rounded rules read each ``P_ij`` as the fraction of denominator at most this nearest its float.
RATIO_DENOMINATOR_LIMIT = 1 << 30


def default_diffusivity(graph) -> np.ndarray:
    """Per-edge coefficients ``P_uv = 1 / (2 max(d_u, d_v))`` (the ``degree`` spec).

    Symmetric, and ``P_ii = 1 - sum_j P_ij >= 1 - d_i / (2 d_i) = 1/2`` as Sec. 2 requires. On the
    mesh with wrap-around (every side >= 3) it is the paper's mesh matrix of Sec. 3.2: diagonal 1/2,
    ``P_ij = 1/(4d)``; on the hypercube, ``P_ij = 1/(2d)`` (each side of size 2 carries the two
    wrap-around edges of the mesh reading as one edge).
    """
    d = graph.degrees
    if graph.m == 0:
        return np.zeros(0)
    return 1.0 / (2.0 * np.maximum(d[graph.u], d[graph.v]))


def coefficient_ratios(alpha) -> np.ndarray:
    """Each coefficient as an exact fraction: int64 rows ``(num, den)`` with ``num / den`` the rule's ``P_ij``.

    The rounded schemes of Sec. 4 send ``floor`` or ``ceil`` of ``P_ij (load[i] - load[j])``, a
    rational number; computed in float64 it is wrong once the product passes about 2**30 (a
    tolerance that snapped near-integers would send ``ceil`` for ``floor`` at a difference of
    2**31). The rule therefore reads each ``P_ij`` as the fraction of denominator at most
    :data:`RATIO_DENOMINATOR_LIMIT` nearest to its float: exactly the fraction meant whenever
    one with denominator below 2**20 was meant (``1/(2 max(d_i, d_j))``, ``uniform:1/3``, a
    decimal such as 0.1: another fraction of denominator at most 2**30 lies at least 2**-50 away,
    the float within 2**-54), and within 2**-60 of any other float. The kernels then compute
    ``floor(|d| num / den)`` and its remainder in integers, exact for every int64 load.
    """
    alpha = np.abs(np.asarray(alpha, dtype=np.float64))
    values, where = np.unique(alpha, return_inverse=True)
    out = np.empty((values.size, 2), dtype=np.int64)
    for k, a in enumerate(values.tolist()):
        if not (math.isfinite(a) and 0.0 <= a < 1.0):
            raise TokendistError(f"P has a coefficient {a!r} outside [0, 1)")
        f = Fraction(a).limit_denominator(RATIO_DENOMINATOR_LIMIT)
        out[k] = (f.numerator, f.denominator)
    return out[where.reshape(-1)] if alpha.size else np.zeros((0, 2), dtype=np.int64)


def diffusion_matrix(graph, alpha: np.ndarray) -> sp.csr_array:
    """The N x N matrix P: ``alpha`` on the edges (both directions), the diagonal completing rows to 1."""
    n = graph.n
    off = sp.coo_array((np.concatenate([alpha, alpha]), (np.concatenate([graph.u, graph.v]),
                                                         np.concatenate([graph.v, graph.u]))), shape=(n, n))
    return (off + sp.diags_array(diagonal(graph, alpha))).tocsr()


def diagonal(graph, alpha: np.ndarray) -> np.ndarray:
    """``P_ii = 1 - sum_{j != i} P_ij``."""
    n = graph.n
    return 1.0 - np.bincount(graph.u, weights=alpha, minlength=n) - np.bincount(graph.v, weights=alpha, minlength=n)


def _number(text: str, spec: str) -> float:
    try:
        return float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        raise TokendistError(f"bad diffusivity matrix {spec!r}: {text!r} is not a number (e.g. 0.25 or 1/3)") from None


def _is_int(text: str) -> bool:
    try:
        int(text)
        return True
    except ValueError:
        return False


def _from_dense(graph, dense: np.ndarray, where: str) -> np.ndarray:
    """Per-edge coefficients from a full N x N matrix, checking every condition of Sec. 2 but the diagonal bound."""
    n = graph.n
    if dense.shape != (n, n):
        raise TokendistError(f"{where}: a {dense.shape[0]}x{dense.shape[1] if dense.ndim > 1 else 1} matrix "
                             f"for a graph of {n} nodes")
    if not np.all(np.isfinite(dense)):
        raise TokendistError(f"{where}: P has non-finite entries")
    asym = np.abs(dense - dense.T)
    if asym.size and asym.max() > _TOL:
        i, j = np.unravel_index(int(np.argmax(asym)), asym.shape)
        raise TokendistError(f"{where}: P is not symmetric (P[{i},{j}] = {dense[i, j]:g} but P[{j},{i}] = {dense[j, i]:g})")
    rows = dense.sum(axis=1)
    bad = np.flatnonzero(np.abs(rows - 1.0) > _TOL)
    if bad.size:
        raise TokendistError(f"{where}: P is not stochastic (row {bad[0]} sums to {rows[bad[0]]:g})")
    off = dense.copy()
    np.fill_diagonal(off, 0.0)
    on_edge = np.zeros((n, n), dtype=bool)
    on_edge[graph.u, graph.v] = on_edge[graph.v, graph.u] = True
    wrong = np.argwhere(on_edge & ~(off > 0))
    if wrong.size:
        i, j = wrong[0]
        raise TokendistError(f"{where}: P[{i},{j}] = {off[i, j]:g} but {i}-{j} is an edge (needs P_ij > 0)")
    wrong = np.argwhere(~on_edge & (off != 0))
    if wrong.size:
        i, j = wrong[0]
        raise TokendistError(f"{where}: P[{i},{j}] = {off[i, j]:g} but {i}-{j} is not an edge (needs P_ij = 0)")
    return dense[graph.u, graph.v].astype(np.float64)


def _from_file(graph, path: str) -> np.ndarray:
    """A matrix file: either N rows of N numbers (the full P) or lines ``u v p`` (one per edge)."""
    # A regular file of bounded size (/dev/zero or a named pipe would be read for ever).
    text = read_text(path, "diffusivity matrix", DATA_FILE_LIMIT)
    rows = [line.split("#", 1)[0].split() for line in text.splitlines()]
    rows = [r for r in rows if r]
    spec = f"file:{path}"
    square = bool(rows) and len(rows) == graph.n and all(len(r) == graph.n for r in rows)
    # With 3 nodes, 3 rows of 3 numbers could be either form: an edge list has integer node ids in
    # its first two columns, a connected P has a fractional diagonal entry there.
    if square and graph.n == 3:
        square = not all(_is_int(x) for r in rows for x in r[:2])
    if square:
        return _from_dense(graph, np.array([[_number(x, spec) for x in r] for r in rows]), path)
    if any(len(r) != 3 for r in rows):
        raise TokendistError(f"{path}: expected {graph.n} rows of {graph.n} numbers or lines 'u v p' (one per edge)")
    alpha = np.full(graph.m, np.nan)
    for k, (a, b, p) in enumerate(rows, 1):
        try:
            a, b = int(a), int(b)
        except ValueError:
            raise TokendistError(f"{path}, line {k}: node ids must be integers") from None
        e = graph.edge_index(a, b) if 0 <= min(a, b) and max(a, b) < graph.n and a != b else -1
        if e < 0:
            raise TokendistError(f"{path}, line {k}: {a}-{b} is not an edge of the graph")
        value = _number(p, spec)
        if not np.isnan(alpha[e]) and abs(alpha[e] - value) > _TOL:
            raise TokendistError(f"{path}, line {k}: P is not symmetric (P[{a},{b}] given as {alpha[e]:g} and {value:g})")
        alpha[e] = value
    missing = np.flatnonzero(np.isnan(alpha))
    if missing.size:
        e = missing[0]
        raise TokendistError(f"{path}: no value for edge {graph.u[e]}-{graph.v[e]} (needs P_ij > 0 on every edge)")
    return alpha


def validate_diffusivity(graph, alpha: np.ndarray, *, min_diag: float = 0.5, where: str = "P") -> np.ndarray:
    """Check per-edge coefficients against Sec. 2 (positive on edges, ``P_ii >= min_diag``); return them."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.shape != (graph.m,):
        raise TokendistError(f"{where}: {alpha.size} coefficients for a graph of {graph.m} edges")
    if graph.m and not (np.all(np.isfinite(alpha)) and alpha.min() > 0):
        e = int(np.argmin(np.where(np.isfinite(alpha), alpha, -np.inf)))
        raise TokendistError(f"{where}: P[{graph.u[e]},{graph.v[e]}] = {alpha[e]:g} but it is an edge (needs P_ij > 0)")
    if not min_diag > 0:
        raise TokendistError(f"{where}: min_diag must be positive (Sec. 2: P_ii bounded away from zero), got {min_diag:g}")
    diag = diagonal(graph, alpha)
    if graph.n and diag.min() < min_diag - _TOL:
        i = int(np.argmin(diag))
        raise TokendistError(f"{where}: P[{i},{i}] = {diag[i]:.6g} < {min_diag:g} (Sec. 2 asks P_ii >= 1/2; "
                             f"lower the bound with min_diag=... or use smaller coefficients)")
    return alpha


def diffusivity(graph, spec="degree", *, min_diag: float = 0.5) -> np.ndarray:
    """Validated per-edge diffusion coefficients ``P_uv`` for ``graph``.

    Parameters
    ----------
    graph : Graph
    spec : str or array_like
        ``degree`` (``P_uv = 1/(2 max(d_u, d_v))``), ``uniform:W`` (``P_uv = W`` on every edge;
        ``W`` may be a fraction such as ``1/3``), ``file:PATH`` (N rows of N numbers, or lines
        ``u v p``), or, from Python, an N x N array / sparse matrix or an array of m coefficients.
    min_diag : float
        The lower bound required of every ``P_ii`` (the paper's 1/2).

    Raises
    ------
    TokendistError
        When P is not symmetric, not stochastic, not positive exactly on the edges, or has a
        diagonal entry below ``min_diag``.

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> diffusivity(make_graph("ring:4")).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    if isinstance(spec, str):
        name, _, arg = spec.strip().partition(":")
        if name == "degree" and not arg:
            alpha = default_diffusivity(graph)
        elif name == "uniform" and arg:
            alpha = np.full(graph.m, _number(arg, spec))
        elif name == "file" and arg:
            alpha = _from_file(graph, arg)
        else:
            raise TokendistError(f"bad diffusivity matrix {spec!r}: expected {MATRIX_SPECS}")
        where = spec
    else:
        if sp.issparse(spec):
            spec = spec.toarray()
        arr = np.asarray(spec, dtype=np.float64)
        alpha = _from_dense(graph, arr, "P") if arr.ndim == 2 else arr
        where = "P"
    return validate_diffusivity(graph, alpha, min_diag=min_diag, where=where)
