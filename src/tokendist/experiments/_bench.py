"""Speed of one synchronous step, per edge, against a naive reference measured in the same run.

For each vectorised protocol and each graph, :func:`bench` times whole steps (after one warm-up
step that also compiles numba kernels) and reports nanoseconds per edge-step; in the same run it
times the deliberately naive reference — the multi-port rule as a Python loop over a networkx
adjacency on a smaller torus — and reports the ratio. Timings on a shared 2-core machine vary up
to 2x between runs (docs/design/kernels.md): compare within one run, quote medians. Next to the
wall time it reports the process's CPU time (all its threads), which does not count the waits for
a core another process holds: for a serial kernel on a quiet machine the two agree; a kernel run
on k threads (``--param threads=k``) shows up to k times more CPU than wall time. Memory per
edge counts the graph's arrays, the input and output loads, the protocol's arrays and the peak a
step allocates on top.

A second reference is measured in the same child process, interleaved step by step with the
protocol's: the *gather floor*, a numba loop that only sums each node's neighbour loads over the
CSR rows (:func:`gather_floor_step`: it reads the row pointers, the column indices and every
neighbour's load, and writes one value per node: the traffic of a step in which every node reads
all its neighbours' loads; protocols that activate a subset of the edges, or read rows of D slots
without row pointers, can run below it). On a graph with an offset stencil (a torus:
:mod:`tokendist.graphs._stencil`) the floor walks the stencil's runs instead
(:func:`gather_floor_stencil_step`), as the protocols' stencil kernels do: no index reads, SIMD,
about 4x below the CSR floor on torus:1000x1000. The other
tenants of this machine share its L3 cache and memory bandwidth, so the same kernel measures up to
2x apart from one hour to the next; the ratio of a protocol's step to the floor measured at the
same moment is what stays put.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba
import numpy as np

from .._random import stream
from ..engine import PROTOCOLS, TRACE_METRICS, make_protocol, measure, resolve_protocol, step_overhead
from ..kernels._report import begin_step, step_variant
from ..errors import TokendistError
from ..graphs import make_graph
from ..graphs._model import unsigned_view

__all__ = ["bench", "BenchRow", "naive_multi_port_step", "gather_floor_step", "DEFAULT_BENCH_GRAPHS"]

DEFAULT_BENCH_GRAPHS = ("torus:1000x1000", "hypercube:20", "random-regular:1000000,4")


def naive_multi_port_step(nxg, loads: dict, threshold: int) -> dict:
    """The naive reference: one multi-port step as a per-edge Python loop over networkx."""
    new = dict(loads)
    for a, b in nxg.edges():
        diff = loads[a] - loads[b]
        if diff >= threshold:
            new[a] -= 1
            new[b] += 1
        elif -diff >= threshold:
            new[a] += 1
            new[b] -= 1
    return new


def _time_naive(spec: str, repeat: int, seed: int) -> float:
    g = make_graph(spec, seed=seed)
    if g.m == 0:
        raise TokendistError(f"bench: the naive reference graph {spec!r} has no edges (times are per edge)")
    nxg = g.to_networkx()
    w = stream(seed, "init").integers(0, 100, size=g.n)
    loads = {i: int(x) for i, x in enumerate(w)}
    thr = 2 * g.max_degree + 1
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        loads = naive_multi_port_step(nxg, loads, thr)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / g.m * 1e9


@dataclass
class BenchRow:
    algorithm: str
    graph: str
    n: int
    m: int
    ns_per_edge_step: float | None
    ratio_vs_naive: float | None
    bytes_per_edge: float | None
    reset_seconds: float | None
    note: str = ""
    transient_bytes_per_edge: float | None = None
    #: CPU time of the process (all threads): on a shared machine, wall time also counts the waits
    #: for a core another process holds; for a serial kernel CPU time is what a quiet machine's wall
    #: time would be.
    cpu_ns_per_edge_step: float | None = None
    #: The fastest of the timed steps (as :mod:`timeit` advises: slower repeats come from other
    #: processes, not from the code). On this shared machine the L3 cache and memory bandwidth
    #: are shared with other tenants, and the same kernel measures up to 2x apart from one process
    #: to the next; the median and the best bracket what a step costs.
    best_ns_per_edge_step: float | None = None
    #: The gather floor (:func:`gather_floor_step`) timed interleaved with the protocol's steps,
    #: and the protocol's median step over the floor's.
    floor_ns_per_edge_step: float | None = None
    ratio_vs_floor: float | None = None
    #: The engine's own work per step of a run, timed after each step: its feasibility and
    #: conservation checks (:func:`tokendist.engine.step_overhead`, one fused pass) and, on a
    #: recorded step, the trace metrics; and a run's step over the protocol's step alone, without
    #: and with the metrics (``record_every=1`` records every step; ``--record-every K`` every K-th).
    engine_ns_per_edge_step: float | None = None
    metrics_ns_per_edge_step: float | None = None
    run_over_step: float | None = None
    recorded_run_over_step: float | None = None
    #: Which variant of the protocol ran the timed steps (:mod:`tokendist.kernels._report`).
    variant: str = ""


@numba.njit(cache=True, nogil=True)
def gather_floor_step(indptr, indices, loads, out):
    """``out[i] = sum of loads[j]`` over the CSR row of i: the bench's memory-traffic floor.

    ``indices`` viewed as unsigned, as the protocols' kernels read them (numba then emits no
    negative-index wrap).
    """
    for i in range(out.shape[0]):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += loads[indices[k]]
        out[i] = s


@numba.njit(cache=True, nogil=True, inline="always")
def _gather_rows(indptr, indices, loads, out, i0, i1):
    for i in range(i0, i1):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += loads[indices[k]]
        out[i] = s


@numba.njit(cache=True, nogil=True)
def gather_floor_stencil_step(indptr, indices, starts, ends, lower, upper, loads, out):
    """:func:`gather_floor_step` on a graph with an offset stencil (:mod:`tokendist.graphs._stencil`).

    Nodes in the stencil's runs add ``loads[i + o]`` over the offsets (tuples: a constant trip
    count, SIMD), the others their CSR rows; the same sums in the same order, so the same bits.
    The floor of the protocols whose kernels walk the stencil.
    """
    prev = 0
    for r in range(starts.shape[0]):
        _gather_rows(indptr, indices, loads, out, prev, starts[r])
        for i in range(starts[r], ends[r]):
            s = 0.0
            for k in range(len(lower)):
                s += loads[np.uint64(i + lower[k])]
            for k in range(len(upper)):
                s += loads[np.uint64(i + upper[k])]
            out[np.uint64(i)] = s
        prev = ends[r]
    _gather_rows(indptr, indices, loads, out, prev, out.shape[0])


def gather_floor(graph, loads, out):
    """One gather-floor step on ``graph``: over its stencil's runs when it has one, else its CSR rows."""
    st = graph.stencil
    if st is None:
        gather_floor_step(graph.indptr, unsigned_view(graph.indices), loads, out)
    else:
        gather_floor_stencil_step(graph.indptr, unsigned_view(graph.indices), st.starts, st.ends,
                                  st.lower, st.upper, loads, out)


def _state_arrays(obj) -> list[np.ndarray]:
    arrays = []
    for v in vars(obj).values():
        if isinstance(v, np.ndarray):
            arrays.append(v)
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, np.ndarray) for x in v):
            arrays.extend(v)
    return arrays


def _graph_arrays(g) -> list[np.ndarray]:
    """The graph's arrays: edges, CSR, and whatever it has cached by now (degrees, keys, stencil
    runs, the scipy adjacency matrix)."""
    arrays = [g.u, g.v, g.indptr, g.indices, g.csr_edges, *_state_arrays(g)]
    stencil = vars(g).get("stencil")
    if stencil is not None:
        arrays += [stencil.starts, stencil.ends]
    adjacency = vars(g).get("adjacency")  # scipy's matrix, if something asked for it
    if adjacency is not None:
        arrays += [adjacency.data, adjacency.indices, adjacency.indptr]
    return arrays


def _owner(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory (``a`` itself unless it is a view of a numpy array)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _resident_bytes(g, proto, loads_arrays) -> int:
    """Bytes of the graph's and the protocol's arrays, each buffer once, the load buffers not counted.

    Arrays are counted by the buffer that owns their memory: a protocol may keep a graph array
    (``edge_keys``, say) or two views of one buffer, counted once; a view keeps its whole buffer
    alive, counted whole; a value broadcast to n nodes (``np.broadcast_to``, zero strides) is the
    one value it holds, not ``n`` of them.
    """
    owners = {id(o): o for o in map(_owner, [*_graph_arrays(g), *_state_arrays(proto)])}
    return sum(o.nbytes for o in owners.values() if not any(np.shares_memory(o, w) for w in loads_arrays))


def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _transient_bytes(step) -> int:
    """Peak memory allocated while ``step()`` runs, above what was in use before it.

    Two views, the larger wins: ``tracemalloc`` sees every numpy allocation (numpy reports them)
    but not memory numba allocates inside a kernel; the resident-set high-water mark (reset by
    writing 5 to ``/proc/self/clear_refs``, Linux) sees everything the process touches but misses
    allocations served from memory the allocator kept from earlier steps. Both count per-step
    temporaries, which an honest "graph plus state" figure per edge must include.
    """
    import tracemalloc

    rss_before = _proc_status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        rss_before = None
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    try:
        step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    traced = peak - base
    hwm = _proc_status_kib("VmHWM")
    rss = (hwm - rss_before) * 1024 if rss_before is not None and hwm is not None else 0
    return max(traced, rss, 0)


def _measure_case(name, g, loads, steps, seed, conn, params=None, skip=0):
    """Runs in a forked child: reset, one warm-up step, ``skip`` untimed steps, then ``steps`` timed steps."""
    note = ""
    try:
        # Parameters apply to the protocols that declare them (e.g. ``threads`` for the kernels
        # that have a parallel variant); the others run with their defaults.
        declared = {p.name for p in resolve_protocol(name).params}
        own = {k: v for k, v in (params or {}).items() if k in declared}
        if own:
            note = ", ".join(f"{k}={v}" for k, v in own.items())
        proto = make_protocol(name, own)
        try:
            proto.check_graph(g)
        except TokendistError:
            # Tree protocols run on a general graph through their spanning-tree option.
            if "spanning_tree" not in {p.name for p in proto.params}:
                raise
            proto = make_protocol(name, {**own, "spanning_tree": "bfs"})
            proto.check_graph(g)
            note = ", ".join(filter(None, ["on a BFS spanning tree", note]))
        w = loads.astype(np.float64) if proto.divisible else loads.copy()
        t0 = time.perf_counter()
        proto.reset(g, w.copy(), stream(seed, "protocol"))
        reset = time.perf_counter() - t0
        w = proto.step(0, g, w).loads.copy()  # warm-up: numba compilation, caches
        for t in range(1, skip + 1):  # untimed: the run's state after `skip` more steps
            out = proto.step(t, g, w)
            w = out.loads.copy() if out.loads is w else out.loads
        floor_args = (g, loads.astype(np.float64), np.empty(g.n))
        gather_floor(*floor_args)
        times, cpu_times, floor_times, engine_times = [], [], [], []
        ran = {}  # which variant ran the timed steps (tokendist.kernels._report)
        tol = 1e-9 * (abs(float(w.sum())) + g.n) if proto.divisible else 0
        for t in range(skip + 1, skip + steps + 1):
            t1 = time.perf_counter()
            gather_floor(*floor_args)  # interleaved: the same moment's floor
            floor_times.append(time.perf_counter() - t1)
            begin_step()
            t1, c1 = time.perf_counter(), time.process_time()
            out = proto.step(t, g, w)
            ran[step_variant()] = ran.get(step_variant(), 0) + 1
            cpu_times.append(time.process_time() - c1)
            times.append(time.perf_counter() - t1)
            # What simulate() adds to the step: its checks, then the metrics of a recorded step.
            t1 = time.perf_counter()
            total = step_overhead(g, w, out, tol=tol, record=False)
            t2 = time.perf_counter()
            measure(g, out.loads, TRACE_METRICS, total)
            engine_times.append((t2 - t1, time.perf_counter() - t2))
            w = out.loads.copy() if out.loads is w else out.loads
        ran_text = "; ".join(v if len(ran) == 1 else f"{v} x{k}" for v, k in ran.items())
        # One more step measures what a step allocates. Memory = graph + the input and output
        # load arrays + the protocol's arrays (ping-pong load buffers not counted twice) + the
        # step's transient peak (a freshly allocated output not counted twice).
        before = _state_arrays(proto)
        holder = []
        transient = _transient_bytes(lambda: holder.append(proto.step(skip + steps + 1, g, w)))
        new = holder[0].loads
        if not any(np.shares_memory(new, a) for a in [w, *before]):
            transient = max(transient - new.nbytes, 0)
        persistent = _resident_bytes(g, proto, (w, new)) + 2 * w.nbytes
        m = max(g.m, 1)
        conn.send(("ok", float(np.median(times)), reset, (persistent + transient) / m, note, transient / m,
                   float(np.median(cpu_times)), float(np.min(times)), float(np.median(floor_times)),
                   tuple(np.median(np.array(engine_times), axis=0).tolist()), ran_text))
    except TokendistError as exc:
        conn.send(("skipped", str(exc)))
    except Exception as exc:  # a bench reports every case, it does not stop at the first failure
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def bench(graphs=DEFAULT_BENCH_GRAPHS, algos=None, *, steps: int = 5, seed: int = 0, params=None,
          naive_graph: str = "torus:100x100", timeout: float = 300.0, progress=None,
          skip: int = 0) -> tuple[list[BenchRow], float]:
    """Time ``steps`` synchronous steps of each protocol on each graph.

    The timed steps follow a warm-up step (compilation, caches) and ``skip`` more untimed steps:
    a step's cost can change along a run (``sos-iou``'s short nodes grow from 3.6% at step 9 to
    81% by step 150 on torus:1000x1000; ``threads=auto`` alternates two kernels on the first
    eight steps), and ``skip`` times a later stretch of it.

    Each case runs in a forked child process with a time limit of ``timeout`` seconds (reset,
    warm-up and timed steps together), so that one slow protocol cannot stall the benchmark; the
    graph is built once in the parent and shared copy-on-write. Returns the rows and the naive
    reference's nanoseconds per edge-step.
    """
    import multiprocessing as mp

    # Message-passing protocols run on the event executor, not in vectorised steps.
    names = algos or [n for n, c in PROTOCOLS.items() if c.model != "message"]
    naive_ns = _time_naive(naive_graph, 7, seed)
    ctx = mp.get_context("fork")
    rows = []
    total = len(graphs) * len(names)
    k = 0
    for spec in graphs:
        g = make_graph(spec, seed=seed)
        if g.m == 0:
            # Nothing to time per edge; a row says so, as for a case that timed out.
            for name in names:
                k += 1
                if progress is not None:
                    progress(k, total)
                rows.append(BenchRow(name, spec, g.n, 0, None, None, None, None, "no edges: nothing to time per edge"))
            continue
        g.indptr, g.degrees, g.is_connected  # derived arrays built once, before forking
        loads = stream(seed, "init").integers(0, 100, size=g.n).astype(np.int64)
        for name in names:
            k += 1
            if progress is not None:
                progress(k, total)
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_measure_case, args=(name, g, loads, steps, seed, child, params, skip))
            proc.start()
            child.close()
            result = parent.recv() if parent.poll(timeout) else None
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
            if result is None:
                rows.append(BenchRow(name, spec, g.n, g.m, None, None, None, None, f"timed out after {timeout:g} s"))
            elif result[0] == "ok":
                _, med, reset, mem, note, transient, cpu, best, floor, engine, variant = result
                ns = med / g.m * 1e9
                rows.append(BenchRow(name, spec, g.n, g.m, ns, naive_ns / ns, mem, reset, note, transient,
                                     cpu / g.m * 1e9, best / g.m * 1e9, floor / g.m * 1e9, med / floor,
                                     engine[0] / g.m * 1e9, engine[1] / g.m * 1e9, (med + engine[0]) / med,
                                     (med + engine[0] + engine[1]) / med, variant))
            else:
                rows.append(BenchRow(name, spec, g.n, g.m, None, None, None, None, f"{result[0]}: {result[1]}"))
    return rows, naive_ns
