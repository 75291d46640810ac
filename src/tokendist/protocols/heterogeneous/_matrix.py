"""The diffusion matrix M = I - L S^{-1} of a heterogeneous network (Elsässer, Monien, Schamberger 2006).

Section 2 of the paper: node speeds ``s_i`` (the diagonal of S), edge coefficients
``c_ij = 1 / (c * max(d_i, d_j))`` with a constant ``c`` in (1, 2], the Laplacian ``L = D - A`` of those
coefficients, and the First Order Scheme of equation (3)::

    w_i^k = w_i^{k-1} - sum_{j in N(i)} c_ij (w_i^{k-1} / s_i - w_j^{k-1} / s_j).

So ``M_ij = c_ij / s_j`` on an edge and ``M_ii = 1 - sum_j c_ij / s_i``. (The sentence after equation
(3) writes the diagonal as ``1 - sum c_ij / s_j``; that matrix is not column-stochastic and would not
conserve load. tokendist follows equation (3), whose matrix is ``I - L S^{-1}`` as stated.)

Every function here works on whole arrays; nothing builds a per-node object. The spectral helpers
(``gamma``, ``mu_2``, ``lambda_2``) use the symmetric similar matrix ``S^{-1/2} L S^{-1/2}``.
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ...errors import TokendistError

__all__ = ["SPEED_SCALES", "scaled_speeds", "node_degrees", "edge_coefficients", "diagonal", "check_diagonal",
           "raise_on_negative_diagonal",
           "fos_flows", "apply_flows", "EdgeIndex", "regular_slot_tables", "regular_flow_sums", "diffusion_matrix",
           "spectrum", "diffusion_norm", "sos_beta",
           "DENSE_LIMIT", "LANCZOS_TOL"]

#: How the given speeds enter M (the ideal loads ``W s_i / sum s`` do not depend on it).
#: ``raw``: as given (equation (3) literally); ``min``: divided by the smallest speed, so that
#: ``1 <= s_i`` as Section 2 assumes; ``mean``: the normalised speeds ``n s_i / sum s`` of Section 3.
SPEED_SCALES = ("raw", "min", "mean")


def scaled_speeds(graph, scale: str = "raw") -> np.ndarray:
    """The speeds used in M: ``graph.speeds`` (all 1 when None) scaled as :data:`SPEED_SCALES` says."""
    if graph.speeds is None:
        return np.ones(graph.n)
    s = np.asarray(graph.speeds, dtype=np.float64)
    if scale == "raw":
        return s.copy()
    if scale == "min":
        return s / s.min()
    if scale == "mean":
        return s * (graph.n / s.sum())
    raise TokendistError(f"unknown speed scale {scale!r}; choose one of {', '.join(SPEED_SCALES)}")


def node_degrees(graph) -> np.ndarray:
    """Degrees ``d_i``: the number of neighbours, or the weighted degree ``sum_j cap_ij`` with capacities."""
    if graph.capacities is None:
        return graph.degrees.astype(np.float64)
    return (np.bincount(graph.u, weights=graph.capacities, minlength=graph.n)
            + np.bincount(graph.v, weights=graph.capacities, minlength=graph.n))


def edge_coefficients(graph, c: float, degrees: np.ndarray | None = None) -> np.ndarray:
    """``c_e = cap_e / (c * max(d_u, d_v))`` for every edge (Sec. 2; ``cap_e = 1`` without capacities).

    Parameters
    ----------
    graph : Graph
        The step's graph.
    c : float
        The paper's constant, ``c in (1, 2]``.
    degrees : ndarray, optional
        ``d_i`` to use (default :func:`node_degrees` of ``graph``: degrees recomputed on the current
        graph, as Section 4 does on dynamic networks).
    """
    d = node_degrees(graph) if degrees is None else degrees
    cap = 1.0 if graph.capacities is None else graph.capacities
    if graph.m == 0:
        return np.zeros(0)
    return cap / (c * np.maximum(d[graph.u], d[graph.v]))


def diagonal(graph, alpha: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The diagonal of M: ``1 - sum_j c_ij / s_i``."""
    out = np.bincount(graph.u, weights=alpha, minlength=graph.n) + np.bincount(graph.v, weights=alpha, minlength=graph.n)
    return 1.0 - out / s


def check_diagonal(graph, alpha, s, *, name: str, c: float, allow: bool) -> np.ndarray:
    """Raise a one-line :class:`TokendistError` if M has a negative diagonal entry (unless ``allow``).

    A negative ``M_ii`` means node i would send more than it holds in FOS (the flows out of i add up
    to ``(1 - M_ii) w_i`` when its neighbours are empty) and M is no transition matrix for the random
    walks of Section 3. With ``c_ij = 1/(c max(d_i, d_j))``, ``sum_j c_ij <= 1/c``, so ``s_i >= 1/c``
    for every i is enough; the paper assumes ``1 <= s_i`` (Sec. 2).
    """
    diag = diagonal(graph, alpha, s)
    raise_on_negative_diagonal(diag, s, name=name, c=c, allow=allow)
    return diag


def raise_on_negative_diagonal(diag, s, *, name: str, c: float, allow: bool) -> None:
    """The error of :func:`check_diagonal` for a diagonal of M computed elsewhere (the kernels' path)."""
    if not allow and diag.size and diag.min() < -1e-12:
        i = int(np.argmin(diag))
        raise TokendistError(
            f"{name}: M = I - L S^-1 has a negative diagonal entry M[{i},{i}] = {diag[i]:.4g} (speed {s[i]:.4g}, "
            f"c = {c}); use a larger c, --param speed_scale=min (speeds >= 1 as the paper assumes), "
            f"or --param allow_invalid=true")


def fos_flows(graph, alpha: np.ndarray, s: np.ndarray, loads: np.ndarray) -> np.ndarray:
    """The FOS flow of equation (3) on every edge, positive from ``u`` to ``v``."""
    x = loads / s
    return alpha * (x[graph.u] - x[graph.v])


def apply_flows(graph, loads: np.ndarray, flows: np.ndarray) -> np.ndarray:
    """``loads`` after sending ``flows`` (signed per edge); integer loads stay integers."""
    if loads.dtype.kind in "iu":
        # Integer flows summed in int64: bincount adds in float64, which lost tokens once the sums
        # passed 2**53 (kernel=numpy on large loads).
        f = np.rint(flows).astype(np.int64) if np.asarray(flows).dtype.kind == "f" else np.asarray(flows, np.int64)
        out = loads.astype(np.int64, copy=True)
        np.add.at(out, graph.v, f)
        np.subtract.at(out, graph.u, f)
        return out.astype(loads.dtype, copy=False)
    delta = np.bincount(graph.v, weights=flows, minlength=graph.n) - np.bincount(graph.u, weights=flows, minlength=graph.n)
    return loads + delta


class EdgeIndex:
    """A graph's edge ends as ``intp`` index arrays, made once per graph for the numpy reference steps.

    numpy converts a graph's int32 indices to ``intp`` on every gather and ``bincount`` (a gather of
    512 values costs 2 us with them, 0.6 us with ``intp`` ones, on this machine): the references of
    ``sos`` and ``sos-iou`` keep these. :meth:`fos_flows` and :meth:`apply_flows` are the module's
    functions of the same names on real values: the same operations on the same values in the
    same order, so the same bits.

    Parameters
    ----------
    graph : Graph
        The step's graph.
    alpha : ndarray
        Its coefficients ``c_e`` (:func:`edge_coefficients`).
    """

    def __init__(self, graph, alpha: np.ndarray):
        self.graph = graph
        self.n, self.m = graph.n, graph.m
        #: Both ends of every edge, ``u`` then ``v``: ``x[ends]`` gathers both in one call.
        self.ends = np.stack((graph.u, graph.v)).astype(np.intp)
        self.u, self.v = self.ends
        # One coefficient on every edge (a regular graph without capacities): a scalar makes the same products.
        self.alpha = alpha[0] if alpha.size and bool(np.all(alpha == alpha[0])) else alpha
        #: The largest degree (number of edges at a node).
        self.degree = int(graph.degrees.max()) if graph.n else 0

    def fos_flows(self, x: np.ndarray) -> np.ndarray:
        """:func:`fos_flows` from ``x = w / s``: ``c_e (x_u - x_v)`` on every edge."""
        xe = x[self.ends]
        return self.alpha * (xe[0] - xe[1])

    def net(self, flows: np.ndarray) -> np.ndarray:
        """Per node, ``bincount(v, flows) - bincount(u, flows)``: what arrives minus what leaves (float64).

        Integer-valued flows give the exact integers while every partial sum stays below ``2**53``
        (at most the largest degree times the largest flow).
        """
        return np.bincount(self.v, flows, self.n) - np.bincount(self.u, flows, self.n)

    def apply_flows(self, loads: np.ndarray, flows: np.ndarray) -> np.ndarray:
        """:func:`apply_flows` of real-valued ``loads``: ``loads + (bincount(v, f) - bincount(u, f))``."""
        return loads + self.net(flows)


def regular_slot_tables(graph, rows):
    """The slot table of :func:`regular_flow_sums` for a regular graph, else None.

    ``rows`` is the graph's :class:`tokendist.kernels._rows.RowOrder`. Returns ``(table, values)``:
    ``table`` of shape ``(D, 2, n)`` points into ``values``, room for ``[y, -y, 0]`` (``y`` the
    per-edge flows). Column i lists row i's slots in CSR order: in ``[:, 0, i]`` its lower slots
    (the slot's neighbour comes before i: the edge flows into i when positive) as ``-y``, what
    leaves i over them; in ``[:, 1, i]`` its upper slots as ``y``; each group from the top and
    followed by the zero.
    """
    if not rows.regular or graph.m == 0:
        return None
    n, d, m = graph.n, rows.degree, graph.m
    edge = graph.csr_edges.reshape(n, d).astype(np.intp)
    low = rows.lower.reshape(n, d)
    first_up = np.argsort(~low, axis=1, kind="stable")  # per row: the lower slots, then the upper ones
    grouped = np.take_along_axis(edge, first_up, axis=1)
    lows = low.sum(axis=1)[:, None]
    k = np.arange(d)[None, :]
    table = np.empty((d, 2, n), dtype=np.intp)
    table[:, 0, :] = np.where(k < lows, grouped + m, 2 * m).T
    table[:, 1, :] = np.where(k < d - lows, np.take_along_axis(grouped, np.minimum(k + lows, d - 1), axis=1), 2 * m).T
    values = np.zeros(2 * m + 1)
    return table, values


def regular_flow_sums(tables, y):
    """``(in - out, sent)`` per node of the per-edge flows ``y``, added as the serial kernels add them.

    Row i of the kernels sums the flows of its lower slots (flowing in), of its upper slots
    (flowing out), and what it sends (``max(y, 0)`` on upper slots, ``max(-y, 0)`` on lower
    ones), each from 0.0 slot after slot in CSR order. Here the terms come from the ``(D, 2, n)``
    slot table (:func:`regular_slot_tables`) as the flow out of the row, ``-y`` on a lower slot,
    and each sum adds them slot after slot: numpy reduces along an axis that is not the fastest in
    memory one element after another, from ``initial`` (its pairwise summation is for the fastest
    axis only), so each row's additions are the kernels' up to the sign (``-in`` is summed, and
    rounding is symmetric), the same bits. The zeros after a row's slots leave a sum from 0.0
    unchanged (such a sum is never -0.0).
    """
    table, values = tables
    m = y.shape[0]
    values[:m] = y
    np.negative(y, out=values[m:2 * m])
    terms = values[table]  # (D, 2, n): what leaves each row over its lower slots, over its upper slots
    acc = np.add.reduce(terms, axis=0, initial=0.0)  # (-in, out)
    sends = np.add.reduce(np.maximum(terms, 0.0, out=terms), axis=0, initial=0.0)  # (sent low, sent up)
    # 0.0 - (-in) is in, zero included (a sum from 0.0 is +0.0, never -0.0)
    return (0.0 - acc[0]) - acc[1], sends[1] + sends[0]


def diffusion_matrix(graph, alpha: np.ndarray, s: np.ndarray) -> sp.csr_array:
    """M = I - L S^{-1} as a sparse matrix (column-stochastic: ``1^T M = 1^T``; ``M s = s``)."""
    n = graph.n
    rows = np.concatenate([graph.u, graph.v, np.arange(n)])
    cols = np.concatenate([graph.v, graph.u, np.arange(n)])
    vals = np.concatenate([alpha / s[graph.v], alpha / s[graph.u], diagonal(graph, alpha, s)])
    return sp.coo_array((vals, (rows, cols)), shape=(n, n)).tocsr()


def _symmetric(graph, weights, s) -> sp.csr_array:
    # S^{-1/2} L_w S^{-1/2}, similar to L_w S^{-1}: real spectrum, eigh applies.
    n = graph.n
    lap = sp.coo_array((np.concatenate([-weights, -weights]),
                        (np.concatenate([graph.u, graph.v]), np.concatenate([graph.v, graph.u]))), shape=(n, n)).tocsr()
    deg = np.bincount(graph.u, weights=weights, minlength=n) + np.bincount(graph.v, weights=weights, minlength=n)
    lap = lap + sp.diags_array(deg)
    r = 1.0 / np.sqrt(s)
    return sp.diags_array(r) @ lap @ sp.diags_array(r)


#: Largest n for which the spectrum is computed densely (``eigvalsh``, all eigenvalues, O(n^3)).
DENSE_LIMIT = 2500

#: Relative tolerance of the Lanczos eigenvalues above :data:`DENSE_LIMIT` (ARPACK's ``tol``).
LANCZOS_TOL = 1e-10

_NONE = np.zeros(0)


def _one_blas_thread():
    """Run the block's BLAS calls on one thread (:func:`threadpoolctl.threadpool_limits`).

    Why: the dense eigenvalues of a few hundred nodes take 2-6 ms on one thread, but 2 ms to half
    a second with OpenBLAS's default threads when another process holds the second core (its
    threads wait for each other at every blocked step; a ``tokendist compare`` runs two workers).
    And the eigenvalues' last bits depend on the number of BLAS threads, so ``gamma``, SOS's
    ``beta`` and every SOS run would depend on the machine's cores; on one thread they do not.
    """
    return threadpool_limits(limits=1, user_api="blas")


def _eigenvalues(a: sp.csr_array) -> np.ndarray:
    """All eigenvalues of the symmetric ``a`` (dense ``eigvalsh`` on one BLAS thread; only for n <= DENSE_LIMIT)."""
    with _one_blas_thread():
        return np.linalg.eigvalsh(a.toarray())


#: Dense ``(mu_2, mu_n)`` by the digest of the graph, coefficients and speeds: a run's protocol
#: computes them at reset, and a small run resets twice (tokendist.kernels._choice), a compare
#: resets ``sos`` and ``sos-iou`` on the same graph. The same input gives the same bits.
_DENSE_NORMS: dict = {}
_DENSE_NORMS_KEPT = 16


def _dense_extremes(graph, alpha: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    """``(mu_2, mu_n)`` of M from all eigenvalues of ``S^-1/2 L S^-1/2`` (dense, one BLAS thread; cached)."""
    digest = hashlib.sha256(np.int64(graph.n).tobytes())
    for a in (graph.u, graph.v, alpha, s):
        a = np.ascontiguousarray(a)
        digest.update(str(a.dtype).encode() + np.int64(a.size).tobytes())
        digest.update(a.data)
    key = digest.digest()
    if key not in _DENSE_NORMS:
        lam = _eigenvalues(_symmetric(graph, alpha, s))
        if len(_DENSE_NORMS) >= _DENSE_NORMS_KEPT:
            _DENSE_NORMS.pop(next(iter(_DENSE_NORMS)))
        _DENSE_NORMS[key] = (1.0 - lam[1], 1.0 - lam[-1])
    return _DENSE_NORMS[key]


def _extremes_lanczos(a: sp.csr_array, s: np.ndarray, *, tol: float = LANCZOS_TOL,
                      smallest: bool = True) -> tuple[float, float]:
    """``(mu_2, mu_n)`` of ``M`` from the symmetric ``A = I - a`` (``a = S^-1/2 L S^-1/2``) by Lanczos.

    ``A`` is similar to ``M`` (``A = S^-1/2 M S^1/2``) and has the eigenvalue 1 with the known unit
    eigenvector ``q = sqrt(s)/||sqrt(s)||`` (``M s = s``). ``mu_2`` is the largest eigenvalue of the
    deflated operator ``P A P`` (``P = I - q q^T``, which maps ``q`` to 0 and leaves the rest of the
    spectrum alone), ``mu_n`` the smallest of ``A``. Only matrix-vector products: O(m) memory and
    O(m) work per Lanczos step, no factorisation (the shift-invert solve this replaces did a sparse
    LU whose fill-in made a 300x300 torus take minutes). ARPACK stops when each Ritz value is
    within ``tol`` (relative) of an eigenvalue; the start vector is deterministic.

    ``smallest=False`` skips ``mu_n`` (returned as NaN).

    If every eigenvalue but 1 is negative the deflated operator reports 0 for ``mu_2``; ``gamma``
    is still right then, because ``|mu_n| >= |mu_2|``.
    """
    from scipy.sparse.linalg import LinearOperator

    n = a.shape[0]
    q = np.sqrt(s)
    q = q / np.linalg.norm(q)

    def deflated(x):
        x = np.asarray(x).reshape(-1)
        y = x - q * (q @ x)
        y = y - a @ y
        return y - q * (q @ y)

    # A fixed start vector (no hidden randomness), orthogonal to q.
    v0 = np.cos(np.arange(n) * 0.7548776662466927 + 0.1)
    v0 = v0 - q * (q @ v0)
    op = LinearOperator((n, n), matvec=deflated, dtype=np.float64)
    mu2 = _largest_or_smallest(op, "LA", v0, tol)
    if not smallest:
        return mu2, float("nan")
    ident = LinearOperator((n, n), matvec=lambda x: np.asarray(x).reshape(-1) - a @ np.asarray(x).reshape(-1),
                           dtype=np.float64)
    mun = _largest_or_smallest(ident, "SA", v0, tol)
    return mu2, mun


#: ARPACK restarts allowed before falling back to a fixed-length Lanczos estimate.
ARPACK_MAXITER = 40
#: Above this many nodes ARPACK is skipped: its restarts cost minutes when the gap is tiny.
ARPACK_MAX_N = 200_000
#: Steps of the fallback Lanczos run.
FALLBACK_LANCZOS_STEPS = 300
#: How the last extreme eigenvalue was obtained ("arpack" or "lanczos-300 (inner estimate)").
LAST_METHOD = {"method": "dense"}


def _largest_or_smallest(op, which: str, v0: np.ndarray, tol: float) -> float:
    """The largest (``"LA"``) or smallest (``"SA"``) eigenvalue of the symmetric ``op``.

    ARPACK first, with a bounded number of restarts: on a large 2-D torus the gap below the second
    eigenvalue is tiny and ARPACK would run for many minutes. Without convergence, a plain Lanczos
    run of :data:`FALLBACK_LANCZOS_STEPS` steps (three vectors of memory, no reorthogonalisation)
    gives its extreme Ritz value, which lies inside the spectrum: an estimate from the inside, so
    ``gamma`` is under-estimated and the SOS ``beta`` errs on the small (convergent) side.
    """
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    if op.shape[0] <= ARPACK_MAX_N:
        try:
            value = float(eigsh(op, k=1, which=which, v0=v0, tol=tol, maxiter=ARPACK_MAXITER,
                                return_eigenvectors=False)[0])
            LAST_METHOD["method"] = "arpack"
            return value
        except ArpackNoConvergence:
            pass
    from scipy.linalg import eigvalsh_tridiagonal

    v = v0 / np.linalg.norm(v0)
    v_prev = np.zeros_like(v)
    alphas, betas = [], []
    beta = 0.0
    for _ in range(FALLBACK_LANCZOS_STEPS):
        w = np.asarray(op.matvec(v)).reshape(-1) - beta * v_prev
        a_k = float(v @ w)
        w = w - a_k * v
        alphas.append(a_k)
        beta = float(np.linalg.norm(w))
        if beta < 1e-14:
            break
        betas.append(beta)
        v_prev, v = v, w / beta
    ritz = eigvalsh_tridiagonal(np.array(alphas), np.array(betas[: len(alphas) - 1]))
    LAST_METHOD["method"] = f"lanczos-{len(alphas)} (inner estimate)"
    return float(ritz[-1] if which == "LA" else ritz[0])


def diffusion_norm(graph, alpha: np.ndarray, s: np.ndarray, dense_limit: int = DENSE_LIMIT) -> dict:
    """``mu_2``, ``mu_n`` and ``gamma = max(|mu_2|, |mu_n|)`` of ``M = I - L S^{-1}`` (Lemma 1).

    Dense ``eigvalsh`` of the symmetric similar matrix for ``n <= dense_limit`` (exact to round-off,
    O(n^3); on one BLAS thread and remembered per input: :func:`_dense_extremes`); up to
    :data:`ARPACK_MAX_N`, ARPACK with the known eigenvalue 1 deflated
    (:func:`_extremes_lanczos`, O(m) per iteration); above, one numba Lanczos run of at most
    :data:`FALLBACK_LANCZOS_STEPS` steps that stops when both extreme Ritz values have residuals
    below :data:`LANCZOS_TOL` (:func:`._heterogeneous_sos_gamma.lanczos_extremes`; ``method``
    says ``converged`` or ``inner estimate``). This is all SOS needs for its ``beta``; :func:`spectrum` adds ``lambda_2``.
    """
    if graph.n == 1:
        return {"mu_2": 0.0, "mu_n": 0.0, "gamma": 0.0}
    if graph.n <= dense_limit:
        mu2, mun = _dense_extremes(graph, alpha, s)
        method = "dense"
    elif graph.n <= ARPACK_MAX_N:
        mu2, mun = _extremes_lanczos(_symmetric(graph, alpha, s), s)
        method = LAST_METHOD["method"]
    else:
        # Large graphs: one numba Lanczos run for both ends, on the graph's CSR arrays (no matrix).
        from ._gamma import lanczos_extremes

        coefs = (0, float(alpha[0]), _NONE, _NONE) if graph.m and np.all(alpha == alpha[0]) else (2, 0.0, _NONE, alpha)
        mu2, mun, method = lanczos_extremes(graph, coefs, np.ascontiguousarray(s, dtype=np.float64),
                                            max_steps=FALLBACK_LANCZOS_STEPS, tol=LANCZOS_TOL)
    return {"mu_2": float(mu2), "mu_n": float(mun), "gamma": float(max(abs(mu2), abs(mun))), "method": method}


def spectrum(graph, alpha: np.ndarray, s: np.ndarray) -> dict:
    """Spectral figures of M = I - L S^{-1} and of the generalised Laplacian (Sec. 2, Lemma 1).

    Returns
    -------
    dict
        ``mu_2``, ``mu_n`` (second largest and smallest eigenvalue of M), ``gamma`` (the diffusion norm
        ``max(|mu_2|, |mu_n|)``), ``lambda_2`` (second smallest eigenvalue of the generalised Laplacian
        ``L S^{-1}`` with the graph's capacities as edge weights: the ``lambda_2`` of Lemma 1's
        ``d / lambda_2``) and ``lambda_2_coefficients`` (the same with the weights ``c_ij``, i.e.
        ``1 - mu_2``).

    Notes
    -----
    Dense up to :data:`DENSE_LIMIT` nodes. Above, ``mu_2``/``mu_n`` come from deflated Lanczos
    (:func:`diffusion_norm`) and ``lambda_2`` from Lanczos on ``S^-1/2 L S^-1/2`` shifted so that its
    smallest eigenvalues are the largest (``I - L'/b``, ``b`` the Gershgorin bound on its largest
    eigenvalue), again with the known null vector ``sqrt(s)`` deflated.
    """
    if graph.n == 1:
        return {"mu_2": 0.0, "mu_n": 0.0, "gamma": 0.0, "lambda_2": 0.0, "lambda_2_coefficients": 0.0}
    cap = np.ones(graph.m) if graph.capacities is None else graph.capacities
    if graph.n <= DENSE_LIMIT:
        lam_c = _eigenvalues(_symmetric(graph, alpha, s))
        lam = _eigenvalues(_symmetric(graph, cap, s))
        mu2, mun = 1.0 - lam_c[1], 1.0 - lam_c[-1]
        lam2, lam2_c = lam[1], lam_c[1]
    else:
        norm = diffusion_norm(graph, alpha, s)
        mu2, mun = norm["mu_2"], norm["mu_n"]
        lam2_c = 1.0 - mu2
        lap = _symmetric(graph, cap, s)
        # Gershgorin: every eigenvalue of lap is at most the largest absolute row sum.
        bound = float(np.abs(lap).sum(axis=1).max())
        lam2 = (1.0 - _extremes_lanczos(lap / bound, s, smallest=False)[0]) * bound
    return {"mu_2": float(mu2), "mu_n": float(mun), "gamma": float(max(abs(mu2), abs(mun))),
            "lambda_2": float(lam2), "lambda_2_coefficients": float(lam2_c)}


def sos_beta(gamma: float) -> float:
    """``beta = 2 / (1 + sqrt(1 - gamma^2))`` (Lemma 1; equation (4) writes ``mu_2`` for ``gamma``)."""
    return 2.0 / (1.0 + np.sqrt(max(0.0, 1.0 - gamma * gamma)))
