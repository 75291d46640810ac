"""Laplacian spectra: lambda2 (algebraic connectivity), its multiplicity, the Fiedler vector and
the diffusion norm gamma.

The diffusion bounds are stated through the second smallest Laplacian eigenvalue ``lambda2``
(Elsässer, Monien and Schamberger 2006, Sec. 2, Lemma 1: FOS needs ``Theta((d / lambda2) ln(..))``
steps) and through the second largest eigenvalue of the diffusion matrix in absolute value
(``gamma``, the *diffusion norm*, same section; the error bound of Subramanian and Scherson 1994).

Solvers (the method used is returned by :func:`smallest_laplacian_eigenvalues`):

* ``n <= DENSE_LIMIT`` (2000): dense ``numpy.linalg.eigvalsh`` / ``eigh`` of the symmetric matrix;
  all eigenvalues, exact to rounding.
* larger: Lanczos (``scipy.sparse.linalg.eigsh``) in one of two forms (:class:`_Solver`), chosen
  by the reverse Cuthill-McKee envelope of L (an O(m) fill estimate): shift-invert on
  ``(L - sigma I)^{-1}`` with a sparse LU for mesh-like graphs, whose tiny lambda2 makes plain
  Lanczos crawl; otherwise on the flipped matrix ``c I - L`` (``c`` > lambda_max), whose largest
  eigenvalues are the smallest of L. Both deflate the kernel vector ``S^{1/2} 1``. Lanczos finds a
  multiple eigenvalue only a few copies at a time, so lambda2's eigenvectors found so far are
  deflated too and Lanczos runs again until a run finds no further copy: the multiplicity is then
  counted in full (e.g. 12 for ``hypercube:12``, 4 for ``torus:60x60``). After
  ``LANCZOS_MAXITER`` restarts a run stops with a TokendistError rather than hang. When the space
  left after deflation is barely larger than the Lanczos basis, ARPACK breaks down ("error 3");
  that run is then finished densely on the orthogonal complement of the deflated vectors (up to
  ``COMPLEMENT_DENSE_LIMIT`` nodes). Every eigenpair but the kernel's can be a copy: the complete
  graph's lambda2 = n has multiplicity n - 1.

Multiplicity: the number of eigenvalues within ``tol * max(1, lambda_max)`` of ``lambda2``
(default ``tol = 1e-8``), lambda_max bounded by twice the largest weighted degree.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import TokendistError
from ._properties import connected_components

__all__ = ["laplacian", "laplacian_spectrum", "lambda2", "lambda2_pair", "smallest_laplacian_eigenvalues", "fiedler_vector",
           "second_largest_abs_eigenvalue", "DENSE_LIMIT"]

#: Largest n for which the dense eigensolver is used.
DENSE_LIMIT = 2000
#: Restarts of one Lanczos run before giving up with a TokendistError (no silent hang on large
#: meshes, whose lambda2 is tiny compared with lambda_max and converges very slowly).
LANCZOS_MAXITER = 60
#: Largest RCM envelope of L (entries) for which the sparse solver factorises ``L - sigma I`` and
#: uses shift-invert Lanczos; above it, Lanczos on ``c I - L`` (see :class:`_Solver`).
SHIFT_INVERT_PROFILE_LIMIT = 50_000_000


def laplacian(graph, *, generalized: bool = False, symmetric: bool = True) -> sp.csr_array:
    """The Laplacian ``L = D - A`` of ``graph`` as a sparse matrix.

    Parameters
    ----------
    generalized : bool
        False (default): the combinatorial Laplacian of the unweighted graph (every edge weight 1,
        capacities ignored), as in Table 1 of Elsässer et al. 2006. True: the generalised Laplacian
        of a heterogeneous network (Elsässer et al. 2006, Sec. 2): edge weights are the
        capacities ``c_ij`` (1 if none), ``D`` the weighted degrees, and node speeds ``S``
        enter as below.
    symmetric : bool
        Only with ``generalized=True``. The paper's matrix is ``L S^{-1}``, which is not
        symmetric. It is similar to ``S^{-1/2} L S^{-1/2}`` (conjugate by ``S^{1/2}``), so both
        have the same, real, non-negative eigenvalues; True (default) returns the symmetric form,
        which the eigensolvers use; False returns ``L S^{-1}`` itself.

    Examples
    --------
    >>> from tokendist.graphs import path_graph
    >>> laplacian(path_graph(3)).toarray().tolist()
    [[1.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 1.0]]
    """
    n = graph.n
    w = np.ones(graph.m) if (not generalized or graph.capacities is None) else np.asarray(graph.capacities)
    rows = np.concatenate([graph.u, graph.v])
    cols = np.concatenate([graph.v, graph.u])
    a = sp.coo_array((np.concatenate([w, w]), (rows, cols)), shape=(n, n))
    # float64 also without edges (bincount of empty weights gives int64, and scipy then warns).
    deg = np.bincount(rows, weights=np.concatenate([w, w]), minlength=n).astype(np.float64)
    lap = (sp.diags_array(deg) - a).tocsr()
    if generalized and graph.speeds is not None:
        s = np.asarray(graph.speeds, dtype=np.float64)
        if symmetric:
            r = sp.diags_array(1.0 / np.sqrt(s))
            lap = (r @ lap @ r).tocsr()
        else:
            lap = (lap @ sp.diags_array(1.0 / s)).tocsr()
    return lap


def _cache(graph) -> dict:
    # Derived spectral data is stored on the (immutable) graph, like its cached properties, so that
    # lambda2, the Fiedler vector and the expansion bounds share one eigensolve.
    return graph.__dict__.setdefault("_spectrum_cache", {})


def _dense_eigh(graph, generalized):
    key = ("dense", generalized)
    c = _cache(graph)
    if key not in c:
        c[key] = np.linalg.eigh(laplacian(graph, generalized=generalized).toarray())
    return c[key]


def laplacian_spectrum(graph, *, generalized: bool = False) -> np.ndarray:
    """All Laplacian eigenvalues in increasing order (dense; refuses ``n > 4 * DENSE_LIMIT``)."""
    if graph.n > 4 * DENSE_LIMIT:
        raise TokendistError(f"the full spectrum of a {graph.n}-node graph is too expensive; use lambda2()")
    return _dense_eigh(graph, generalized)[0].copy()


def _tol_scale(graph, generalized: bool, tol: float) -> float:
    lap = laplacian(graph, generalized=generalized)
    lam_max_bound = 2.0 * float(np.abs(lap.diagonal()).max()) if graph.n else 0.0
    return tol * max(1.0, lam_max_bound)


def smallest_laplacian_eigenvalues(graph, k: int, *, generalized: bool = False,
                                   vectors: bool = False):
    """The ``k`` smallest Laplacian eigenvalues (increasing), with the solver used.

    Returns ``(values, method)`` or, with ``vectors=True``, ``(values, vectors, method)`` where
    ``vectors[:, i]`` is a unit eigenvector of the symmetric form for ``values[i]``.
    """
    n = graph.n
    k = max(1, min(int(k), n))
    if n <= DENSE_LIMIT or k >= n - 1:
        w, x = _dense_eigh(graph, generalized)
        if vectors:
            return w[:k], x[:, :k], "dense eigh"
        return w[:k], "dense eigh"
    solver = _solver(graph, generalized)
    w, x = _lanczos_smallest(solver, k)
    method = f"{solver.describe(k)}; multiplicities not guaranteed, see lambda2"
    if vectors:
        return w, x, method
    return w, method


def _kernel(graph, generalized):
    # The eigenvector of eigenvalue 0 of the symmetric form: S^{1/2} 1 (normalised).
    s = graph.speeds if (generalized and graph.speeds is not None) else np.ones(graph.n)
    v = np.sqrt(np.asarray(s, dtype=np.float64))
    return v / np.linalg.norm(v)


def _rcm_profile(graph) -> int:
    """Envelope size of the Laplacian in reverse Cuthill-McKee order (an O(m) fill estimate).

    The envelope (for each row, the distance from its first nonzero to the diagonal) bounds the
    fill of a factorisation without pivoting in that order; SuperLU's minimum-degree order does
    better, so this is a conservative test of whether the shift-invert factorisation is cheap.
    About ``n^1.5`` on 2-D meshes, ``n^2`` on expanders and hypercubes.
    """
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    if graph.m == 0:
        return 0
    perm = reverse_cuthill_mckee(graph._structure(), symmetric_mode=True)
    pos = np.empty(graph.n, dtype=np.int64)
    pos[perm] = np.arange(graph.n)
    pu, pv = pos[graph.u], pos[graph.v]
    first = np.arange(graph.n, dtype=np.int64)
    np.minimum.at(first, np.maximum(pu, pv), np.minimum(pu, pv))
    return int((np.arange(graph.n) - first).sum())


class _Solver:
    """How the sparse eigensolves of one Laplacian are done (chosen once per graph, cached).

    ``"shift-invert"``: Lanczos on ``(L - sigma I)^{-1}`` with a small negative ``sigma`` and a
    sparse LU (``splu``, minimum-degree order) of the positive definite ``L - sigma I``: the
    smallest eigenvalues of L become the largest, well separated ones, so a run converges in a
    few dozen solves however small lambda2 is compared with lambda_max (large meshes). Used when
    the RCM envelope of L is at most ``SHIFT_INVERT_PROFILE_LIMIT`` (meshes up to a few 10^5
    nodes, small expanders). ``"flip"``: Lanczos on ``c I - L`` (``c`` > lambda_max), matrix-vector
    products only, for graphs whose factorisation would fill in (hypercubes, expanders, very
    large meshes); fast when lambda2 is not tiny compared with lambda_max (expanders), slow on
    large meshes.
    """

    def __init__(self, lap, kernel, mode):
        self.lap, self.kernel, self.mode = lap, kernel, mode
        n = lap.shape[0]
        self.scale = 2.0 * float(np.abs(lap.diagonal()).max()) + 1.0
        if mode == "shift-invert":
            from scipy.sparse.linalg import splu

            # sigma < 0 keeps L - sigma I positive definite (no pivoting needed); close to 0 so
            # that the ratio (lambda3 - sigma) / (lambda2 - sigma) that drives convergence stays
            # large even when lambda2 is ~1e-5 lambda_max.
            self.sigma = -1e-6 * self.scale
            a = (lap - self.sigma * sp.identity(n, format="csr")).tocsc()
            self.lu = splu(a, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                           options=dict(SymmetricMode=True))

    def describe(self, k):
        if self.mode == "shift-invert":
            return f"sparse shift-invert Lanczos (splu of L + {-self.sigma:.1e} I; k={k})"
        return f"sparse Lanczos eigsh on c I - L (k={k})"


def _solver(graph, generalized) -> _Solver:
    c = _cache(graph)
    key = ("solver", generalized)
    if key not in c:
        lap = laplacian(graph, generalized=generalized)
        profile = _rcm_profile(graph)
        # Mesh-like (small separators: mean envelope width O(sqrt n)) and not too large. On an
        # expander the factor is nearly dense, and lambda2 is not small there anyway.
        mesh_like = profile <= 4.0 * graph.n * np.sqrt(graph.n)
        mode = "shift-invert" if mesh_like and profile <= SHIFT_INVERT_PROFILE_LIMIT else "flip"
        c[key] = _Solver(lap, _kernel(graph, generalized), mode)
    return c[key]


def _lanczos_smallest(solver, k, deflate=None):
    """The k smallest eigenpairs of the symmetric Laplacian orthogonal to the kernel vector (and
    ``deflate``), plus the kernel pair first when ``deflate`` is None."""
    from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

    lap, kernel = solver.lap, solver.kernel
    n = lap.shape[0]
    v = kernel[:, None] if deflate is None else np.column_stack([kernel, deflate])

    def project(x):
        return x - v @ (v.T @ x)

    if solver.mode == "shift-invert":
        def matvec(x):
            # P (L - sigma I)^{-1} P: the deflated directions get eigenvalue 0, the others
            # 1 / (lambda - sigma) > 0, largest for the smallest lambda.
            return project(solver.lu.solve(project(np.asarray(x, dtype=np.float64).reshape(-1))))
    else:
        c = solver.scale

        def matvec(x):
            x = np.asarray(x).reshape(-1)
            return c * x - lap @ x - c * (v @ (v.T @ x))

    op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    kk = max(1, min(k - 1 if deflate is None else k, n - v.shape[1] - 1))
    v0 = project(np.random.default_rng(0).random(n) - 0.5)  # deterministic start
    try:
        w, x = eigsh(op, k=kk, which="LA", v0=v0, tol=1e-12 if solver.mode == "flip" else 1e-10,
                     ncv=min(n - 1, max(2 * kk + 1, 20 if solver.mode == "shift-invert" else 40)),
                     maxiter=LANCZOS_MAXITER)
    except ArpackNoConvergence:
        raise TokendistError(f"sparse eigensolver did not converge in {LANCZOS_MAXITER} restarts (n={n}): lambda2 is "
                             "too small relative to the largest eigenvalue (a large mesh?)") from None
    except ArpackError:
        # ARPACK breaks down ("error 3: no shifts could be applied") when the Krylov space runs
        # out: the space left after deflation is barely larger than the Lanczos basis (trees
        # with many equal eigenvalues forced onto this path, n = 9: 5 of 400 random ones).
        lam, x = _complement_smallest(lap, v, kk)
    else:
        lam = solver.sigma + 1.0 / w if solver.mode == "shift-invert" else solver.scale - w
    order = np.argsort(lam)
    lam, x = lam[order], x[:, order]
    if deflate is None:
        lam = np.concatenate([[0.0], lam])
        x = np.column_stack([kernel, x])
    return lam, x


#: Largest n for which a Lanczos breakdown is finished densely (an n x n orthonormal basis).
COMPLEMENT_DENSE_LIMIT = 20_000


def _complement_smallest(lap, v, k):
    """The ``k`` smallest eigenpairs of the symmetric ``lap`` on the orthogonal complement of the
    orthonormal columns ``v``, densely (when Lanczos breaks down, see :func:`_lanczos_smallest`)."""
    n = lap.shape[0]
    if n > COMPLEMENT_DENSE_LIMIT:
        raise TokendistError(f"sparse eigensolver broke down (n={n}, {v.shape[1]} directions deflated) and the graph "
                             f"is too large ({COMPLEMENT_DENSE_LIMIT} nodes at most) to finish densely")
    q, _ = np.linalg.qr(v, mode="complete")
    c = q[:, v.shape[1]:]
    b = c.T @ (lap @ c)
    w, y = np.linalg.eigh(0.5 * (b + b.T))
    return w[:k], c @ y[:, :k]


def _lambda2_sparse(graph, generalized, eps):
    key = ("sparse-lambda2", generalized, eps)
    c = _cache(graph)
    if key not in c:
        c[key] = _lambda2_sparse_uncached(graph, generalized, eps)
    return c[key]


def _lambda2_sparse_uncached(graph, generalized, eps):
    solver = _solver(graph, generalized)
    w, x = _lanczos_smallest(solver, 6)
    lam = float(w[1])
    found = x[:, np.abs(w - lam) <= eps]
    found = found[:, 1:] if abs(lam) <= eps else found  # the kernel vector is not a new copy
    batch = 4
    # Every eigenpair but the kernel's may be a copy (the complete graph: n - 1 of them; with
    # n - 2 here its last copy went uncounted).
    while found.shape[1] < graph.n - 1:
        q, _ = np.linalg.qr(found)
        # Small batches: measured faster than asking for many eigenpairs at once with the
        # flipped operator (lps:3,17, multiplicity 48: 34 s with batches of 4 against 180 s with
        # batches of 50). A batch that is all copies doubles the next one (up to 32).
        w2, x2 = _lanczos_smallest(solver, batch, deflate=q)
        new = np.abs(w2 - lam) <= eps
        if w2.min() < lam - eps:  # a smaller one was missed: restart from it
            lam = float(w2.min())
            found = x2[:, np.abs(w2 - lam) <= eps]
            continue
        if not new.any():
            break
        if new.all():
            batch = min(2 * batch, 32)
        found = np.column_stack([q, x2[:, new]])
    return lam, found.shape[1] + (1 if abs(lam) <= eps else 0), found[:, 0]


def lambda2(graph, *, generalized: bool = False, tol: float = 1e-8, return_method: bool = False):
    """The second smallest Laplacian eigenvalue and its multiplicity: ``(value, multiplicity)``.

    ``lambda2 > 0`` exactly when the graph is connected (Fiedler's algebraic connectivity). For a
    disconnected graph the value is 0 and the multiplicity the number of components (every
    eigenvalue 0). See the module notes for the solvers and the tolerance.

    Parameters
    ----------
    generalized : bool
        Use the generalised Laplacian ``L S^{-1}`` with capacities and speeds (see :func:`laplacian`).
    tol : float
        Relative tolerance for counting eigenvalues equal to lambda2.
    return_method : bool
        Also return the solver used, as a third element.

    Examples
    --------
    >>> from tokendist.graphs import hypercube_graph, complete_graph
    >>> value, mult = lambda2(hypercube_graph(4))
    >>> round(value, 9), mult
    (2.0, 4)
    >>> value, mult = lambda2(complete_graph(6))
    >>> round(value, 9), mult
    (6.0, 5)
    """
    n = graph.n
    if n < 2:
        raise TokendistError("lambda2 needs at least 2 nodes")
    eps = _tol_scale(graph, generalized, tol)
    if n > DENSE_LIMIT:
        if not graph.is_connected:
            # Every eigenvalue 0 belongs to one component (indicator vectors): no eigensolve.
            k = len(connected_components(graph))
            return (0.0, k, "connected components") if return_method else (0.0, k)
        lam, mult, _ = _lambda2_sparse(graph, generalized, eps)
        if lam <= eps:
            lam, mult = 0.0, mult
        method = _solver(graph, generalized).describe(6) + ", deflating the copies found until a run finds none"
        return (lam, mult, method) if return_method else (lam, mult)
    w, method = smallest_laplacian_eigenvalues(graph, n, generalized=generalized)
    lam = float(w[1])
    if lam <= eps:  # disconnected: lambda2 = 0
        lam = 0.0
    mult = int(np.count_nonzero(np.abs(w - lam) <= eps))
    return (lam, mult, method) if return_method else (lam, mult)


def lambda2_pair(graph, *, generalized: bool = False) -> tuple[float, np.ndarray]:
    """lambda2 and one unit eigenvector (no multiplicity count: one Lanczos run when sparse).

    Cached on the graph, shared by :func:`fiedler_vector` and the expansion bounds.
    """
    if graph.n <= DENSE_LIMIT:
        w, x = _dense_eigh(graph, generalized)
        return float(w[1]), x[:, 1]
    # Always its own Lanczos run (not the deflated vectors of lambda2), so that the vector, and
    # the sweep bounds built on it, do not depend on what was computed before.
    c = _cache(graph)
    key = ("sparse-pair", generalized)
    if key not in c:
        w, x = _lanczos_smallest(_solver(graph, generalized), 2)
        c[key] = (float(w[1]), x[:, 1])
    return c[key]


def fiedler_vector(graph, *, generalized: bool = False) -> np.ndarray:
    """A unit eigenvector of the (symmetric) Laplacian for lambda2.

    Not unique when lambda2 is multiple (the hypercube, the torus); the solver's choice is
    deterministic. With ``generalized=True`` it is the eigenvector ``x`` of ``S^{-1/2} L S^{-1/2}``;
    the right eigenvector of the paper's ``L S^{-1}`` is ``S^{1/2} x``.
    """
    if graph.n < 2:
        raise TokendistError("the Fiedler vector needs at least 2 nodes")
    v = lambda2_pair(graph, generalized=generalized)[1]
    # Fix the sign so that the result is reproducible: the largest-magnitude entry is positive.
    i = int(np.argmax(np.abs(v)))
    return v if v[i] >= 0 else -v


def second_largest_abs_eigenvalue(matrix) -> float:
    """The diffusion norm ``gamma = max(|mu_2|, |mu_n|)`` of a diffusion matrix.

    ``matrix`` (dense or sparse, n x n) has the eigenvalue ``mu_1 = 1`` (a stochastic or diffusion
    matrix, e.g. ``M = I - L S^{-1}`` of Elsässer et al. 2006, Sec. 2). ``gamma`` is the largest
    absolute value among the remaining eigenvalues: one eigenvalue closest to 1 is removed. Dense
    eigenvalues (``eigvalsh`` if symmetric, ``eigvals`` otherwise) up to ``2 * DENSE_LIMIT`` nodes,
    else ``scipy.sparse.linalg.eigs`` for the 3 eigenvalues of largest magnitude.

    Examples
    --------
    >>> import numpy as np
    >>> round(second_largest_abs_eigenvalue(np.array([[0.5, 0.5], [0.5, 0.5]])), 12)
    0.0
    """
    is_sparse = sp.issparse(matrix)
    n = matrix.shape[0]
    if matrix.shape != (n, n):
        raise TokendistError("the diffusion matrix must be square")
    if n < 2:
        return 0.0
    if n <= 2 * DENSE_LIMIT:
        a = matrix.toarray() if is_sparse else np.asarray(matrix, dtype=np.float64)
        w = np.linalg.eigvalsh(a) if np.allclose(a, a.T) else np.linalg.eigvals(a)
    else:
        from scipy.sparse.linalg import eigs

        v0 = np.random.default_rng(0).random(n)
        w = eigs(sp.csr_array(matrix), k=3, which="LM", v0=v0, return_eigenvectors=False, tol=1e-10)
    w = np.asarray(w, dtype=np.complex128)
    one = int(np.argmin(np.abs(w - 1.0)))
    return float(np.abs(np.delete(w, one)).max())
