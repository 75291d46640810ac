"""Theory of Algorithm DIFFUSE made computable (Subramanian and Scherson 1994, Sec. 3).

* The Error Bound (Sec. 3.1, Equation 3): ``||e(t)|| <= |lambda_2|^t ||e(0)||`` where ``e(t) = l(t) - b``
  and ``lambda_2`` is the eigenvalue of P second largest *in absolute value* (the paper orders
  ``|lambda_1| >= |lambda_2| >= ...``); here that number is called ``gamma`` and ``lambda2`` is
  the second largest eigenvalue. With ``P_ii >= 1/2`` P is positive semi-definite and the two agree.
* Iterations to tolerance tau (Sec. 3.2): ``T <= log_{1/|lambda_2|}(sigma / tau) + 1`` with
  ``sigma = ||l(0) - b||``; the bound is attained when ``e(0)`` is an eigenvector of ``lambda_2``.
* Running time (Sec. 3.2, "Equation 4" as reconstructed from the OCR): a processor spends a
  constant c on lines (3)-(4) and at most ``2 ||e(t-1)||`` sending tasks, so
  ``Time <= c T + 2 sum_t ||e(t)|| <= c T + 2 sigma / (1 - |lambda_2|)``.
* Eigenvalue bounds (Sec. 3.2): electrical conductance ``1 - 2 Gamma <= |lambda_2| <= 1 - Gamma / N``
  (Chandra et al., Theorem 7), fluid conductance ``1 - 2 Phi <= |lambda_2| <= 1 - Phi^2 / 2``
  (Jerrum and Sinclair), and on the ``n_1 x ... x n_d`` mesh with wrap-around with diagonal 1/2
  and ``1/(4d)`` per edge: ``lambda_2 = 1 - (1/d) sin^2(pi / max_i n_i)`` (Chandra et al., Theorem 10).

These give Theorem 3.1: ``Omega(log sigma / Gamma) <= Time <= O(N sigma / Gamma)``,
``Omega(log sigma / Phi) <= Time <= O(sigma / Phi^2)`` and on the mesh
``Omega(d log sigma / sin^2(pi / max n_i)) <= Time <= O(d sigma / sin^2(pi / max n_i))``.
How each damaged formula was read is in docs/protocols/diffusion.md.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..errors import TokendistError
from ..protocols.diffusion import diffusion_matrix, diffusivity
from ..engine._metrics import errors
from ._bounds import register_bounds

__all__ = ["diffusion_eigenvalues", "diffusion_lambda2", "diffusion_gamma", "error_bound", "iterations_to_tolerance",
           "running_time_bound", "effective_resistances", "diffusion_electrical_conductance",
           "diffusion_fluid_conductance", "mesh_dimensions", "mesh_lambda2", "mesh_eigenvalues",
           "mesh_max_resistance", "mesh_fluid_conductance", "eigenvalue_bounds", "time_bounds", "diffusion_bounds"]

_DENSE_MAX = 2500


def _alpha(graph, alpha=None, matrix="degree", min_diag=0.5):
    return diffusivity(graph, matrix, min_diag=min_diag) if alpha is None else np.asarray(alpha, dtype=np.float64)


def _laplacian(graph, alpha) -> sp.csr_array:
    """``I - P``: the weighted Laplacian with conductance ``P_ij`` on edge ij."""
    return (sp.identity(graph.n, format="csr") - diffusion_matrix(graph, alpha)).tocsr()


def diffusion_eigenvalues(graph, alpha=None, *, matrix="degree", min_diag=0.5) -> np.ndarray:
    """All eigenvalues of P, descending (dense; graphs up to a few thousand nodes)."""
    if graph.n > _DENSE_MAX:
        raise TokendistError(f"all eigenvalues of P for n = {graph.n} > {_DENSE_MAX}: use diffusion_lambda2/gamma")
    p = diffusion_matrix(graph, _alpha(graph, alpha, matrix, min_diag)).toarray()
    return np.sort(np.linalg.eigvalsh(p))[::-1]


def _extreme(graph, alpha):
    """(second largest eigenvalue, smallest eigenvalue) of P."""
    if graph.n <= _DENSE_MAX:
        ev = diffusion_eigenvalues(graph, alpha)
        return (float(ev[1]) if graph.n > 1 else 0.0), float(ev[-1])
    p = diffusion_matrix(graph, alpha)
    top = spla.eigsh(p, k=2, which="LA", return_eigenvectors=False, tol=1e-10)
    bottom = spla.eigsh(p, k=1, which="SA", return_eigenvectors=False, tol=1e-10)
    return float(np.sort(top)[0]), float(bottom[0])


def diffusion_lambda2(graph, alpha=None, *, matrix="degree", min_diag=0.5) -> float:
    """The second largest eigenvalue of P (1 - the spectral gap of ``I - P``)."""
    return _extreme(graph, _alpha(graph, alpha, matrix, min_diag))[0]


def diffusion_gamma(graph, alpha=None, *, matrix="degree", min_diag=0.5) -> float:
    """The paper's ``|lambda_2|``: the second largest absolute eigenvalue of P (connected graph).

    It is the factor by which P shrinks every error vector (the Error Bound, Equation 3).
    """
    l2, lmin = _extreme(graph, _alpha(graph, alpha, matrix, min_diag))
    return max(abs(l2), abs(lmin)) if graph.n > 1 else 0.0


def error_bound(e0: float, gamma: float, steps: int) -> np.ndarray:
    """The Error Bound curve ``gamma^t * ||e(0)||`` for t = 0..steps (Sec. 3.1, Equation 3)."""
    return e0 * np.power(float(gamma), np.arange(steps + 1, dtype=np.float64))


def iterations_to_tolerance(sigma: float, gamma: float, tol: float = 1.0) -> int:
    """The smallest T with ``gamma^T sigma <= tol``: iterations after which the Error Bound guarantees
    ``||e(T)|| <= tol`` (and needed when ``e(0)`` is an eigenvector of ``gamma``)."""
    if sigma <= tol:
        return 0
    if gamma <= 0:
        return 1
    if gamma >= 1:
        return math.inf
    return int(math.ceil(math.log(sigma / tol) / math.log(1.0 / gamma) - 1e-12))


def running_time_bound(sigma: float, gamma: float, tol: float = 1.0, c: float = 1.0) -> float:
    """``c T + 2 sigma / (1 - gamma)``: the running-time bound of Sec. 3.2 (cost c per iteration plus
    the tasks the busiest processor sends)."""
    if gamma >= 1:
        return math.inf
    return c * iterations_to_tolerance(sigma, gamma, tol) + 2.0 * sigma / (1.0 - gamma)


def effective_resistances(graph, alpha=None, *, matrix="degree", min_diag=0.5) -> np.ndarray:
    """N x N effective resistances ``RES(u, v)`` with resistance ``1 / P_ij`` on edge ij (dense)."""
    if graph.n > _DENSE_MAX:
        raise TokendistError(f"effective resistances are computed densely; n = {graph.n} > {_DENSE_MAX}")
    lap = _laplacian(graph, _alpha(graph, alpha, matrix, min_diag)).toarray()
    lp = np.linalg.pinv(lap, hermitian=True)
    d = np.diag(lp)
    return d[:, None] + d[None, :] - 2 * lp


def diffusion_electrical_conductance(graph, alpha=None, *, matrix="degree", min_diag=0.5) -> float:
    """``Gamma = min_{u, v} 1 / RES(u, v)`` (Sec. 3), exactly (dense pseudo-inverse of ``I - P``)."""
    if graph.n < 2:
        return math.inf
    return float(1.0 / effective_resistances(graph, alpha, matrix=matrix, min_diag=min_diag).max())


def diffusion_fluid_conductance(graph, alpha=None, *, matrix="degree", min_diag=0.5, max_n: int = 20) -> float:
    """``Phi = min_S CAP(S, S-bar) / min(|S|, |S-bar|)``, capacities ``P_ij`` (Sec. 3), by enumeration.

    Exact; exponential in n (all subsets containing node 0), so limited to ``n <= max_n``.
    """
    n = graph.n
    if n < 2:
        return math.inf
    if n > max_n:
        raise TokendistError(f"exact fluid conductance enumerates 2^(n-1) cuts; n = {n} > {max_n}")
    a = _alpha(graph, alpha, matrix, min_diag)
    masks = np.arange(1, 1 << (n - 1), dtype=np.int64) << 1  # sets S not containing node 0 (S-bar does)
    cut = np.zeros(masks.size)
    for e in range(graph.m):
        cut += a[e] * (((masks >> graph.u[e]) ^ (masks >> graph.v[e])) & 1)
    size = np.zeros(masks.size, dtype=np.int64)
    for i in range(n):
        size += (masks >> i) & 1
    return float((cut / np.minimum(size, n - size)).min())


# ---------------------------------------------------------------------- the mesh with wrap-around
def mesh_dimensions(graph) -> tuple[int, ...] | None:
    """``(n_1, ..., n_d)`` if ``graph.spec`` is a ring, torus or hypercube where the default P is the
    paper's mesh matrix (every side >= 3, or every side 2), else None."""
    spec = graph.spec or ""
    m = re.fullmatch(r"ring:(\d+)", spec)
    if m:
        dims = (int(m.group(1)),)
    elif (m := re.fullmatch(r"hypercube:(\d+)", spec)):
        dims = (2,) * int(m.group(1))
    elif (m := re.fullmatch(r"torus:(\d+(?:x\d+)*)", spec)):
        dims = tuple(int(x) for x in m.group(1).split("x"))
    else:
        return None
    if not dims or not (all(x >= 3 for x in dims) or all(x == 2 for x in dims)):
        return None
    return dims


def mesh_lambda2(dims) -> float:
    """``1 - (1/d) sin^2(pi / max_i n_i)`` (Sec. 3.2, from Chandra et al., Theorem 10)."""
    d = len(dims)
    return 1.0 - math.sin(math.pi / max(dims)) ** 2 / d


def _mesh_mu(dims) -> np.ndarray:
    """Eigenvalues of ``I - P`` on the mesh, as an array of shape dims: ``(1/(2d)) sum_i (1 - cos(2 pi k_i / n_i))``."""
    d = len(dims)
    grids = np.meshgrid(*[1.0 - np.cos(2 * np.pi * np.arange(n) / n) for n in dims], indexing="ij")
    return sum(grids) / (2.0 * d)


def mesh_eigenvalues(dims) -> np.ndarray:
    """All eigenvalues of the paper's mesh P (Fourier), descending."""
    return np.sort(1.0 - _mesh_mu(dims).ravel())[::-1]


def mesh_max_resistance(dims) -> float:
    """``max_v RES(0, v)`` on the mesh, exactly, by Fourier: ``RES(0, v) = 2 (G(0) - Re G(v))`` with
    ``G = ifft(1/mu)`` (the mesh is vertex-transitive, so this is the maximum over all pairs)."""
    mu = _mesh_mu(dims)
    g = np.zeros_like(mu)
    nz = mu > 1e-14
    g[nz] = 1.0 / mu[nz]
    G = np.fft.ifftn(g).real
    return float((2.0 * (G.flat[0] - G)).max())


def mesh_fluid_conductance(dims) -> float:
    """Fluid conductance of the mesh with the paper's P, by the half-space cut.

    The cut of a slab of ``floor(n/2)`` layers across the longest side: ``2 N / n`` edges (``N / 2``
    on the hypercube) of capacity ``1/(4d)`` (``1/(2d)``). Optimal for the hypercube (Harper) and the
    torus with even sides (Bollobas and Leader 1991); an upper bound otherwise.
    """
    d = len(dims)
    N = int(np.prod(dims))
    if all(x == 2 for x in dims):
        return 1.0 / (2 * d)
    n = max(dims)
    return (2 * N / n / (4 * d)) / (n // 2 * N / n)


# ---------------------------------------------------------------------- Theorem 3.1
def eigenvalue_bounds(n: int, *, Gamma=None, Phi=None, dims=None) -> dict:
    """Intervals for ``|lambda_2|`` from Gamma, Phi and the mesh formula (Sec. 3.2)."""
    out = {}
    if Gamma is not None:
        out["electrical"] = (max(0.0, 1 - 2 * Gamma), 1 - Gamma / n)
    if Phi is not None:
        out["fluid"] = (max(0.0, 1 - 2 * Phi), 1 - Phi ** 2 / 2)
    if dims is not None:
        lam = mesh_lambda2(dims)
        out["mesh"] = (lam, lam)
    return out


def time_bounds(sigma: float, interval: tuple[float, float], tol: float = 1.0, c: float = 1.0) -> dict:
    """Iterations and running time implied by ``lo <= |lambda_2| <= hi`` (Theorem 3.1 made explicit).

    ``iterations_low`` is the iterations the worst start (e(0) an eigenvector) needs if
    ``|lambda_2| = lo``; ``iterations_high`` and ``time_high`` bound every start if ``|lambda_2| = hi``.
    """
    lo, hi = interval
    return {"iterations_low": iterations_to_tolerance(sigma, lo, tol),
            "iterations_high": iterations_to_tolerance(sigma, hi, tol),
            "time_high": running_time_bound(sigma, hi, tol, c)}


def diffusion_bounds(graph, loads, *, matrix="degree", min_diag=0.5, tol: float = 1.0, c: float = 1.0) -> dict:
    """Every figure of Sec. 3 for one graph and initial distribution.

    Exact spectra and conductances where affordable (dense up to a few thousand nodes, fluid
    conductance by enumeration up to 20 nodes), the mesh closed forms on rings, tori and hypercubes.
    """
    alpha = _alpha(graph, None, matrix, min_diag)
    loads = np.asarray(loads)
    if loads.dtype.kind in "iu" and loads.size and graph.speeds is None:  # exact past 2**53 (engine._metrics.errors)
        sigma = float(np.linalg.norm(errors(graph, loads.astype(np.int64))))
    else:
        loads = loads.astype(np.float64)
        sigma = float(np.linalg.norm(loads - loads.mean())) if loads.size else 0.0
    dims = mesh_dimensions(graph) if matrix == "degree" else None
    out = {"sigma": sigma, "tolerance": tol}
    if dims is not None and graph.n > _DENSE_MAX:
        ev = mesh_eigenvalues(dims)
        l2, lmin = float(ev[1]), float(ev[-1])
    else:
        l2, lmin = _extreme(graph, alpha)
    gamma = max(abs(l2), abs(lmin)) if graph.n > 1 else 0.0
    out.update(lambda2=l2, gamma=gamma, error_bound_iterations=iterations_to_tolerance(sigma, gamma, tol),
               running_time_bound=running_time_bound(sigma, gamma, tol, c))
    Gamma = Phi = None
    if dims is not None:
        Gamma = 1.0 / mesh_max_resistance(dims)
        Phi = mesh_fluid_conductance(dims)
        out["mesh_lambda2"] = mesh_lambda2(dims)
    else:
        if graph.n <= _DENSE_MAX:
            Gamma = diffusion_electrical_conductance(graph, alpha)
        if graph.n <= 20:
            Phi = diffusion_fluid_conductance(graph, alpha)
    if Gamma is not None:
        out["electrical_conductance"] = Gamma
    if Phi is not None:
        out["fluid_conductance"] = Phi
    for name, interval in eigenvalue_bounds(graph.n, Gamma=Gamma, Phi=Phi, dims=dims).items():
        out[f"{name}_lambda_interval"] = [float(interval[0]), float(interval[1])]
        for k, v in time_bounds(sigma, interval, tol, c).items():
            out[f"{name}_{k}"] = v
    return out


@register_bounds("diffusion", "diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented")
def _predict(graph, loads, params):
    out = diffusion_bounds(graph, loads, matrix=params.get("matrix", "degree"),
                           min_diag=float(params.get("min_diag", 0.5)))
    out["basis"] = ("Subramanian-Scherson 1994 Sec. 3 (divisible tasks; the roundings of Sec. 4 have no bound "
                    "in the paper): Error Bound ||e(t)|| <= |lambda_2|^t ||e(0)||, tolerance ||e|| <= 1")
    return out
