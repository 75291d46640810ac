"""``mu_2`` and ``mu_n`` of M at scale: one Lanczos run in numba (Elsässer, Monien, Schamberger 2006, Lemma 1).

SOS needs ``gamma = max(|mu_2|, |mu_n|)`` of ``M = I - L S^{-1}`` for its ``beta``. ``M`` is similar
to the symmetric ``A = I - S^{-1/2} L S^{-1/2}``, whose top eigenvalue 1 has the known unit
eigenvector ``q = sqrt(s) / ||sqrt(s)||``. Lanczos started orthogonal to ``q`` (and kept so, by
projecting every new vector) sees only the rest of the spectrum, so the largest Ritz value
estimates ``mu_2`` and the smallest ``mu_n``: both from the same run, where the scipy path ran two.

Each Lanczos step is one numba pass over the graph's CSR arrays (the matrix is never built; the
coefficients are those of the step kernels, :mod:`._heterogeneous_kernels`) and one pass over n.
Every ``CHECK_EVERY`` steps the extreme Ritz pairs of the tridiagonal matrix give residual
estimates ``beta_k |y_k|``; the run stops when both are below ``tol`` (an eigenvalue of ``A`` lies
within that distance of each Ritz value), else after ``max_steps``. Ritz values lie inside the
spectrum, so an unconverged ``gamma`` is an under-estimate (``beta`` errs on the small,
convergent side). No reorthogonalisation (three vectors of memory): lost orthogonality only
duplicates converged Ritz values.
"""

from __future__ import annotations

import numba
import numpy as np

from ...graphs._model import unsigned_view

__all__ = ["lanczos_extremes", "CHECK_EVERY"]

#: Steps between two convergence checks of the tridiagonal matrix.
CHECK_EVERY = 10

_U = np.uint64  # unsigned indices: numba emits no negative-index wrap (see _heterogeneous_kernels)


@numba.njit(cache=True, nogil=True)
def _lanczos_step(indptr, indices, csr_edges, mode, a0, inv, alpha, r, q, v, v_prev, w, beta_prev):
    """One Lanczos step on ``P A P``; returns ``(alpha_k, beta_k)``; ``v_prev, v`` become ``v, w / beta_k``."""
    n = v.shape[0]
    wv = 0.0
    wq = 0.0
    qv = 0.0
    plain = mode == 0 and r.shape[0] == 0  # one coefficient, every speed 1: A v = v - a0 (d v - sum of neighbours)
    for i in range(n):
        start = indptr[i]
        end = indptr[i + 1]
        if plain:
            acc = 0.0
            for k in range(start, end):
                acc += v[indices[k]]
            wi = v[i] - a0 * ((end - start) * v[i] - acc) - beta_prev * v_prev[i]
        else:
            ri = r[i]
            xi = ri * v[i]
            ai = inv[i] if mode == 1 else a0
            acc = 0.0
            for k in range(start, end):
                j = indices[k]
                a = a0 if mode == 0 else (min(ai, inv[j]) if mode == 1 else alpha[csr_edges[k]])
                acc += a * (xi - r[j] * v[j])
            wi = v[i] - ri * acc - beta_prev * v_prev[i]
        w[i] = wi
        wv += wi * v[i]
        wq += wi * q[i]
        qv += v[i] * q[i]
    return _finish(v, v_prev, q, w, wv, wq, qv)


@numba.njit(cache=True, nogil=True)
def _finish(v, v_prev, q, w, wv, wq, qv):
    # The step's second pass: orthogonalise w against v and q, normalise, shift the vectors.
    n = v.shape[0]
    alpha_k = wv
    c = wq - alpha_k * qv  # q . (w - alpha_k v): keeps the Krylov space orthogonal to q
    norm2 = 0.0
    for i in range(n):
        wi = w[i] - alpha_k * v[i] - c * q[i]
        w[i] = wi
        norm2 += wi * wi
    beta_k = np.sqrt(norm2)
    if beta_k > 0.0:
        for i in range(n):
            v_prev[i] = v[i]
            v[i] = w[i] / beta_k
    return alpha_k, beta_k


@numba.njit(cache=True, nogil=True, inline="always")
def _plain_rows(indptr, indices, a0, v, v_prev, q, w, beta_prev, i0, i1, sums):
    # Rows i0..i1-1 of the plain step over their CSR rows; ``sums`` = (w.v, w.q, v.q) so far.
    wv, wq, qv = sums
    for i in range(i0, i1):
        ui = _U(i)
        start = indptr[ui]
        end = indptr[ui + _U(1)]
        acc = 0.0
        for k in range(start, end):
            acc += v[_U(indices[_U(k)])]
        vi = v[ui]
        wi = vi - a0 * ((end - start) * vi - acc) - beta_prev * v_prev[ui]
        w[ui] = wi
        wv += wi * vi
        wq += wi * q[ui]
        qv += vi * q[ui]
    return (wv, wq, qv)


@numba.njit(cache=True, nogil=True)
def _lanczos_stencil_step(indptr, indices, starts, ends, lower, upper, a0, q, v, v_prev, w, beta_prev):
    """:func:`_lanczos_step` in the plain case (one coefficient, unit speeds) on a graph with a stencil.

    Nodes in the stencil's runs (:mod:`tokendist.graphs._stencil`) sum ``v[i + offset]`` over the
    offset tuples, the others their CSR rows: the same additions in the same order, so the same
    ``(alpha_k, beta_k)``, bit for bit. The dot products are summed in a second loop over each run
    (in L1 by then) so that the first one vectorises. 2x faster than :func:`_lanczos_step` on
    torus:1000x1000 (9-10 against 19 ms per step, alternated in one process).
    """
    n = v.shape[0]
    degree = len(lower) + len(upper)
    sums = (0.0, 0.0, 0.0)
    prev = 0
    for r in range(starts.shape[0]):
        sums = _plain_rows(indptr, indices, a0, v, v_prev, q, w, beta_prev, prev, starts[r], sums)
        for i in range(starts[r], ends[r]):
            ui = _U(i)
            acc = 0.0
            for k in range(len(lower)):
                acc += v[_U(i + lower[k])]
            for k in range(len(upper)):
                acc += v[_U(i + upper[k])]
            vi = v[ui]
            w[ui] = vi - a0 * (degree * vi - acc) - beta_prev * v_prev[ui]
        wv, wq, qv = sums
        for i in range(starts[r], ends[r]):
            ui = _U(i)
            wi = w[ui]
            vi = v[ui]
            wv += wi * vi
            wq += wi * q[ui]
            qv += vi * q[ui]
        sums = (wv, wq, qv)
        prev = ends[r]
    wv, wq, qv = _plain_rows(indptr, indices, a0, v, v_prev, q, w, beta_prev, prev, n, sums)
    return _finish(v, v_prev, q, w, wv, wq, qv)


def lanczos_extremes(graph, coefs, s: np.ndarray, *, max_steps: int, tol: float) -> tuple[float, float, str]:
    """``(mu_2, mu_n, method)`` of ``M`` by Lanczos on the deflated ``A`` (see the module docstring).

    Parameters
    ----------
    graph : Graph
    coefs : tuple
        ``(mode, a0, inv, alpha)`` as the step kernels take them (scalar, per node or per edge).
    s : ndarray
        The speeds in M.
    max_steps, tol : int, float
        Step limit and the residual at which both extreme Ritz values count as converged.
    """
    from scipy.linalg import eigh_tridiagonal

    n = graph.n
    mode, a0, inv, alpha = coefs
    r = 1.0 / np.sqrt(s)
    if mode == 0 and np.all(s == 1.0):
        r = np.zeros(0)  # the kernel's plain path
    q = np.sqrt(s)
    q /= np.linalg.norm(q)
    # A fixed start vector (no hidden randomness), orthogonal to q.
    v = np.cos(np.arange(n) * 0.7548776662466927 + 0.1)
    v -= q * (q @ v)
    v /= np.linalg.norm(v)
    v_prev = np.zeros(n)
    w = np.empty(n)
    alphas, betas = [], []
    beta = 0.0
    top = bottom = 0.0
    converged = False
    stencil = graph.stencil if r.shape[0] == 0 else None
    indices = unsigned_view(graph.indices)
    for k in range(1, max_steps + 1):
        if stencil is not None:
            a_k, beta = _lanczos_stencil_step(graph.indptr, indices, stencil.starts, stencil.ends, stencil.lower,
                                              stencil.upper, a0, q, v, v_prev, w, beta)
        else:
            a_k, beta = _lanczos_step(graph.indptr, indices, graph.csr_edges, mode, a0, inv, alpha, r, q, v,
                                      v_prev, w, beta)
        alphas.append(a_k)
        if beta < 1e-14 * max(1.0, abs(a_k)):  # invariant subspace: the Ritz values are exact
            converged = True
            break
        betas.append(beta)
        if k % CHECK_EVERY == 0 or k == max_steps:
            vals, vecs = eigh_tridiagonal(np.array(alphas), np.array(betas[:-1]))
            top, bottom = vals[-1], vals[0]
            if beta * abs(vecs[-1, -1]) <= tol and beta * abs(vecs[-1, 0]) <= tol:
                converged = True
                break
    vals = eigh_tridiagonal(np.array(alphas), np.array(betas[: len(alphas) - 1]), eigvals_only=True)
    top, bottom = float(vals[-1]), float(vals[0])
    method = f"lanczos-{len(alphas)}" + (" (converged)" if converged else " (inner estimate)")
    return top, bottom, method
