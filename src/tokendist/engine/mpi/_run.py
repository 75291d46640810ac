"""The partitioned bulk-synchronous executor: one synchronous run over the ranks of an MPI job.

Every rank builds the same graph, initial loads and protocol from the run's seed, keeps the part
:mod:`._partition` gives it (:class:`._halo.LocalPart`: its nodes and their ghosts), and runs each
step of the protocol's per-edge rule on that part (the protocol's ``partitioned_step``). After the
update the owned loads travel to the ranks that keep them as ghosts (one neighbour exchange).

The engine's guarantees of :func:`tokendist.simulate` hold for the whole graph, decided together:
conservation (a sum over the ranks each step), feasibility (no node sends more than it holds:
the smallest offending node over the ranks, as the single-process engine names), the stopping
rules (discrepancy targets from global extremes, ``stable`` from the protocol's collective test,
fixed points and cycles from the gathered state on rank 0 below the same size limit), and the
trace, measured on rank 0 from the gathered loads at every recorded step. Random choices are
keyed by (seed, step, global edge id), so the result is the single-process result bit for bit
whatever the number of ranks and the partition; the load moved by a real-valued scheme is summed
in node order on rank 0, as the kernels sum it.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import traceback

import numpy as np

from ..._random import stream
from ...errors import ConservationError, InfeasibleStepError, TokendistError
from .._cycles import state_bytes
from .._metrics import measure
from .._simulate import _CYCLE_DETECTION_MAX_N, TRACE_METRICS, RunResult, _plain, prepare_run, register_backend
from ._halo import LocalPart
from ._messages import MESSAGE_PROTOCOLS, run_message_ranks
from ._partition import PARTITIONS, edge_cut, partition

__all__ = ["run_partitioned", "mpi_world", "partitioned_refusal", "PARTITIONED_PROTOCOLS"]

#: The protocols with a partitioned step (the others refuse ``--backend mpi`` in one line).
PARTITIONED_PROTOCOLS = ("multi-port", "single-port", "ds", "threshold1", "threshold2", "discrepancy1", "diffusion",
                         "diffusion-floor", "diffusion-ceil", "diffusion-random", "diffusion-oriented", "fos",
                         "fos-floor", "sos", "sos-iou", "randomized-diffusion", "stratified-diffusion", "quasirandom",
                         "rotor-router", "flow-imitation", "random-matching", "balancing-circuit",
                         "pairwise-averaging", "random-walk")

# Why the other protocols do not run partitioned yet (one line each).
_WHY = {
    "perfect-tree": "a message-passing protocol: --backend mpi runs its per-node handlers as ranks "
                    "(engine/mpi/_messages.py), not in synchronous partitioned steps",
    "async-multi-port": "a message-passing protocol: --backend mpi runs its per-node handlers as ranks "
                        "(engine/mpi/_messages.py), not in synchronous partitioned steps",
}


def mpi_world():
    """``mpi4py.MPI.COMM_WORLD``; one clear line when mpi4py is not installed.

    With more ranks on this host than cores (``mpiexec``'s ``MPI_LOCALNRANKS``), MPICH's waiting
    ranks yield the processor (``MPIR_CVAR_ENABLE_HEAVY_YIELD=1``, unless set): busy-polling ranks
    otherwise hold the cores the ranks they wait for need (5x the time per step of the message
    protocols measured with 4 ranks on 2 cores, docs/guide/mpi.md).
    """
    if int(os.environ.get("MPI_LOCALNRANKS", "1")) > (os.cpu_count() or 1):
        os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    try:
        from mpi4py import MPI  # optional dependency of --backend mpi only
    except ImportError:
        raise TokendistError("--backend mpi needs mpi4py and an MPI library (pip install 'tokendist[mpi]')") from None
    return MPI.COMM_WORLD


def partitioned_refusal(protocol) -> str | None:
    """The one-line reason ``protocol`` cannot run partitioned, or None when it can."""
    step = getattr(type(protocol), "partitioned_step", None)
    if step is None:
        why = _WHY.get(protocol.name, f"it has no partitioned step (those that do: {', '.join(PARTITIONED_PROTOCOLS)})")
        return f"{protocol.name} cannot run partitioned yet: {why}"
    check = getattr(protocol, "partitioned_refusal", None)
    why = check() if check is not None else None
    return None if why is None else f"{protocol.name} cannot run partitioned yet: {why}"


class _Gather:
    """Owned values of every rank assembled in global node order on rank 0 (numpy Gatherv)."""

    def __init__(self, comm, part: LocalPart, n: int):
        self.comm, self.part, self.n = comm, part, n
        counts = np.array(comm.allgather(int(part.owned.size)), dtype=np.int64)
        self.counts = counts
        self.displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        ids = np.empty(int(counts.sum()), dtype=np.int64) if comm.Get_rank() == 0 else None
        comm.Gatherv(np.ascontiguousarray(part.owned_global), [ids, (counts, self.displs)] if ids is not None else None,
                     root=0)
        self.order = ids
        # Each rank one range of ids, in rank order: running sums can go from rank to rank.
        own = part.owned_global
        one_range = bool(own.size == 0 or own[-1] - own[0] + 1 == own.size)
        starts = comm.allgather(int(own[0]) if own.size else -1)
        chained = comm.allreduce(one_range) == comm.Get_size()
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.chained = bool(chained and all(s == -1 or s == o for s, o in zip(starts, offsets)))

    def __call__(self, local: np.ndarray):
        """The whole array on rank 0 (None on the others); collective."""
        send = np.ascontiguousarray(local[self.part.owned])
        if self.comm.Get_rank() != 0:
            self.comm.Gatherv(send, None, root=0)
            return None
        buf = np.empty(self.n, dtype=local.dtype)
        self.comm.Gatherv(send, [buf, (self.counts, self.displs)], root=0)
        full = np.empty(self.n, dtype=local.dtype)
        full[self.order] = buf
        return full


#: Seconds between a defective rank's traceback and its abort of the job (see run_partitioned).
_ABORT_GRACE = 0.5


def run_partitioned(*args, comm=None, **kwargs) -> RunResult:
    """:func:`tokendist.simulate` over the ranks of ``comm`` (see :func:`_run_partitioned`).

    A defect (any exception but a :class:`TokendistError`, which every rank raises together) on one
    rank would leave the others waiting in a collective for ever: it aborts the whole job instead,
    after printing its traceback.
    """
    if comm is None:
        comm = mpi_world()
    try:
        return _run_partitioned(*args, comm=comm, **kwargs)
    except TokendistError:
        raise
    except BaseException:
        if comm.Get_size() > 1:
            traceback.print_exc()
            sys.stderr.flush()
            # The launcher forwards each rank's output through a pipe; an abort at once can end the
            # job before it has read the traceback (an empty stderr, once in a loaded CI run).
            time.sleep(_ABORT_GRACE)
            comm.Abort(1)
        raise


def _run_partitioned(graph, algo, init, *, seed=None, params=None, max_steps=None, until_discrepancy=None,
                    until_local_discrepancy=None, record_every=1, allow_infeasible=False, check=False,
                    dynamics=None, injection=None, speeds=None, progress=None, detect_cycles=True,
                    keep_loads_every=None, partition_method="contiguous", comm=None) -> RunResult:
    """:func:`tokendist.simulate` over the ranks of ``comm`` (default ``MPI.COMM_WORLD``).

    Collective: every rank of ``comm`` calls it with the same arguments. Every rank returns the
    same :class:`RunResult` (rank 0 measured it), equal to the single-process run's but for
    ``seconds`` and ``ranks`` (ranks, partition, edge cut, halo bytes).

    Parameters
    ----------
    partition_method : str
        ``contiguous`` (node ranges) or ``metis`` (see :func:`.partition`).
    comm : mpi4py communicator, optional
        The ranks to run on.

    Other parameters are :func:`tokendist.simulate`'s.
    """
    started = time.perf_counter()
    if comm is None:
        comm = mpi_world()
    rank, size = comm.Get_rank(), comm.Get_size()
    if partition_method not in PARTITIONS:
        raise TokendistError(f"unknown partition {partition_method!r}; choose one of {', '.join(PARTITIONS)}")
    for what, given in (("dynamic networks", dynamics), ("token injection", injection)):
        if given is not None:
            raise TokendistError(f"{what} cannot run partitioned yet: the step's graph or loads change on every rank")
    if check:
        raise TokendistError("--check cannot run partitioned yet: the model check reads every edge's flow")
    graph, protocol, loads, max_steps = prepare_run(
        graph, algo, init, seed=seed, params=params, speeds=speeds, dynamics=None, max_steps=max_steps,
        record_every=record_every, until_discrepancy=until_discrepancy, until_local_discrepancy=until_local_discrepancy,
        refuse=lambda p: None if p.name in MESSAGE_PROTOCOLS else partitioned_refusal(p))
    if protocol.name in MESSAGE_PROTOCOLS:  # per-node handlers placed on the ranks (._messages)
        return run_message_ranks(comm, graph, protocol, loads, seed=seed, max_steps=max_steps,
                                 until_discrepancy=until_discrepancy, until_local_discrepancy=until_local_discrepancy,
                                 record_every=record_every, detect_cycles=detect_cycles,
                                 partition_method=partition_method, progress=progress, started=started,
                                 keep_loads_every=keep_loads_every)

    initial_loads = loads.copy()
    protocol.reset(graph, loads.copy(), stream(seed, "protocol"))
    owner = _owners(comm, graph, size, partition_method)
    part = LocalPart(comm, graph, owner)
    setup = getattr(protocol, "partitioned_setup", None)
    if setup is not None:
        setup(part)
    gather = _Gather(comm, part, graph.n)
    root = rank == 0
    own = part.owned_sel
    local = np.ascontiguousarray(loads[part.nodes])
    del loads

    total = initial_loads.sum()
    tol = 1e-9 * (abs(float(total)) + graph.n) if protocol.divisible else 0
    trace = {k: [] for k in ("step", "tokens_moved", "messages", *TRACE_METRICS)}
    moved_total, messages_total, infeasible = 0, 0, 0
    g_local = part.graph

    def record(t, full):
        if root:
            trace["step"].append(t)
            trace["tokens_moved"].append(moved_total)
            trace["messages"].append(messages_total)
            for k, v in measure(graph, full, TRACE_METRICS).items():
                trace[k].append(v)

    def reached(w) -> bool:
        if until_discrepancy is None and until_local_discrepancy is None:
            return False
        mine = w[own]
        local_disc = np.abs(w[g_local.u] - w[g_local.v]).max() if g_local.m else w.dtype.type(0)
        if mine.size:
            figures = np.array([mine.max(), -mine.min(), local_disc], dtype=w.dtype)
        else:
            low = np.iinfo(np.int64).min if w.dtype.kind in "iu" else -np.inf
            figures = np.array([low, low, local_disc], dtype=w.dtype)
        hi, neg_lo, loc = part.allreduce_array(figures, "max")
        if w.dtype.kind in "iu":
            # Python ints: an int64 compared with a float level is rounded to float64 first (2**53 + 1
            # would be at most 2.0**53), and Python compares an int with a float exactly.
            hi, neg_lo, loc = int(hi), int(neg_lo), int(loc)
        if until_discrepancy is not None and hi + neg_lo <= until_discrepancy:
            return True
        if until_local_discrepancy is not None and loc <= until_local_discrepancy:
            return True
        return False

    cycles = detect_cycles and not protocol.randomized and graph.n <= _CYCLE_DETECTION_MAX_N
    state = 0  # the step after which the current loads are (0: the initial loads)
    cache = [-1, None]  # (state, the loads gathered on rank 0): a record and the next cycle check share one

    def gathered(at):
        if cache[0] != at:
            cache[:] = [at, gather(local)]
        return cache[1]

    seen: dict[bytes, tuple[int, float]] = {}
    record(0, initial_loads)
    history = [initial_loads.copy()] if keep_loads_every and root else None
    stop_reason, cycle_length, t = "max-steps", None, 0
    step_seconds = 0.0
    bytes_before = part.bytes_exchanged
    steps_run, steps_timed = 0, 0
    if reached(local):
        stop_reason = "target-reached"
    else:
        for t in range(max_steps):
            if cycles and t % protocol.period == 0:
                full = gathered(t)
                verdict = np.zeros(2, dtype=np.int64)  # (0 go on | 1 fixed point | 2 cycle | 3 rounding cycle, length)
                state_key = (protocol.partitioned_state_key(part) if hasattr(protocol, "partitioned_state_key")
                             else protocol.state_key())
                if root and state_key is not None:
                    key = hashlib.blake2b(full.tobytes() + state_bytes(state_key), digest_size=16).digest()
                    if key in seen:
                        first, moved_then = seen[key]
                        verdict[:] = (1 if moved_total == moved_then else (3 if protocol.divisible else 2), t - first)
                    else:
                        seen[key] = (t, moved_total)
                comm.Bcast(verdict, root=0)
                if verdict[0]:
                    cycle_length = int(verdict[1])
                    stop_reason = {1: "fixed-point", 2: "cycle", 3: "rounding-cycle"}[int(verdict[0])]
                    break
            tick = time.perf_counter()
            out = protocol.partitioned_step(t, part, local)
            new, sent = out.loads, out.outflow
            # Feasibility, conservation and the load moved, over the ranks.
            bad = np.flatnonzero(sent[own] > local[own] + tol)
            first_bad = int(part.owned_global[bad[0]]) if bad.size else graph.n
            mine_new = new[own]
            if protocol.divisible:
                moved = _ordered_sum(comm, gather, sent)
                held, bad_ranks = part.allreduce_array(np.array([mine_new.sum(), float(bad.size > 0)]), "sum")
            else:
                held, moved, bad_ranks = (int(x) for x in part.allreduce_array(
                    np.array([mine_new.sum(), sent[own].sum() + out.info.get("relayed", 0), bad.size > 0],
                             dtype=np.int64), "sum"))  # relayed: second hops beyond the outflow (Case 2)
            if bad_ranks:
                first_bad = int(part.allreduce(first_bad, "min"))
                if not allow_infeasible:
                    src = int(owner[first_bad])
                    pair = np.zeros(2, dtype=local.dtype)
                    if rank == src:
                        i = int(np.searchsorted(part.nodes, first_bad))
                        pair[:] = (local[i], sent[i])
                    comm.Bcast(pair, root=src)
                    raise InfeasibleStepError(t, first_bad, _plain(pair[0]), _plain(pair[1]), protocol.name)
                infeasible += 1
            if (abs(held - total) > tol) if protocol.divisible else held != total:
                raise ConservationError(f"{protocol.name} broke token conservation at step {t}: "
                                        f"{total} tokens became {held}")
            local = np.ascontiguousarray(new)
            part.exchange(local)
            state = t + 1  # the loads now held are those after step t
            steps_run += 1
            if t > 0:  # the first step loads the compiled kernels: not counted in the time per step
                step_seconds += time.perf_counter() - tick
                steps_timed += 1
            moved_total += moved
            messages_total += out.messages
            step_no = t + 1
            done = reached(local)
            if not done and moved == 0 and out.in_transit == 0:
                if protocol.partitioned_is_stable(part, local):
                    stop_reason = "stable"
                    done = True
            elif done:
                stop_reason = "target-reached"
            if keep_loads_every and step_no % keep_loads_every == 0:
                full = gathered(step_no)
                if root:
                    history.append(full.copy())
            if step_no % record_every == 0 or done or step_no == max_steps:
                record(step_no, gathered(step_no))
            if progress is not None and root and (step_no & 63) == 0:
                progress(step_no, max_steps)
            if done:
                t = step_no
                break
        else:
            t = max_steps
        if stop_reason == "max-steps" and protocol.partitioned_is_stable(part, local):
            stop_reason = "stable"
    if progress is not None and root:
        progress(t, max_steps)
    final = gathered(state)
    exchanged = part.allreduce(part.bytes_exchanged - bytes_before, "sum")
    step_seconds = part.allreduce(step_seconds, "max")
    finish = getattr(protocol, "partitioned_finish", None)
    if finish is not None:  # per-edge and per-node state gathered on rank 0 for report() (collective)
        finish(part)
    for name in getattr(protocol, "partitioned_edge_sums", ()):
        mine = np.ascontiguousarray(getattr(protocol, name))
        summed = np.empty_like(mine) if root else None
        comm.Reduce(mine, summed, root=0)
        if root:
            setattr(protocol, name, summed)
    ranks = {"count": size, "partition": partition_method, "edge_cut": edge_cut(graph, owner),
             "halo_bytes": int(exchanged), "halo_bytes_per_step": exchanged / steps_run if steps_run else 0.0,
             "seconds_per_step": step_seconds / steps_timed if steps_timed else 0.0}
    part.free()
    result = None
    if root:
        result = RunResult(
            graph=graph, algorithm=protocol.name, params=dict(protocol.options), seed=seed, steps=t,
            stop_reason=stop_reason, tokens=_plain(total), initial=measure(graph, initial_loads),
            final=measure(graph, final), tokens_moved=moved_total, messages=messages_total,
            infeasible_steps=infeasible, loads=final, initial_loads=initial_loads,
            trace={k: np.asarray(v) for k, v in trace.items()}, report=protocol.report(), dynamics=None,
            seconds=time.perf_counter() - started, cycle_length=cycle_length,
            load_history=None if history is None else np.array(history), ranks=ranks,
            # Which variant ran: each rank runs the protocol's partitioned step on its part.
            variants={f"partitioned, {ranks['count']} ranks ({ranks['partition']})": t} if t else {},
        )
    # Once, after the step loop: every rank returns rank 0's result.
    return comm.bcast(result, root=0)


def _owners(comm, graph, size, method) -> np.ndarray:
    """The owner of every node, computed on rank 0 and broadcast (one error line on every rank)."""
    owner, error = None, None
    if comm.Get_rank() == 0:
        try:
            owner = partition(graph, size, method)
        except TokendistError as exc:
            error = str(exc)
    error = comm.bcast(error, root=0)
    if error is not None:
        raise TokendistError(error)
    if owner is None:
        owner = np.empty(graph.n, dtype=np.int32)
    comm.Bcast(owner, root=0)
    return owner


def _ordered_sum(comm, gather, values) -> float:
    """``sum(values)`` over the owned nodes of every rank, added in global node order from 0.0.

    The order in which the serial kernels add the per-node outflows of a real-valued scheme:
    the load moved is then the single-process figure bit for bit (numpy's cumulative sum adds
    strictly left to right). When every rank owns one range of node ids, in rank order (the
    contiguous partition), the running sum is passed from rank to rank (K - 1 messages of one
    number); otherwise the values are gathered on rank 0 (n numbers).
    """
    part = gather.part
    out = np.zeros(1)
    if gather.chained:
        rank, size = part.rank, part.size
        if rank > 0:
            comm.Recv(out, source=rank - 1, tag=7)
        mine = values[part.owned_sel]
        if mine.size:
            out[0] = np.cumsum(np.concatenate([out, mine]))[-1]
        if rank < size - 1:
            comm.Send(out, dest=rank + 1, tag=7)
        comm.Bcast(out, root=size - 1)
        return float(out[0])
    full = gather(values)
    if full is not None and full.size:
        out[0] = np.cumsum(full)[-1]
    comm.Bcast(out, root=0)
    return float(out[0])


register_backend("mpi", run_partitioned)
