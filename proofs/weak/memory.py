"""An operational, view-based model of RC11 without load buffering (issue 31).

The model is the promise-free fragment of the promising semantics (Kang et al., POPL 2017),
with views as in its "strong release/acquire" presentation: each location has a modification
order (mo) of messages, each message a value, a view (what a thread that acquires it learns)
and a flag that says an RMW wrote it reading the message right before it. Each thread has a
current view `cur` (per location, the mo index of the latest message it may not read before),
an acquire view `acq` (what an acquire fence would add) and per-location release views `rel`
(what a relaxed write to that location releases: set by release writes and release fences).

What it covers:
- relaxed, acquire, release, acq_rel and seq_cst loads, stores and read-modify-writes (strong
  CAS, fetch_add, exchange); acquire, release, acq_rel and seq_cst fences;
- coherence (a thread reads no message older in mo than its view of the location: CoRR,
  CoWR, CoRW, CoWW);
- writes anywhere in mo after the writer's view, not only at the end (2+2W, the weak outcome of
  CoWW-like tests between threads);
- RMW atomicity: an RMW reads a message and puts its own immediately after it in mo; no later
  write may be put in between, so no two RMWs read the same message;
- release sequences as RC11 (Lahav et al., PLDI 2017) defines them: the release write, the
  same thread's later writes to the location (per-location release view), and the RMWs that
  read from any of them (an RMW's message carries the view of the message it read);
- a failed strong CAS is a load with the failure ordering.

What it leaves out or approximates:
- load buffering: a read returns a message that exists when it runs, so po U rf is acyclic
  (RC11 forbids LB by that axiom; C11 and ARMv8 hardware allow the relaxed LB outcome);
- seq_cst accesses: approximated by a global SC view, joined into the thread's view before
  the (acquire/release) access and the thread's view joined into it after. The SC accesses of a
  run are then totally ordered by the interleaving, each seeing all that the SC accesses before
  it saw. This is at least as strong as RC11's psc for programs whose atomics to a location are
  all seq_cst (SB, IRIW, 2+2W with seq_cst are forbidden, as in RC11); it can forbid an outcome
  RC11 allows where seq_cst and weaker accesses mix, so "holds at seq_cst" here is weaker
  evidence than "holds at acq_rel" (the orderings table says which);
- seq_cst fences: cur := acq joined with the SC view, and the SC view := cur (the promising
  semantics' SC fence), not RC11's full psc_F;
- consume (taken as acquire by every compiler), mixed-size and non-atomic accesses (data races
  are not detected), weak CAS's spurious failures, and memory_order on the clock (a clock read
  is not a memory access: it returns the physical time of its step and synchronises nothing).

The interleaving of steps is physical time: a step that reads an old message reads it at the
time of its step. State is kept in tuples (hashable, for de-duplication): a location is a tuple
of messages (value, view, rmw); a view is a tuple of mo indices, one per location. Inserting a
message shifts every index at or past it (`_insert`), so equal states are equal tuples.

`MODELS` holds the model and two deliberately broken ones that the litmus oracles must catch:
`acquire-no-sync` (an acquire load or RMW does not take the message's view) and
`rmw-not-atomic` (an RMW may read a message another RMW has read).
"""

from __future__ import annotations

from dataclasses import dataclass

RLX, ACQ, REL, ACQ_REL, SC = "relaxed", "acquire", "release", "acq_rel", "seq_cst"
ORDERS = (RLX, ACQ, REL, ACQ_REL, SC)
_ACQUIRES = (ACQ, ACQ_REL, SC)
_RELEASES = (REL, ACQ_REL, SC)


def is_acquire(order: str) -> bool:
    return order in _ACQUIRES


def is_release(order: str) -> bool:
    return order in _RELEASES


@dataclass(frozen=True)
class MemoryModel:
    """One memory model: RC11 without load buffering, or a deliberately broken twin."""

    name: str
    acquire_syncs: bool = True  # broken twin: an acquire read does not take the message's view
    rmw_atomic: bool = True  # broken twin: an RMW may read a message an RMW has read already


RC11 = MemoryModel("rc11-no-lb")
MODELS = {m.name: m for m in (RC11, MemoryModel("acquire-no-sync", acquire_syncs=False),
                              MemoryModel("rmw-not-atomic", rmw_atomic=False))}


# A thread's memory state: (cur, acq, rel) with rel a tuple of views (one per location).
# The shared memory: (locs, sc) with locs a tuple (one per location) of tuples of messages.

def join(a: tuple, b: tuple) -> tuple:
    return tuple(x if x >= y else y for x, y in zip(a, b))


def initial_memory(values: tuple) -> tuple:
    n = len(values)
    bottom = (0,) * n
    return tuple(((v, bottom, False),) for v in values), bottom


def initial_thread(nlocs: int) -> tuple:
    bottom = (0,) * nlocs
    return bottom, bottom, (bottom,) * nlocs


def _with(view: tuple, x: int, i: int) -> tuple:
    return view[:x] + (i,) + view[x + 1:]


def _bump(view: tuple, x: int, p: int) -> tuple:
    return view if view[x] < p else _with(view, x, view[x] + 1)


def _insert(locs: tuple, sc: tuple, ths: tuple, x: int, p: int, msg: tuple):
    """Put `msg` at mo index p of location x; every view's index >= p at x moves up one."""
    def bump_msg(m):
        return (m[0], _bump(m[1], x, p), m[2])

    new_locs = tuple(tuple(bump_msg(m) for m in loc) for loc in locs)
    loc = new_locs[x]
    new_locs = new_locs[:x] + (loc[:p] + (msg,) + loc[p:],) + new_locs[x + 1:]
    new_ths = tuple((_bump(c, x, p), _bump(a, x, p), tuple(_bump(r, x, p) for r in rel))
                    for c, a, rel in ths)
    return new_locs, _bump(sc, x, p), new_ths


def readable(locs: tuple, cur: tuple, x: int) -> range:
    """The mo indices a thread with view `cur` may read at x (coherence)."""
    return range(cur[x], len(locs[x]))


def write_slots(locs: tuple, cur: tuple, x: int) -> list[int]:
    """The mo indices where a plain write may go: after the writer's view, and not between an
    RMW's message and the one it read."""
    loc = locs[x]
    return [p for p in range(cur[x] + 1, len(loc) + 1) if p == len(loc) or not loc[p][2]]


def is_rmw_free(locs: tuple, x: int, i: int) -> bool:
    loc = locs[x]
    return i + 1 == len(loc) or not loc[i + 1][2]


def _sc_before(order, cur, acq, sc):
    if order == SC:
        return join(cur, sc), join(acq, sc)
    return cur, acq


def _read_views(model, order, cur, acq, x, i, view):
    """A thread's (cur, acq) after reading message i of x, whose view is `view`: the read
    raises cur at x; an acquire takes the message's view into cur, any read into acq (what a
    later acquire fence takes)."""
    c = _with(cur, x, i) if i > cur[x] else cur
    a = join(acq, view)
    if is_acquire(order) and model.acquire_syncs:
        c = join(c, view)
    return c, join(a, c)


def load(model: MemoryModel, mem: tuple, ths: tuple, t: int, x: int, order: str):
    """Every message thread t may read at x: [(mo index, value, mem', ths')]."""
    locs, sc = mem
    cur, acq, rel = ths[t]
    cur, acq = _sc_before(order, cur, acq, sc)
    out = []
    for i in readable(locs, cur, x):
        value, view, _ = locs[x][i]
        c, a = _read_views(model, order, cur, acq, x, i, view)
        s = join(sc, c) if order == SC else sc
        out.append((i, value, (locs, s), ths[:t] + ((c, a, rel),) + ths[t + 1:]))
    return out


def store(model: MemoryModel, mem: tuple, ths: tuple, t: int, x: int, value, order: str):
    """Every place in mo a store of `value` by thread t may take: [(mem', ths')]."""
    locs, sc = mem
    out = []
    for p in write_slots(locs, ths[t][0], x):
        out.append(_write(mem, ths, t, x, value, order, p, None))
    return out


def _write(mem, ths, t, x, value, order, p, read_view):
    """Write at mo index p (an RMW: right after the message it read, whose view is read_view)."""
    locs, sc = mem
    cur, acq, rel = ths[t]
    cur, acq = _sc_before(order, cur, acq, sc)
    ths = ths[:t] + ((cur, acq, rel),) + ths[t + 1:]
    locs, sc, ths = _insert(locs, sc, ths, x, p, (value, (0,) * len(locs), read_view is not None))
    cur, acq, rel = ths[t]
    cur = _with(cur, x, p)
    acq = join(acq, cur)
    if is_release(order):
        rel = rel[:x] + (cur,) + rel[x + 1:]
        view = cur
    else:
        view = _with(rel[x], x, p)
    if read_view is not None:
        view = join(view, read_view)  # the release sequence goes on through the RMW
    loc = locs[x]
    locs = locs[:x] + (loc[:p] + ((value, view, read_view is not None),) + loc[p + 1:],) \
        + locs[x + 1:]
    if order == SC:
        sc = join(sc, cur)
    return (locs, sc), ths[:t] + ((cur, acq, rel),) + ths[t + 1:]


def rmw(model: MemoryModel, mem: tuple, ths: tuple, t: int, x: int, update, order: str,
        fail_order: str | None = None):
    """Every outcome of an RMW by thread t at x. `update(old)` gives the new value, or None
    for a failed CAS (then a load with `fail_order`). [(mo index read, old, ok, mem', ths')]."""
    locs, sc = mem
    cur, acq, rel = ths[t]
    c0, a0 = _sc_before(order, cur, acq, sc)
    out = []
    for i in readable(locs, c0, x):
        old, view, _ = locs[x][i]
        new = update(old)
        if new is None or (model.rmw_atomic and not is_rmw_free(locs, x, i)):
            continue
        c, a = _read_views(model, order, c0, a0, x, i, view)
        th2 = ths[:t] + ((c, a, rel),) + ths[t + 1:]
        m2, t2 = _write((locs, sc), th2, t, x, new, order, i + 1, view)
        out.append((i, old, True, m2, t2))
    # a failed (strong) CAS: a load, with the failure ordering, of a value it does not match
    for i, value, m2, t2 in load(model, mem, ths, t, x, fail_order or RLX):
        if update(value) is None:
            out.append((i, value, False, m2, t2))
    return out


def fence(model: MemoryModel, mem: tuple, ths: tuple, t: int, order: str):
    locs, sc = mem
    cur, acq, rel = ths[t]
    if is_acquire(order) and model.acquire_syncs:
        cur = acq
    if order == SC:
        cur = join(cur, sc)
        acq = join(acq, cur)
        sc = cur
    if is_release(order):
        rel = (cur,) * len(locs)
    return (locs, sc), ths[:t] + ((cur, acq, rel),) + ths[t + 1:]


def latest(mem: tuple, x: int):
    """The value of the mo-last message at x (what a sequentially consistent read returns)."""
    return mem[0][x][-1][0]


def collect(mem: tuple, ths: tuple):
    """Drop, at each location, the messages before every thread's view of it: no thread can
    read them or write before them, and a view that names one of them says no more than every
    thread's view does already (views are only ever joined into a thread's). Indices move
    down; the first message kept loses its RMW mark (nothing can be put before it)."""
    locs, sc = mem
    low = [min(th[0][x] for th in ths) for x in range(len(locs))]
    if not any(low):
        return mem, ths

    def cut(view):
        return tuple(v - m if v > m else 0 for v, m in zip(view, low))

    new_locs = []
    for x, loc in enumerate(locs):
        kept = loc[low[x]:]
        kept = tuple((v, cut(w), r and k > 0) for k, (v, w, r) in enumerate(kept))
        new_locs.append(kept)
    new_ths = tuple((cut(c), cut(a), tuple(cut(r) for r in rel)) for c, a, rel in ths)
    return (tuple(new_locs), cut(sc)), new_ths


def fork_copies(mem: tuple, view: tuple, latest_only: bool = False) -> list[tuple]:
    """The memories the child of a fork by a thread with view `view` may start from, each with
    the child's view: [(mem', view')].

    C11 says nothing of fork; the kernel copies the process's memory at one instant (the
    epoch's `start` and `epoch` are one struct, one page). A write is in the copy when it had
    reached memory then: per location a prefix of mo, which holds at least what the forking
    thread's view names (POSIX: the child sees its own thread's writes) and is closed under
    happens-before (a kept message's view names writes that reached memory before it). Nothing
    after the prefix ever reaches the child, so the child's view is the prefix's end: it reads
    the copy's value, and no later one. `latest_only`: every write before the fork is in the
    copy (the mo-latest message of each location: the strongest reading of the kernel's
    barriers)."""
    from itertools import product

    locs, sc = mem
    if latest_only:
        ends = [tuple(len(loc) - 1 for loc in locs)]
    else:
        ends = [k for k in product(*(range(view[x], len(loc)) for x, loc in enumerate(locs)))
                if all(m[1][y] <= k[y] for x, loc in enumerate(locs) for m in loc[:k[x] + 1]
                       for y in range(len(locs)))]
    out = []
    for k in ends:
        kept = tuple(loc[:k[x] + 1] for x, loc in enumerate(locs))
        out.append(((kept, tuple(min(s, e) for s, e in zip(sc, k))), k))
    return out
