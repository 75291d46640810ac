"""The per-node program of ``perfect-tree`` and its executor as one compiled event loop (numba).

This is the readable program of :mod:`.._node` (Sec. 3.1-3.3 of Margara, Pistocchi, Vassura) on the
channel primitives of :mod:`.._channels` (Sec. 2) and the executor of
:class:`~tokendist.engine.MessageExecutor`, written as a state machine over arrays so that numba can
compile it. It is checked event for event against the handlers (``tests/protocols/
test_perfect_tree_kernels.py``); what follows maps one onto the other.

* **Executor.** One binary heap keyed by ``(time, seq)`` (``seq`` = order of scheduling, as the
  executor's tuple heap); an event is a row of :data:`EV_FIELDS` in an event pool. A delivery moves
  its tokens, then runs the receiver, then -- for a send with ``on_delivery`` -- the sender's
  ``("delivered", c)`` self-message, exactly as :meth:`MessageExecutor.run`. Delays are 1 (``sync``)
  or taken in send order from ``delays`` (drawn in Python from the run's ``executor`` stream by
  the same ``rng.integers(1, max_delay + 1)`` as the executor, so the same numbers in the same
  order); channels stay FIFO with at most one delivery per channel per time unit.
* **Generators.** A node's program is a Python generator that yields a ``Wait``; here it is a
  program counter ``PC`` (the yield point to resume at) and a wait descriptor (``W_*``). The
  driver :meth:`ChannelNode._advance` becomes :func:`_advance`: on every event of the node, check
  the wait; while it holds, run the program to its next wait; then, for a polling wait
  (``safeSend`` on a busy link), set the one-time-unit poll timer if none is pending.
* **Channels.** The FIFO inbox of each channel is a linked list of delivered events; ``receive(c)``
  takes its head if the phase accepts the kind (``defer``/``merge``), ``reserve``/``release`` act on
  one holder per undirected link.
* **Variables.** The paper's ``Tv, Nv, R, S, parent, Avg, p`` per node, ``subTreeT``/``subTreeN``
  per CSR slot (channel ``c`` of node ``i`` is slot ``indptr[i] + c - 1``), and the snapshot lists
  ``bigger``/``smaller`` of Phase 2 kept as the handlers keep them (``smaller`` as one flag per
  slot, recomputed only where the program recomputes it).
"""

from __future__ import annotations

import numba
import numpy as np

# ---------------------------------------------------------------- message kinds (KINDS of _node)
K_SUBTREE, K_GLOBAL, K_P2TOKEN, K_P3TOKEN, K_FINISHED, K_POLL = 0, 1, 2, 3, 4, 5
#: The names of the kinds, in code order (``messages_by_kind``).
KIND_NAMES = ("phase1-subtree", "phase1-global", "phase2-token", "phase3-token", "phase3-finished")
KIND_PHASE = np.array([1, 1, 2, 3, 3, 0], dtype=np.int64)

#: State codes, in the order of :data:`STATE_NAMES` (the handler's ``state`` strings).
STATE_NAMES = ("start", "S1.1", "S1.2", "S1.3", "S1.4", "S1.5", "S2.1", "S2.2", "S2.3", "S2.4", "S3.1", "S3.2",
               "S3-finish", "final")
FINAL = 13

# ---------------------------------------------------------------- node fields (columns of ns)
N_PC, N_WAIT, N_WC, N_WARG, N_POLLING, N_DONE, N_STATE = 0, 1, 2, 3, 4, 5, 6
N_OWN, N_TV, N_NV, N_R, N_S, N_PARENT, N_AVG, N_P = 7, 8, 9, 10, 11, 12, 13, 14
N_NSMALL, N_BIGGER, N_BALANCED, N_LI, N_EXCL = 15, 16, 17, 18, 19
N_SSC, N_SSKIND, N_SSA, N_SSB, N_SSTOK, N_SSRET = 20, 21, 22, 23, 24, 25
N_T1, N_T2, N_T3, N_P1PARENT, N_ELECTED, N_STUCK, N_CONSUMED = 26, 27, 28, 29, 30, 31, 32
N_FIELDS = 33

# ---------------------------------------------------------------- slot fields (columns of ss)
S_SUBT, S_SUBN, S_KNOWN, S_DELIVERED, S_SMALL, S_HEAD, S_TAIL, S_LAST = 0, 1, 2, 3, 4, 5, 6, 7
S_FIELDS = 8

# ---------------------------------------------------------------- event fields (columns of ev)
E_SRC, E_DST, E_DSLOT, E_KIND, E_A, E_B, E_TOK, E_ONDEL, E_NEXT = 0, 1, 2, 3, 4, 5, 6, 7, 8
EV_FIELDS = 9

# ---------------------------------------------------------------- counters (entries of cnt)
C_NOW, C_SEQ, C_HSIZE, C_FREE, C_TRANSIT, C_MESSAGES, C_TOKMSG, C_MOVED, C_EVENTS = 0, 1, 2, 3, 4, 5, 6, 7, 8
C_LOGN, C_ROWN, C_DPOS, C_DLEN, C_UNIT, C_UNITEV, C_NFINAL, C_STARTED, C_ERROR = 9, 10, 11, 12, 13, 14, 15, 16, 17
C_KIND0 = 18  # 18..22: messages by kind
C_FIELDS = 24

# ---------------------------------------------------------------- options (entries of opt)
O_PICK, O_MERGE, O_ASYNC = 0, 1, 2

# ---------------------------------------------------------------- waits and program counters
W_NONE, W_DELIV, W_ANYALL, W_ANY1, W_POLL, W_NEVER = 0, 1, 2, 3, 4, 5
(PC_P1_LOOP, PC_S11, PC_S12_SENT, PC_S12_WAIT, PC_S13_WAIT, PC_BC, PC_BC_NEXT, PC_P2_INIT, PC_P2_LOOP,
 PC_S23_SENT, PC_S23_WAITED, PC_S24_SENT, PC_P3_INIT, PC_P3_LOOP, PC_S31_SENT, PC_FIN, PC_FIN_NEXT, PC_SS_TRY,
 PC_SS_SENT, PC_FINAL) = range(20)

#: Return codes of :func:`advance`.
RUN_UNTIL, RUN_STABLE, RUN_IDLE, RUN_FULL, RUN_UNIT, RUN_ERROR = 0, 1, 2, 3, 4, 5

ELECTED_BUSY, ELECTED_RECEIVED = 1, 2


@numba.njit(cache=True, nogil=True, inline="always")
def _less(hw, hq, a, b):
    return hw[a] < hw[b] or (hw[a] == hw[b] and hq[a] < hq[b])


@numba.njit(cache=True, nogil=True)
def _push(hw, hq, hi, cnt, when, idx):
    k = cnt[C_HSIZE]
    cnt[C_HSIZE] = k + 1
    hw[k], hq[k], hi[k] = when, cnt[C_SEQ], idx
    cnt[C_SEQ] += 1
    while k > 0:
        parent = (k - 1) >> 1
        if _less(hw, hq, k, parent):
            hw[k], hw[parent] = hw[parent], hw[k]
            hq[k], hq[parent] = hq[parent], hq[k]
            hi[k], hi[parent] = hi[parent], hi[k]
            k = parent
        else:
            break


@numba.njit(cache=True, nogil=True)
def _pop(hw, hq, hi, cnt):
    size = cnt[C_HSIZE] - 1
    idx = hi[0]
    cnt[C_HSIZE] = size
    hw[0], hq[0], hi[0] = hw[size], hq[size], hi[size]
    k = 0
    while True:
        a = 2 * k + 1
        if a >= size:
            break
        b = a + 1
        c = b if b < size and _less(hw, hq, b, a) else a
        if _less(hw, hq, c, k):
            hw[k], hw[c] = hw[c], hw[k]
            hq[k], hq[c] = hq[c], hq[k]
            hi[k], hi[c] = hi[c], hi[k]
            k = c
        else:
            break
    return idx


@numba.njit(cache=True, nogil=True)
def _new_event(ev, free, cnt):
    cnt[C_FREE] -= 1
    return free[cnt[C_FREE]]


@numba.njit(cache=True, nogil=True)
def _free_event(free, cnt, idx):
    free[cnt[C_FREE]] = idx
    cnt[C_FREE] += 1


@numba.njit(cache=True, nogil=True)
def _accept(opt, phase, kind):
    # _accept_defer / _accept_merge of _node.py.
    if opt[O_MERGE] and phase == 2 and kind == K_P3TOKEN:
        return True
    return KIND_PHASE[kind] <= phase


@numba.njit(cache=True, nogil=True)
def _readable(ss, ev, opt, slot, phase):
    head = ss[slot, S_HEAD]
    return head >= 0 and _accept(opt, phase, ev[head, E_KIND])


@numba.njit(cache=True, nogil=True)
def _take(ss, ev, slot):
    # popleft of the channel's inbox; the caller frees the event after reading it.
    head = ss[slot, S_HEAD]
    nxt = ev[head, E_NEXT]
    ss[slot, S_HEAD] = nxt
    if nxt < 0:
        ss[slot, S_TAIL] = -1
    return head


@numba.njit(cache=True, nogil=True)
def _send(v, c, kind, a, b, tokens, ondel, indptr, nbr, rev, ns, ss, ev, free, hw, hq, hi, loads, log, delays, cnt,
          opt):
    # MessageExecutor.send: tokens leave now, FIFO and one delivery per channel per time unit.
    slot = indptr[v] + c - 1
    dst = nbr[slot]
    if tokens:
        if loads[v] < tokens:
            cnt[C_ERROR] = 1 + v
            return
        loads[v] -= tokens
        cnt[C_TRANSIT] += tokens
        cnt[C_TOKMSG] += 1
        cnt[C_MOVED] += tokens
        k = cnt[C_LOGN]
        log[k, 0], log[k, 1] = v, -tokens
        cnt[C_LOGN] = k + 1
    if opt[O_ASYNC]:
        delay = delays[cnt[C_DPOS]]
        cnt[C_DPOS] += 1
    else:
        delay = 1
    when = cnt[C_NOW] + delay
    last = ss[slot, S_LAST]
    if when <= last:
        when = last + 1
    ss[slot, S_LAST] = when
    cnt[C_MESSAGES] += 1
    cnt[C_KIND0 + kind] += 1
    idx = _new_event(ev, free, cnt)
    ev[idx, E_SRC], ev[idx, E_DST], ev[idx, E_DSLOT], ev[idx, E_KIND] = v, dst, rev[slot], kind
    ev[idx, E_A], ev[idx, E_B], ev[idx, E_TOK], ev[idx, E_ONDEL], ev[idx, E_NEXT] = a, b, tokens, ondel, -1
    _push(hw, hq, hi, cnt, when, idx)


@numba.njit(cache=True, nogil=True)
def _room(ns, ss, s0, v, i, level):
    # _subtree_room: level * subTreeN[i] - subTreeT[i].
    return level * ss[s0 + i - 1, S_SUBN] - ss[s0 + i - 1, S_SUBT]


@numba.njit(cache=True, nogil=True)
def _has_bigger(ns, ss, s0, v, deg):
    # bool(_bigger()): a child subtree above Avg per node.
    avg, parent = ns[v, N_AVG], ns[v, N_PARENT]
    for i in range(1, deg + 1):
        if i != parent and _room(ns, ss, s0, v, i, avg) < 0:
            return 1
    return 0


@numba.njit(cache=True, nogil=True)
def _set_smaller(ns, ss, s0, v, deg):
    # smaller = _smaller(), kept as one flag per slot and a count (the list is a snapshot).
    avg, parent = ns[v, N_AVG], ns[v, N_PARENT]
    nsmall = 0
    for i in range(1, deg + 1):
        small = 1 if (i != parent and _room(ns, ss, s0, v, i, avg) > 0) else 0
        ss[s0 + i - 1, S_SMALL] = small
        nsmall += small
    ns[v, N_NSMALL] = nsmall


@numba.njit(cache=True, nogil=True)
def _receive_token(ns, ss, ev, free, cnt, opt, s0, v, c, phase):
    slot = s0 + c - 1
    if not _readable(ss, ev, opt, slot, phase):
        return False
    idx = _take(ss, ev, slot)
    tokens = ev[idx, E_TOK]
    _free_event(free, cnt, idx)
    if tokens != 1:
        ns[v, N_CONSUMED] += 1
    ns[v, N_TV] += tokens
    ss[slot, S_SUBT] -= tokens
    return True


@numba.njit(cache=True, nogil=True)
def _add_subtree(ns, ss, ev, free, cnt, s0, v, i, idx):
    if ev[idx, E_KIND] != K_SUBTREE:
        ns[v, N_CONSUMED] += 1
    a, b = ev[idx, E_A], ev[idx, E_B]
    _free_event(free, cnt, idx)
    ns[v, N_TV] += a
    ns[v, N_NV] += b
    ss[s0 + i - 1, S_SUBT] = a
    ss[s0 + i - 1, S_SUBN] = b
    ss[s0 + i - 1, S_KNOWN] = 1
    ns[v, N_R] += 1


@numba.njit(cache=True, nogil=True)
def _ready(ns, ss, ev, holder, edge, opt, s0, v, deg):
    w = ns[v, N_WAIT]
    if w == W_NONE:
        return True
    c = ns[v, N_WC]
    if w == W_DELIV:
        return ss[s0 + c - 1, S_DELIVERED] >= ns[v, N_WARG]
    if w == W_ANYALL:
        for i in range(1, deg + 1):
            if _readable(ss, ev, opt, s0 + i - 1, ns[v, N_WARG]):
                return True
        return False
    if w == W_ANY1:
        return _readable(ss, ev, opt, s0 + c - 1, ns[v, N_WARG])
    if w == W_POLL:
        return holder[edge[s0 + c - 1]] < 0
    return False


@numba.njit(cache=True, nogil=True)
def _choose(ns, ss, opt, s0, v, deg, level, mode):
    # _choose over candidates in channel order: mode 0 = the smaller snapshot (S2.3), mode 1 = the
    # subtrees other than p with room at level (S3.1). Returns 0 when there is none.
    best, best_room = 0, 0
    for i in range(1, deg + 1):
        if mode == 0:
            if not ss[s0 + i - 1, S_SMALL]:
                continue
        elif i == ns[v, N_P] or _room(ns, ss, s0, v, i, level) <= 0:
            continue
        if opt[O_PICK] == 0:
            return i
        r = _room(ns, ss, s0, v, i, level)
        if best == 0 or r > best_room:
            best, best_room = i, r
    return best


@numba.njit(cache=True, nogil=True)
def _safe_send(ns, v, c, kind, a, b, tokens, ret):
    ns[v, N_SSC], ns[v, N_SSKIND], ns[v, N_SSA], ns[v, N_SSB] = c, kind, a, b
    ns[v, N_SSTOK], ns[v, N_SSRET] = tokens, ret
    return PC_SS_TRY


@numba.njit(cache=True, nogil=True)
def _advance(v, indptr, nbr, rev, edge, ns, ss, ev, free, hw, hq, hi, holder, loads, log, delays, cnt, opt):
    """ChannelNode._advance of node ``v``: resume its program while its wait holds."""
    if ns[v, N_DONE]:
        return
    s0 = indptr[v]
    deg = indptr[v + 1] - s0
    if _ready(ns, ss, ev, holder, edge, opt, s0, v, deg):
        ns[v, N_WAIT] = W_NONE
        pc = ns[v, N_PC]
        now = cnt[C_NOW]
        while True:  # run the program until it waits (break) or ends (return)
            if pc == PC_P1_LOOP:
                S, R = ns[v, N_S], ns[v, N_R]
                if not (S < deg or R < deg):
                    ns[v, N_T1] = now
                    ns[v, N_P1PARENT] = ns[v, N_PARENT]
                    pc = PC_P2_INIT
                elif S == 0 and R < deg - 1:
                    ns[v, N_STATE] = 1
                    pc = PC_S11
                elif S == 0 and R == deg - 1:
                    ns[v, N_STATE] = 2
                    par = 1
                    while ss[s0 + par - 1, S_KNOWN]:
                        par += 1
                    ns[v, N_PARENT] = par
                    e = edge[s0 + par - 1]
                    if holder[e] < 0 or holder[e] == v:  # reserve(parent)
                        holder[e] = v
                        if not _readable(ss, ev, opt, s0 + par - 1, 1):
                            target = ss[s0 + par - 1, S_DELIVERED] + 1
                            _send(v, par, K_SUBTREE, ns[v, N_TV], ns[v, N_NV], 0, par, indptr, nbr, rev, ns, ss,
                                  ev, free, hw, hq, hi, loads, log, delays, cnt, opt)
                            ns[v, N_WAIT], ns[v, N_WC], ns[v, N_WARG] = W_DELIV, par, target
                            pc = PC_S12_SENT
                            break
                        ns[v, N_ELECTED] = ELECTED_RECEIVED
                        if holder[e] == v:
                            holder[e] = -1
                        _add_subtree(ns, ss, ev, free, cnt, s0, v, par, _take(ss, ev, s0 + par - 1))
                        ns[v, N_PARENT] = 0
                    else:
                        ns[v, N_ELECTED] = ELECTED_BUSY
                        pc = PC_S12_WAIT
                elif S == 1 and R == deg - 1:
                    ns[v, N_STATE] = 3
                    pc = PC_S13_WAIT
                elif S == 0 and R == deg:
                    ns[v, N_STATE] = 4
                    ns[v, N_LI], ns[v, N_EXCL] = 1, 0
                    pc = PC_BC
                elif S == 1 and R == deg:
                    ns[v, N_STATE] = 5
                    ns[v, N_LI], ns[v, N_EXCL] = 1, ns[v, N_PARENT]
                    pc = PC_BC
                else:
                    cnt[C_ERROR] = -1
                    return
            elif pc == PC_S11:
                if ns[v, N_R] >= deg - 1:
                    pc = PC_P1_LOOP
                    continue
                found = 0
                for c in range(1, deg + 1):  # waitany(1): the lowest readable channel
                    if _readable(ss, ev, opt, s0 + c - 1, 1):
                        found = c
                        break
                if found == 0:
                    ns[v, N_WAIT], ns[v, N_WARG] = W_ANYALL, 1
                    break
                _add_subtree(ns, ss, ev, free, cnt, s0, v, found, _take(ss, ev, s0 + found - 1))
            elif pc == PC_S12_SENT:
                par = ns[v, N_PARENT]
                e = edge[s0 + par - 1]
                if holder[e] == v:
                    holder[e] = -1
                ns[v, N_S] += 1
                pc = PC_P1_LOOP
            elif pc == PC_S12_WAIT or pc == PC_S13_WAIT:
                par = ns[v, N_PARENT]
                if not _readable(ss, ev, opt, s0 + par - 1, 1):
                    ns[v, N_WAIT], ns[v, N_WC], ns[v, N_WARG] = W_ANY1, par, 1
                    break
                idx = _take(ss, ev, s0 + par - 1)
                if pc == PC_S12_WAIT:
                    _add_subtree(ns, ss, ev, free, cnt, s0, v, par, idx)
                    ns[v, N_PARENT] = 0
                else:
                    if ev[idx, E_KIND] != K_GLOBAL:
                        ns[v, N_CONSUMED] += 1
                    a, b = ev[idx, E_A], ev[idx, E_B]
                    _free_event(free, cnt, idx)
                    ss[s0 + par - 1, S_SUBT] = a - ns[v, N_TV]
                    ss[s0 + par - 1, S_SUBN] = b - ns[v, N_NV]
                    ss[s0 + par - 1, S_KNOWN] = 1
                    ns[v, N_TV], ns[v, N_NV] = a, b
                    ns[v, N_R] += 1
                pc = PC_P1_LOOP
            elif pc == PC_BC or pc == PC_FIN:
                i = ns[v, N_LI]
                while i <= deg and i == ns[v, N_EXCL]:
                    i += 1
                ns[v, N_LI] = i
                if i > deg:
                    if pc == PC_BC:
                        ns[v, N_S] = deg
                        pc = PC_P1_LOOP
                    else:
                        ns[v, N_T3] = now
                        ns[v, N_STATE] = FINAL
                        ns[v, N_DONE] = 1
                        ns[v, N_WAIT] = W_NONE
                        cnt[C_NFINAL] += 1
                        return
                elif pc == PC_BC:
                    pc = _safe_send(ns, v, i, K_GLOBAL, ns[v, N_TV], ns[v, N_NV], 0, PC_BC_NEXT)
                else:
                    pc = _safe_send(ns, v, i, K_FINISHED, 0, 0, 0, PC_FIN_NEXT)
            elif pc == PC_BC_NEXT or pc == PC_FIN_NEXT:
                ns[v, N_LI] += 1
                pc = PC_BC if pc == PC_BC_NEXT else PC_FIN
            elif pc == PC_SS_TRY:
                c = ns[v, N_SSC]
                e = edge[s0 + c - 1]
                if holder[e] >= 0 and holder[e] != v:  # busy: poll until the link is free
                    ns[v, N_WAIT], ns[v, N_WC] = W_POLL, c
                    break
                holder[e] = v
                target = ss[s0 + c - 1, S_DELIVERED] + 1
                _send(v, c, ns[v, N_SSKIND], ns[v, N_SSA], ns[v, N_SSB], ns[v, N_SSTOK], c, indptr, nbr, rev, ns, ss,
                      ev, free, hw, hq, hi, loads, log, delays, cnt, opt)
                ns[v, N_WAIT], ns[v, N_WC], ns[v, N_WARG] = W_DELIV, c, target
                pc = PC_SS_SENT
                break
            elif pc == PC_SS_SENT:
                e = edge[s0 + ns[v, N_SSC] - 1]
                if holder[e] == v:
                    holder[e] = -1
                pc = ns[v, N_SSRET]
            elif pc == PC_P2_INIT:
                ns[v, N_AVG] = ns[v, N_TV] // ns[v, N_NV]
                ns[v, N_TV] = ns[v, N_OWN]
                _set_smaller(ns, ss, s0, v, deg)
                big = _has_bigger(ns, ss, s0, v, deg)
                ns[v, N_BIGGER] = big
                ns[v, N_BALANCED] = 1 if (big == 0 and ns[v, N_NSMALL] == 0) else 0
                pc = PC_P2_LOOP
            elif pc == PC_P2_LOOP:
                bal, tv, avg, par = ns[v, N_BALANCED], ns[v, N_TV], ns[v, N_AVG], ns[v, N_PARENT]
                if (bal and tv == avg) or (bal and par == 0):
                    ns[v, N_T2] = now
                    pc = PC_P3_INIT
                elif not bal and tv <= avg:
                    ns[v, N_STATE] = 6
                    got = False
                    for c in range(1, deg + 1):
                        got |= _receive_token(ns, ss, ev, free, cnt, opt, s0, v, c, 2)
                    if not got:
                        ns[v, N_WAIT], ns[v, N_WARG] = W_ANYALL, 2
                        break
                    big = _has_bigger(ns, ss, s0, v, deg)  # smaller is not recomputed here
                    ns[v, N_BIGGER] = big
                    ns[v, N_BALANCED] = 1 if (big == 0 and ns[v, N_NSMALL] == 0) else 0
                elif bal and tv < avg and par > 0:
                    ns[v, N_STATE] = 7
                    if not _receive_token(ns, ss, ev, free, cnt, opt, s0, v, par, 2):
                        ns[v, N_WAIT], ns[v, N_WC], ns[v, N_WARG] = W_ANY1, par, 2
                        break
                elif not bal and tv > avg:
                    ns[v, N_STATE] = 8
                    got = False
                    for c in range(1, deg + 1):
                        got |= _receive_token(ns, ss, ev, free, cnt, opt, s0, v, c, 2)
                    big = _has_bigger(ns, ss, s0, v, deg)
                    ns[v, N_BIGGER] = big
                    saved = ns[v, N_NSMALL]
                    if saved > 0:
                        j = _choose(ns, ss, opt, s0, v, deg, avg, 0)
                        pc = _safe_send(ns, v, j, K_P2TOKEN, 0, 0, 1, PC_S23_SENT)
                    elif not got:
                        ns[v, N_WAIT], ns[v, N_WARG] = W_ANYALL, 2
                        pc = PC_S23_WAITED
                        break
                    else:
                        ns[v, N_BALANCED] = 1 if (big == 0 and saved == 0) else 0
                elif bal and tv > avg and par > 0:
                    ns[v, N_STATE] = 9
                    pc = _safe_send(ns, v, par, K_P2TOKEN, 0, 0, 1, PC_S24_SENT)
                else:
                    cnt[C_ERROR] = -2
                    return
            elif pc == PC_S23_SENT or pc == PC_S24_SENT or pc == PC_S31_SENT:
                j = ns[v, N_SSC]
                ns[v, N_TV] -= 1
                ss[s0 + j - 1, S_SUBT] += 1
                if pc == PC_S23_SENT:  # smaller = self._smaller(); balanced = not bigger and not smaller
                    big = ns[v, N_BIGGER]
                    _set_smaller(ns, ss, s0, v, deg)
                    ns[v, N_BALANCED] = 1 if (big == 0 and ns[v, N_NSMALL] == 0) else 0
                    pc = PC_P2_LOOP
                elif pc == PC_S24_SENT:
                    pc = PC_P2_LOOP
                else:
                    pc = PC_P3_LOOP
            elif pc == PC_S23_WAITED:
                ns[v, N_BALANCED] = 1 if (ns[v, N_BIGGER] == 0 and ns[v, N_NSMALL] == 0) else 0
                pc = PC_P2_LOOP
            elif pc == PC_P3_INIT:
                ns[v, N_P] = ns[v, N_PARENT]
                pc = PC_P3_LOOP
            elif pc == PC_P3_LOOP:
                tv, avg, par = ns[v, N_TV], ns[v, N_AVG], ns[v, N_PARENT]
                if tv <= avg + 1 and par == 0:
                    ns[v, N_STATE] = 12
                    ns[v, N_LI], ns[v, N_EXCL] = 1, ns[v, N_P]
                    pc = PC_FIN
                elif tv > avg + 1 and par == 0:
                    ns[v, N_STATE] = 10
                    i = _choose(ns, ss, opt, s0, v, deg, avg + 1, 1)
                    if i == 0:  # Theorem 3 says it cannot happen; the handlers wait forever too
                        ns[v, N_STUCK] = 1
                        ns[v, N_WAIT] = W_NEVER
                        break
                    pc = _safe_send(ns, v, i, K_P3TOKEN, 0, 0, 1, PC_S31_SENT)
                else:
                    ns[v, N_STATE] = 11
                    slot = s0 + par - 1
                    if not _readable(ss, ev, opt, slot, 3):
                        ns[v, N_WAIT], ns[v, N_WC], ns[v, N_WARG] = W_ANY1, par, 3
                        break
                    idx = _take(ss, ev, slot)
                    if ev[idx, E_KIND] == K_FINISHED:
                        ns[v, N_PARENT] = 0
                    else:
                        ns[v, N_TV] += ev[idx, E_TOK]
                        ss[slot, S_SUBT] -= ev[idx, E_TOK]
                    _free_event(free, cnt, idx)
            else:
                cnt[C_ERROR] = -3
                return
            if cnt[C_ERROR] != 0:
                return
        ns[v, N_PC] = pc
    # A polling wait sets its timer once (ChannelNode._advance).
    if ns[v, N_WAIT] == W_POLL and not ns[v, N_POLLING]:
        ns[v, N_POLLING] = 1
        idx = _new_event(ev, free, cnt)
        ev[idx, E_SRC], ev[idx, E_DST], ev[idx, E_DSLOT], ev[idx, E_KIND] = v, v, -1, K_POLL
        ev[idx, E_A], ev[idx, E_B], ev[idx, E_TOK], ev[idx, E_ONDEL], ev[idx, E_NEXT] = 0, 0, 0, 0, -1
        _push(hw, hq, hi, cnt, cnt[C_NOW] + 1, idx)


@numba.njit(cache=True, nogil=True)
def start(indptr, nbr, rev, edge, ns, ss, ev, free, hw, hq, hi, holder, loads, log, delays, cnt, opt):
    """MessageExecutor.start: every node's program from its first line (Phase 1 set-up), in id order."""
    n = loads.shape[0]
    cnt[C_STARTED] = 1
    cnt[C_UNIT] = 1  # the engine runs start() inside its first time unit
    cnt[C_UNITEV] = 1
    for v in range(n):
        ns[v, N_OWN] = loads[v]
        ns[v, N_TV], ns[v, N_NV], ns[v, N_R], ns[v, N_S], ns[v, N_PARENT] = loads[v], 1, 0, 0, 0
        ns[v, N_PC], ns[v, N_WAIT] = PC_P1_LOOP, W_NONE
        _advance(v, indptr, nbr, rev, edge, ns, ss, ev, free, hw, hq, hi, holder, loads, log, delays, cnt, opt)
        if cnt[C_ERROR] != 0:
            return


@numba.njit(cache=True, nogil=True)
def advance(until, one_unit, indptr, nbr, rev, edge, ns, ss, ev, free, hw, hq, hi, holder, loads, log, rows, delays,
            cnt, opt):
    """Run time units up to ``until`` (inclusive); one row ``(t, moved, messages, 2 * log length)`` per
    time unit with events.

    Returns :data:`RUN_STABLE` at the first time unit that moved no token with none in transit and
    every node final (the engine's stop rule), :data:`RUN_IDLE` when nothing is left to happen
    before that, :data:`RUN_FULL` at a time-unit boundary where a buffer could overflow in the next
    unit (the caller grows it and calls again), :data:`RUN_UNIT` after one unit with events if
    ``one_unit``, :data:`RUN_UNTIL` past ``until`` and :data:`RUN_ERROR` on a send of tokens the
    sender does not hold.
    """
    n = loads.shape[0]
    cap_rows, cap_log, cap_delays = rows.shape[0], log.shape[0], delays.shape[0]
    while True:
        size = cnt[C_HSIZE]
        nxt = hw[0] if size > 0 else -1
        unit = cnt[C_UNIT]
        if unit > 0 and (size == 0 or nxt > unit):  # the unit being run has ended: its row
            if cnt[C_UNITEV]:
                r = cnt[C_ROWN]
                prev_moved = rows[r - 1, 1] if r > 0 else 0
                rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3] = unit, cnt[C_MOVED], cnt[C_MESSAGES], 2 * cnt[C_LOGN]
                cnt[C_ROWN] = r + 1
                cnt[C_UNITEV] = 0
                if cnt[C_MOVED] == prev_moved and cnt[C_TRANSIT] == 0 and cnt[C_NFINAL] == n:
                    return RUN_STABLE
                if one_unit:
                    return RUN_UNIT
            # The next time unit moves nothing (it has no event, or it is the next unit anyway):
            # stable there if nothing is in transit and every node is final.
            if cnt[C_TRANSIT] == 0 and cnt[C_NFINAL] == n and unit + 1 <= until:
                cnt[C_UNIT] = unit + 1
                cnt[C_NOW] = unit + 1
                return RUN_STABLE
            if size == 0:
                return RUN_IDLE
            if nxt > until:
                return RUN_UNTIL
            # Room for one more unit: every event of it is on the heap now and adds at most three
            # log entries, two sends and one timer.
            if (cnt[C_ROWN] + 1 > cap_rows or cnt[C_LOGN] + 3 * size + 3 > cap_log or cnt[C_FREE] < 2 * size + 2
                    or hw.shape[0] < 3 * size + 3 or (opt[O_ASYNC] and cnt[C_DPOS] + 2 * size + 2 > cap_delays)):
                return RUN_FULL
            cnt[C_UNIT] = nxt
            unit = nxt
        elif unit == 0:
            return RUN_ERROR  # not started
        idx = _pop(hw, hq, hi, cnt)
        cnt[C_NOW] = unit
        cnt[C_UNITEV] = 1
        cnt[C_EVENTS] += 1
        dst, kind = ev[idx, E_DST], ev[idx, E_KIND]
        if kind == K_POLL:
            ns[dst, N_POLLING] = 0
            _free_event(free, cnt, idx)
            _advance(dst, indptr, nbr, rev, edge, ns, ss, ev, free, hw, hq, hi, holder, loads, log, delays, cnt, opt)
        else:
            tokens = ev[idx, E_TOK]
            if tokens:
                loads[dst] += tokens
                cnt[C_TRANSIT] -= tokens
                k = cnt[C_LOGN]
                log[k, 0], log[k, 1] = dst, tokens
                cnt[C_LOGN] = k + 1
            slot = ev[idx, E_DSLOT]
            src, ondel = ev[idx, E_SRC], ev[idx, E_ONDEL]
            tail = ss[slot, S_TAIL]
            if tail < 0:
                ss[slot, S_HEAD] = idx
            else:
                ev[tail, E_NEXT] = idx
            ss[slot, S_TAIL] = idx
            _advance(dst, indptr, nbr, rev, edge, ns, ss, ev, free, hw, hq, hi, holder, loads, log, delays, cnt, opt)
            if ondel > 0 and cnt[C_ERROR] == 0:  # the sender's ("delivered", c), right after
                cnt[C_EVENTS] += 1
                ss[indptr[src] + ondel - 1, S_DELIVERED] += 1
                _advance(src, indptr, nbr, rev, edge, ns, ss, ev, free, hw, hq, hi, holder, loads, log, delays, cnt,
                         opt)
        if cnt[C_ERROR] != 0:
            return RUN_ERROR
