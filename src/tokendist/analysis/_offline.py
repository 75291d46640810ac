"""The off-line optimum of Ghosh et al. (1995), Sec. 6: max-flow on a time-expanded network.

An off-line algorithm knows every load and may move tokens along any schedule the communication
model allows. The fewest steps T in which it can bring every node to at most ``ceil(rho) + K``
tokens is found by a max-flow on the time-expanded network H of Lemma 6.3: node copies
``<v, i>`` for ``0 <= i <= T``, a source feeding ``w(v)`` into ``<v, 0>``, arcs ``<u, i> -> <v, i+1>``
of capacity 1 for each edge direction, arcs ``<v, i> -> <v, i+1>`` of unbounded capacity (a token
stays), and ``<v, T> -> sink`` of capacity ``ceil(rho) + K``. All N tokens fit through H iff a
T-step schedule exists (integral max-flow = token paths; flow conservation at ``<v, i>`` is exactly
"a node sends only tokens it holds"). T is searched for upwards from a lower bound, in growing
strides, then by bisection (:func:`offline_optimum`).

The lower bound is the larger of two necessary conditions. A node ``v`` must shed
``w(v) - ceil(rho) - K`` tokens, at most ``deg(v)`` a step (one in single-port). And a set ``S``
of nodes must end with at most ``(ceil(rho) + K) |S|`` tokens, while at most one token a step
leaves it over each edge of its cut ``E(S, V - S)``, so ``T >= (w(S) - (ceil(rho) + K) |S|) /
|E(S, V - S)|``: the cut argument behind the lower bound of Lemma 6.3. It is taken over the sets
of the ``k`` heaviest nodes, ``k = 1 .. n - 1`` (all of them in ``O(m + n log n)``). On the
distributions of the paper's experiments (half the nodes loaded) it is often the optimum itself:
the max-flow then runs once, at that T, instead of a dozen times.

* ``multi-port``: H as above; the answer is **exact** (one token per edge and direction per step).
* ``single-port``: each ``<v, i>`` additionally sends through a unit-capacity "port out" and each
  ``<v, i+1>`` receives through a unit-capacity "port in", i.e. at most one token sent and one
  received per node per step. The paper's single-port model (a node transmits or receives at most
  one token; the algorithm uses a matching) is stricter, so this T is a **lower bound** on the
  single-port optimum (``exact = False``); it is exact for the model "one send and one receive per
  step".

Memory: H has about ``T (n + 2m)`` arcs (multi-port; ``T (3n + 2m)`` single-port) and a max-flow
over it peaks at about :data:`BYTES_PER_ARC` bytes an arc (measured: 61 on a multi-port torus, 65
single-port). Before building anything, :func:`offline_optimum` estimates the network of every T it
is about to try and refuses with one line, naming the size it would need, when it exceeds
:func:`memory_limit` (half of the memory available now), instead of growing until the kernel kills
the process.

Lemma 6.3 states: with edge expansion alpha and imbalance Delta, ``K = d`` is reachable in at most
``ceil(Delta / alpha)`` steps (multi-port), and for every graph some distribution with imbalance
Delta needs at least ``ceil(Delta / alpha)`` steps for ``K = 0``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from ..engine._metrics import exact_total
from ..errors import TokendistError

__all__ = ["OfflineResult", "offline_optimum", "offline_feasible", "OFFLINE_MODELS", "network_arcs",
           "available_memory", "memory_limit", "BYTES_PER_ARC"]

OFFLINE_MODELS = ("multi-port", "single-port")
#: Peak bytes per arc of building H and running scipy's max-flow on it (measured 61-65, with margin).
BYTES_PER_ARC = 80
#: The share of the available memory one time-expanded network may take.
MEMORY_FRACTION = 0.5
#: When the available memory cannot be read: assume this much (bytes).
FALLBACK_AVAILABLE = 2 * 1024**3


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int:
    """Bytes this process may still use: the least of free memory, a cgroup's limit and ``RLIMIT_AS``.

    Free memory from ``psutil`` when installed, else ``/proc/meminfo``'s MemAvailable, else
    ``os.sysconf("SC_AVPHYS_PAGES")``; :data:`FALLBACK_AVAILABLE` when none can be read.
    """
    candidates = []
    try:
        import psutil  # optional: more portable than /proc

        candidates.append(int(psutil.virtual_memory().available))
    except ImportError:
        try:
            with open("/proc/meminfo") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        candidates.append(int(line.split()[1]) * 1024)
                        break
        except OSError:
            pass
        if not candidates:
            try:
                candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
            except (ValueError, OSError, AttributeError):
                pass
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        candidates.append(max(limit - used, 0))
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            vm = _read_int(f"/proc/{os.getpid()}/statm")
            candidates.append(max(soft - (vm or 0) * os.sysconf("SC_PAGE_SIZE"), 0))
    except (ImportError, ValueError, OSError):
        pass
    return min(candidates) if candidates else FALLBACK_AVAILABLE


def memory_limit() -> int:
    """Bytes one time-expanded network may take: :data:`MEMORY_FRACTION` of :func:`available_memory`."""
    return int(MEMORY_FRACTION * available_memory())


def network_arcs(graph, loads, T: int, model: str = "multi-port") -> int:
    """Arcs of the time-expanded network for ``T`` steps, computed without building it."""
    sources = int(np.count_nonzero(np.asarray(loads) > 0))
    per_step = graph.n + 2 * graph.m + (2 * graph.n if model == "single-port" else 0)
    return sources + int(T) * per_step + graph.n


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1024**3:.1f} GB" if nbytes >= 1024**3 / 10 else f"{nbytes / 1024**2:.0f} MB"


@dataclass(frozen=True)
class OfflineResult:
    """The off-line optimum: ``steps`` (T), the target ``ceil(rho) + slack``, and whether T is exact.

    ``exact`` is False for the single-port model, where ``steps`` is a lower bound.
    """

    steps: int
    slack: int
    model: str
    exact: bool
    target: int
    tokens: int
    flow_checks: int

    def to_json(self) -> dict:
        return {"steps": self.steps, "slack": self.slack, "model": self.model, "exact": self.exact,
                "target_max_load": self.target, "tokens": self.tokens, "flow_checks": self.flow_checks,
                "meaning": ("exact minimum number of steps" if self.exact else
                            "lower bound on the minimum number of steps (flow relaxation of single-port)")}


def _time_expanded(graph, loads: np.ndarray, T: int, cap: int, model: str):
    """The network H of Lemma 6.3 (plus unit ports for single-port) as a CSR capacity matrix."""
    n, N = graph.n, exact_total(loads)
    big = max(N, 1)
    layer = lambda i: 2 + i * n + np.arange(n)  # noqa: E731  (<v, i>)
    a = np.concatenate([graph.u, graph.v])  # directed edges a -> b
    b = np.concatenate([graph.v, graph.u])
    rows, cols, caps = [], [], []

    def add(r, c, k):
        rows.append(np.asarray(r, dtype=np.int64))
        cols.append(np.asarray(c, dtype=np.int64))
        caps.append(np.broadcast_to(np.asarray(k, dtype=np.int64), np.shape(r)))

    src = np.flatnonzero(loads > 0)
    add(np.zeros(src.size, np.int64), 2 + src, loads[src])
    size = 2 + (T + 1) * n
    steps = np.arange(T)
    # Stay arcs <v, i> -> <v, i+1> (unbounded), all steps at once.
    stay = (2 + steps[:, None] * n + np.arange(n)[None, :]).ravel()
    add(stay, stay + n, big)
    if model == "multi-port":
        off = (2 + steps[:, None] * n)
        add((off + a[None, :]).ravel(), (off + n + b[None, :]).ravel(), 1)
    else:
        send0 = size  # port out of <v, i>
        recv0 = size + T * n  # port in of <v, i+1>
        size += 2 * T * n
        grid = steps[:, None] * n + np.arange(n)[None, :]
        add((2 + grid).ravel(), (send0 + grid).ravel(), 1)
        add((send0 + steps[:, None] * n + a[None, :]).ravel(), (recv0 + steps[:, None] * n + b[None, :]).ravel(), 1)
        add((recv0 + grid).ravel(), (2 + grid + n).ravel(), 1)
    add(layer(T), np.ones(n, np.int64), cap)
    r, c, k = np.concatenate(rows), np.concatenate(cols), np.concatenate(caps)
    if N >= 2**31 - 1:
        raise TokendistError("offline: more than 2**31 tokens do not fit scipy's int32 capacities")
    return sp.csr_array((k.astype(np.int32), (r, c)), shape=(size, size))


def offline_feasible(graph, loads, T: int, *, slack: int = 0, model: str = "multi-port",
                     memory: int | None = None) -> bool:
    """Whether every node can hold at most ``ceil(rho) + slack`` tokens after ``T`` steps.

    A network that would need more than ``memory`` bytes (default :func:`memory_limit`) is refused
    with a one-line :class:`~tokendist.errors.TokendistError` before it is built.
    """
    loads = np.asarray(loads, dtype=np.int64)
    N = exact_total(loads)  # (numpy's sum wraps past 2**63: 3 loads of 2**62 looked unbalanced)
    cap = -(-N // graph.n) + int(slack)
    if int(loads.max(initial=0)) <= cap:
        return True  # nobody needs to move (in any T: a node may keep its tokens)
    if T == 0 or graph.m == 0:
        return False
    _check_memory(graph, loads, int(T), model, memory_limit() if memory is None else int(memory))
    H = _time_expanded(graph, loads, int(T), cap, model)
    return int(maximum_flow(H, 0, 1).flow_value) == N


def _lower_bound(graph, loads, cap: int, model: str) -> int:
    """Fewer steps than this cannot bring every node to at most ``cap`` (the module docstring)."""
    # A node must shed w(v) - cap tokens, at most deg(v) per step (multi-port) or 1 (single-port).
    excess = np.maximum(loads - cap, 0)
    if not excess.any():
        return 0
    per = graph.degrees if model == "multi-port" else np.ones(graph.n, dtype=np.int64)
    return max(int(np.max(-(-excess // np.maximum(per, 1)))), _cut_bound(graph, loads, cap))


def _cut_bound(graph, loads, cap: int) -> int:
    """max over ``S`` = the ``k`` heaviest nodes of ``ceil((w(S) - cap |S|) / |E(S, V - S)|)`` (0: none positive)."""
    n = graph.n
    if n < 2 or exact_total(loads) >= _CUT_SUMS or cap * n >= _CUT_SUMS:
        return 0  # (the prefix sums below stay exact in int64; the degree bound still holds)
    order = np.argsort(-loads, kind="stable")
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    p, q = pos[graph.u], pos[graph.v]
    # An edge is in the cut of the first k nodes of the order for min(p, q) < k <= max(p, q).
    change = (np.bincount(np.minimum(p, q) + 1, minlength=n + 1)
              - np.bincount(np.maximum(p, q) + 1, minlength=n + 1))
    cut = np.cumsum(change)[1:n]  # k = 1 .. n - 1
    over = np.cumsum(loads[order])[:n - 1] - cap * np.arange(1, n, dtype=np.int64)
    useful = (over > 0) & (cut > 0)
    return int(np.max(-(-over[useful] // cut[useful]))) if useful.any() else 0


#: Totals from here take no cut bound (its prefix sums are int64).
_CUT_SUMS = 2**62


def _check_memory(graph, loads, T: int, model: str, limit: int, known_bad: int | None = None) -> None:
    """Refuse (one line, with the size needed) a network for ``T`` steps that would not fit in ``limit`` bytes."""
    need = network_arcs(graph, loads, T, model) * BYTES_PER_ARC
    if need <= limit:
        return
    where = (f"the optimum is more than {known_bad} steps, and checking T = {T}" if known_bad else
             f"at least {T} steps are needed (a node sheds at most its degree a step, a set of nodes at most "
             f"its cut edges), and T = {T}")
    raise TokendistError(f"offline: {where} needs a time-expanded network of {network_arcs(graph, loads, T, model):,} "
                         f"arcs, about {_gb(need)} of memory; the limit is {_gb(limit)} (half of the memory "
                         "available); use a smaller graph, fewer tokens or a larger --slack")


def offline_optimum(graph, loads, *, slack: int = 0, model: str = "multi-port",
                    max_steps: int | None = None, progress=None, memory: int | None = None) -> OfflineResult:
    """The minimum number of steps T after which every node holds at most ``ceil(rho) + slack`` tokens.

    Parameters
    ----------
    graph : Graph
        A connected graph.
    loads : array_like of int
        Initial loads.
    slack : int
        K >= 0; K = 0 asks for perfect balance from above.
    model : {"multi-port", "single-port"}
        The communication model (single-port gives a lower bound, see the module docstring).
    max_steps : int, optional
        Give up (TokendistError) beyond this T (default: 2 n max(loads) + 2, always enough on a
        connected graph).
    progress : callable, optional
        ``progress(checks, T)`` before each max-flow (the search's step count and the T it tries).
    memory : int, optional
        Bytes a time-expanded network may take (default :func:`memory_limit`): a T whose network
        would need more is refused with a one-line :class:`~tokendist.errors.TokendistError`
        before anything is built.

    Returns
    -------
    OfflineResult

    Examples
    --------
    >>> from tokendist.graphs import make_graph
    >>> offline_optimum(make_graph("path:3"), [6, 0, 0]).steps   # 4 tokens leave node 0 one per step
    4
    """
    if model not in OFFLINE_MODELS:
        raise TokendistError(f"offline: unknown model {model!r}; choose from {', '.join(OFFLINE_MODELS)}")
    if slack < 0:
        raise TokendistError("offline: slack must be >= 0")
    loads = np.asarray(loads, dtype=np.int64)
    if loads.shape != (graph.n,):
        raise TokendistError(f"offline: {loads.size} loads for a graph of {graph.n} nodes")
    if loads.size and loads.min() < 0:
        raise TokendistError("offline: loads must be non-negative")
    N = exact_total(loads)  # (numpy's sum wraps past 2**63: 3 loads of 2**62 looked unbalanced)
    cap = -(-N // graph.n) + int(slack)
    if int(loads.max(initial=0)) <= cap:
        # Balanced already (and ``cap`` may exceed int64 when the slack is huge: no array arithmetic).
        return OfflineResult(0, slack, model, model == "multi-port", cap, N, 0)
    if not graph.is_connected:
        raise TokendistError("offline: the graph must be connected")
    checks = 0
    lo = _lower_bound(graph, loads, cap, model)  # infeasible below lo (lo itself may be feasible)
    if lo == 0:
        return OfflineResult(0, slack, model, model == "multi-port", cap, N, 0)
    limit = max_steps if max_steps is not None else 2 * graph.n * int(loads.max()) + 2
    if lo > limit:
        raise TokendistError(f"offline: not balanced within {limit} steps (at least {lo} are needed)")
    limit_bytes = memory_limit() if memory is None else int(memory)
    _check_memory(graph, loads, lo, model, limit_bytes)
    # Upwards from the lower bound in strides that double (from lo/16: a bound far below the optimum
    # costs a few small networks more than doubling T would), then bisection of (bad, good].
    bad, T, stride = lo - 1, lo, max(1, lo // 16)
    while True:
        checks += 1
        _check_memory(graph, loads, T, model, limit_bytes, known_bad=bad if bad >= lo else None)
        if progress is not None:
            progress(checks, T)
        if offline_feasible(graph, loads, T, slack=slack, model=model, memory=limit_bytes):
            good = T
            break
        bad = T
        if T >= limit:
            raise TokendistError(f"offline: not balanced within {limit} steps")
        T = min(limit, T + stride)
        stride *= 2
    while good - bad > 1:
        mid = (good + bad) // 2
        checks += 1
        if progress is not None:
            progress(checks, mid)
        if offline_feasible(graph, loads, mid, slack=slack, model=model, memory=limit_bytes):
            good = mid
        else:
            bad = mid
    return OfflineResult(good, slack, model, model == "multi-port", cap, N, checks)


def lemma_6_3_time(imbalance: float, alpha: float) -> int:
    """``ceil(Delta / alpha)``: Lemma 6.3's off-line time to reach ``ceil(rho) + d`` (multi-port)."""
    return int(math.ceil(imbalance / alpha - 1e-12))
