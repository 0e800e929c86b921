"""The exhaustive interleaving checker: every interleaving of the model's atomic steps.

An explicit-state, breadth-first explorer over: K sweepers running the epoch advance
(`model.epoch.advance_step`, one atomic access per step), optionally an allocating thread
that owns one large page (`model.stamp.read_epoch_relaxed` / `mi_page_stamp`) and parks
(`model.park.mi_on_thread_idle_start` / `_end`), and the scavenger that sweeps the parked
thread's heap (its advance by `advance_step`, the hold by `model.variants.is_page_held`, the
end of the sweep by `model.park.record_sweep_last` and `compute_park_next`), with the clock
ticking one ms at a time up to a bound. Every step calls the model; the explorer only keeps
the state in tuples, so a mutant applied to the model is what the explorer runs.

Reductions (both sound for the properties checked):
- symmetry: the K sweepers are identical, so a state keeps them as a sorted tuple, and only
  one of several sweepers with equal locals is stepped;
- dead locals: a local that no later step of the call reads is zeroed, and a sweeper whose
  call ended begins its next call at once (no idle state between calls); the compare, which
  touches nothing shared, is taken together with the clock read before it;
- ghost history: only the current epoch's real and recorded beginnings are kept in the
  state; each invariant is checked on every successor before the older entries are dropped,
  and no step reads the history, so a violation is never missed.
`model.epoch.spin_max` (1,000 pauses in the real code) is lowered to `Config.spin_max` while
exploring: a waiting sweeper then gives up after that many looks (digest 7, step 4), which
is the behaviour the real bound gives, reached in fewer states.

Checked in every reachable state: every invariant of the registry with scope "epoch" (on an
EpochView), every invariant with scope "world" that reads only what the explorer keeps
(pages' last walk and last allocation, threads' park records), and PK-DONE-WITHIN-MAX.
Checked on edges: EP-EPOCH-MOVES. Checked on the graph (networkx): PK-NO-STUCK-CYCLE.
A violation is reported with the shortest path from an initial state.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace

import model.epoch as ep
import model.park as park
import model.stamp as stamp
import model.variants as variants
from model.epoch import AdvanceFrame, EpochHistory, EpochState
from model.epoch_invariants import EpochView
from model.geometry import PageKind
from model.invariants import load_registry
from model.page import MI_PAGE_SWEPT_NONE, encode_walked
from model.sweep import WalkRecord
from model.thread import (MI_PARK_SWEEPS_MAX, PARK_SWEPT_DONE, PARK_SWEPT_NONE, PARKED,
                          RUNNING, SWEEPING, ParkSweep, ThreadState)
from proofs.steptable import Step, render

IDLE = ("idle",)
LIVE, FREE, PURGED = "live", "free", "purged"
CAPACITY = 2  # block 0 stays live (the page is in use), block 1 is taken and freed


@dataclass(frozen=True)
class Config:
    """One configuration to explore exhaustively."""

    name: str
    sweepers: int
    interval: int = 3  # ms
    clock_bound: int = 9  # ms: the clock ticks 0, 1, ... up to this
    spin_max: int = 1
    owner: bool = False  # an allocating thread owning one large page
    parked: bool = False  # the owner parks and the scavenger sweeps its heap
    stale_epochs: int = 0  # how stale the owner's relaxed epoch read may be
    ignore_due: bool = False  # broken: the scavenger sweeps a park that is not due yet
    graph: bool = False  # build the networkx graph of pending parks (PK-NO-STUCK-CYCLE)
    reduce_dead: bool = True  # forget locals the next steps of the real advance never read
    program: tuple[str, ...] = ("malloc", "free", "park")  # the allocating thread's ops

    def describe(self) -> str:
        parts = [f"{self.sweepers} sweeper{'s' if self.sweepers != 1 else ''}"]
        if self.owner:
            parts.append("1 allocating thread")
        if self.parked:
            parts.append("scavenger + 1 parked thread")
        parts.append(f"interval {self.interval} ms, clock to {self.clock_bound} ms")
        return ", ".join(parts)


@dataclass
class Violation:
    invariant: str
    reason: str
    path: list[tuple[str, tuple]]  # (action, state) from an initial state

    def table(self, cfg: Config) -> str:
        steps = [Step(actor_of(a), a, describe_state(s, cfg)) for a, s in self.path]
        return render(steps, title=f"{self.invariant}: {self.reason}\nshortest path "
                                   f"({len(self.path) - 1} steps) from an initial state:")


@dataclass
class Report:
    config: Config
    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    violations: dict[str, Violation] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)  # invariant ids checked
    not_applicable: list[str] = field(default_factory=list)
    graph_nodes: int = 0
    complete: bool = True  # False: stopped by a time limit before the space was exhausted

    @property
    def ok(self) -> bool:
        return not self.violations

    def figure(self) -> str:
        return f"{self.states:,} states, {self.transitions:,} transitions, depth {self.depth}"


# -- the state ---------------------------------------------------------------------------
# (T, S, E, real_E, rec_E, sweepers, scavenger, owner, page)
#   sweeper:   IDLE or (pc, start, now, now2, spins, incs, e_load, found_due)
#   scavenger: None or (phase, sweeper-tuple, swept, start_ms, deferred)
#   owner:     None or (park_state, park_swept, last, park_epoch, sweep_epoch, seen, sweeps)
#   page:      None or (block1, swept_state, last_alloc_ms, last_walk)


def initial_state(cfg: Config) -> tuple:
    scav = ("idle", IDLE, PARK_SWEPT_NONE, 0, False) if cfg.parked else None
    owner = (RUNNING, PARK_SWEPT_NONE, 0, 0, 0, 0, (), 0) if cfg.owner else None
    page = (FREE, MI_PAGE_SWEPT_NONE, None, None) if cfg.owner else None
    sweeper = IDLE
    if cfg.reduce_dead:  # a sweeper is always in a call: the next begins when one ends
        sweeper = forget_dead(step_sweeper(cfg, (0, 0, 0, 0, None), IDLE)[0])
    return (0, 0, 0, 0, None, (sweeper,) * cfg.sweepers, scav, owner, page)


def epoch_state(s: tuple) -> EpochState:
    T, S, E, realE, recE = s[:5]
    h = EpochHistory({E: realE} if E else {}, {E: recE} if E and recE is not None else {})
    return EpochState(start=S, epoch=E, history=h)


def frame_of(sw: tuple) -> AdvanceFrame:
    pc, start, now, now2, spins, incs = sw[:6]
    return AdvanceFrame(pc, start, now, now2, spins, incs, incs > 0)


# The locals each program counter of the real advance still reads (and the ghosts the
# progress check needs): start until the CAS, now until the compare, now2 until the store,
# spins while waiting; e_load while the call may still have to see the epoch move.
LIVE_LOCALS = {
    ep.PC_LOAD: (), ep.PC_READ_CLOCK: ("start", "e_load"),
    ep.PC_COMPARE: ("start", "now", "e_load"), ep.PC_CAS: ("start", "e_load"),
    ep.PC_INCREMENT: (), ep.PC_READ_CLOCK2: (), ep.PC_STORE: ("now2",),
    ep.PC_WAIT: ("spins", "e_load", "found_due"),
}
SLOTS = {"start": 1, "now": 2, "now2": 3, "spins": 4, "e_load": 6, "found_due": 7}


def forget_dead(sw: tuple) -> tuple:
    """Zero the locals that no later step of this call reads (the increments stay: a mutant
    may increment twice, and EP-ONE-PER-SWEEP must see it)."""
    live = LIVE_LOCALS.get(sw[0])
    if live is None:
        return sw
    out = [sw[0], 0, 0, 0, 0, sw[5], 0, False]
    for name in live:
        out[SLOTS[name]] = sw[SLOTS[name]]
    return tuple(out)


def step_sweeper(cfg: Config, s: tuple, sw: tuple):
    """One atomic step of a sweeper (or of the scavenger's advance). Returns (sweeper tuple
    after, epoch state after, progress violation reason or None)."""
    if sw == IDLE:
        f = ep.begin_advance(cfg.interval)
        return (f.pc, f.start, f.now, f.now2, f.spins, f.increments, s[2], False), None, None
    st = epoch_state(s)
    f = frame_of(sw)
    pc_before = f.pc
    ep.advance_step(st, f, s[0], cfg.interval)
    e_load, found_due = sw[6], sw[7]
    if pc_before == ep.PC_LOAD:
        e_load = st.epoch
    if f.pc == ep.PC_COMPARE and cfg.reduce_dead:
        # The compare touches no shared variable, so it commutes with every other step:
        # taking it together with the clock read before it loses no interleaving.
        pc_before = f.pc
        ep.advance_step(st, f, s[0], cfg.interval)
    if pc_before == ep.PC_COMPARE and f.pc == ep.PC_CAS:
        found_due = True
    if f.done:
        # digest 7, step 4: a sweeper that waited its whole bound on MOVING may return on
        # the old epoch (the mover was preempted: digest 9.4); any other return must see it
        # moved
        gave_up = pc_before == ep.PC_WAIT and st.start == ep.MOVING and \
            f.spins >= ep.spin_max
        if found_due and st.epoch == e_load and not gave_up:
            why = f"an advance found epoch {e_load} due and returned with it unmoved"
            return IDLE, st, why
        return IDLE, st, None
    out = (f.pc, f.start, f.now, f.now2, f.spins, f.increments, e_load, found_due)
    return (forget_dead(out) if cfg.reduce_dead else out), st, None


def with_epoch(s: tuple, st: EpochState | None) -> tuple:
    if st is None:
        return s
    E = st.epoch
    return (s[0], st.start, E, st.history.real_begin.get(E, 0), st.history.recorded_begin.get(E),
            *s[5:])


def thread_of(owner: tuple) -> ThreadState:
    park_state, park_swept, last, park_epoch, sweep_epoch, seen, sweeps, _ = owner
    return ThreadState(1, holes_sweep_epoch=sweep_epoch, holes_sweep_last=last,
                       holes_park_epoch=park_epoch, park_state=park_state,
                       park_swept=park_swept, epoch_seen=seen,
                       park_sweeps=park_records(sweeps))


# The ghost records of a park's sweeps are kept as (count, epoch of the first, the last
# record). Every record was judged when it was made (with the one before it); later checks
# need only the count, the first sweep's epoch and the last record, so the records between
# are stood in for by ones that say nothing new: the first's epoch, a long time ago.
LONG_AGO_MS = 10 ** 9


def park_records(sweeps: tuple) -> list[ParkSweep]:
    if not sweeps:
        return []
    count, first_epoch, last = sweeps
    older = [ParkSweep(-LONG_AGO_MS * (count - k), -LONG_AGO_MS * (count - k), first_epoch,
                       True, PARK_SWEPT_NONE) for k in range(count - 1)]
    return older + [ParkSweep(*last)]


def owner_of(t: ThreadState, op: int) -> tuple:
    ps = t.park_sweeps
    sweeps = (len(ps), ps[0].epoch, (ps[-1].start_ms, ps[-1].end_ms, ps[-1].epoch,
                                     ps[-1].deferred, ps[-1].next_state)) if ps else ()
    return (t.park_state, t.park_swept, t.holes_sweep_last, t.holes_park_epoch,
            t.holes_sweep_epoch, t.epoch_seen, sweeps, op)


class _World(SimpleNamespace):
    """What the model's park functions and the world invariants read of a World."""

    def thread(self, tid: int) -> ThreadState:
        return self.threads[tid]


def page_view(page: tuple) -> SimpleNamespace:
    block1, swept_state, last_alloc, last_walk = page
    free = [1] if block1 == FREE else []
    return SimpleNamespace(id=1, swept_state=swept_state, last_alloc_ms=last_alloc,
                           last_walk=WalkRecord(*last_walk) if last_walk else None,
                           geom=SimpleNamespace(kind=PageKind.LARGE), retired=False,
                           free=free, local_free=[], xthread_free=[],
                           emit=lambda *a, **k: None, block_size=256 * 1024, reserved=16)


def world_view(cfg: Config, s: tuple) -> _World:
    opts = SimpleNamespace(purge_holes_min_interval=cfg.interval, variant=variants.EPOCH,
                           stale_epochs=cfg.stale_epochs, clock_monotone=True)
    return _World(pages={1: page_view(s[8])}, threads={1: thread_of(s[7])}, options=opts,
                  clock=SimpleNamespace(read=lambda: s[0]), log=[], epoch=epoch_state(s))


# -- the steps of the allocating thread and the scavenger ---------------------------------

# Ops that read nothing another thread writes: with the dead-locals reduction they are taken
# together with the op before them (moving them earlier loses no behaviour: a free is seen
# only by a later sweep, and a park only lets the scavenger claim, which it may always do
# later).
INVISIBLE_OPS = ("free", "park")


def owner_moves(cfg: Config, s: tuple):
    for label, ns in owner_op(cfg, s):
        while cfg.reduce_dead and ns[7][7] < len(cfg.program) \
                and cfg.program[ns[7][7]] in INVISIBLE_OPS:
            more = list(owner_op(cfg, ns))
            if not more:
                break
            label, ns = f"{label} + {more[0][0].split(': ', 1)[1]}", more[0][1]
        yield label, ns


def owner_op(cfg: Config, s: tuple):
    """The allocating thread runs its program (Config.program) one op at a time: malloc
    (the generic path's stamp), free, park (mi_on_thread_idle_start), unpark (_end)."""
    T, E = s[0], s[2]
    owner, page = s[7], s[8]
    op = owner[7]
    if op >= len(cfg.program):
        return
    name = cfg.program[op]
    block1, swept_state, last_alloc, last_walk = page
    t = thread_of(owner)
    if name == "malloc" and block1 != LIVE:
        pg = page_view(page)
        if block1 == PURGED:  # _mi_page_unpurge_run: the run comes back, swept_state NONE
            pg.swept_state = MI_PAGE_SWEPT_NONE
        seen = stamp.read_epoch_relaxed(E, t.epoch_seen, cfg.stale_epochs)
        stamp.mi_page_stamp(pg, seen)  # the gate holds: a large page
        # With fresh reads the next read never depends on this one: keep no copy.
        t.epoch_seen = seen if cfg.stale_epochs else 0
        # The walk record is judged against the last allocation: one from before this
        # allocation has been judged already and would now be compared with a later time.
        yield "owner: malloc (stamp)", s[:7] + (owner_of(t, op + 1),
                                                (LIVE, pg.swept_state, T, None))
    elif name == "free" and block1 == LIVE:
        yield "owner: free", s[:7] + (owner_of(t, op + 1),
                                      (FREE, swept_state, last_alloc, last_walk))
    elif name in ("park", "unpark"):
        w = world_view(cfg, s)
        done = park.mi_on_thread_idle_start(w, 1) if name == "park" else \
            park.mi_on_thread_idle_end(w, 1)
        if done:
            yield f"owner: {name}", s[:7] + (owner_of(w.threads[1], op + 1), page)


def scavenger_moves(cfg: Config, s: tuple):
    """_mi_theap_sweep_parked for the one parked thread, one atomic step at a time."""
    T = s[0]
    phase, sw, swept, start_ms, deferred = s[6]
    owner, page = s[7], s[8]
    if phase == "idle":
        t = thread_of(owner)
        if t.park_state != PARKED or t.park_swept == PARK_SWEPT_DONE:
            return
        # the due test of mi_theap_sweep_parked: an interval after the end of the last sweep
        if T - t.holes_sweep_last < cfg.interval and not cfg.ignore_due:
            return
        t.park_state = SWEEPING  # the claim, CAS PARKED -> SWEEPING
        t.holes_sweep_deferred = False
        yield "scavenger: claim", s[:6] + (("advance", IDLE, t.park_swept, T, False),
                                           owner_of(t, owner[7]), page), None
    elif phase == "advance":
        sw2, st, why = step_sweeper(cfg, s, sw)
        nxt = ("sweep" if sw2 == IDLE and sw != IDLE else "advance", sw2, swept, start_ms,
               deferred)
        label = f"scavenger: {sw[0] if sw != IDLE else 'begin advance'}"
        yield label, with_epoch(s, st)[:6] + (nxt, owner, page), why
    elif phase == "sweep":
        yield ("scavenger: sweep the page",) + sweep_page(cfg, s)
    elif phase == "finish":
        w = world_view(cfg, s)
        t = w.threads[1]
        park.record_sweep_last(w, t, start_ms)
        if swept == PARK_SWEPT_NONE:
            t.holes_park_epoch = t.holes_sweep_epoch
        t.park_swept = park.compute_park_next(t, swept, deferred)
        t.park_sweeps.append(ParkSweep(start_ms, T, t.holes_sweep_epoch, deferred,
                                       t.park_swept))
        t.park_state = PARKED
        yield "scavenger: end of sweep", s[:6] + (("idle", IDLE, PARK_SWEPT_NONE, 0, False),
                                                  owner_of(t, owner[7]), page), None


def sweep_page(cfg: Config, s: tuple):
    """mi_holes_sweep_begin's epoch read, then _mi_page_purge_holes of the one page: held
    (is_page_held) or walked (block 1 goes if it is free)."""
    T, E = s[0], s[2]
    phase, sw, swept, start_ms, deferred = s[6]
    owner, page = s[7], s[8]
    block1, swept_state, last_alloc, last_walk = page
    t = thread_of(owner)
    t.holes_sweep_epoch = E
    ctx = variants.SweepContext(now=T, epoch=E, interval=cfg.interval, in_handoff=True,
                                full=False)
    pg = page_view(page)
    if variants.is_page_held(variants.EPOCH, pg, ctx, {}):
        deferred = deferred or block1 == FREE
        new_page = page
    else:
        dropped = 1 if block1 == FREE else 0
        used = 1 + (block1 == LIVE)
        after = encode_walked(CAPACITY, used)
        walk = (swept_state, E, T, dropped, True, after, CAPACITY, used)
        new_page = (PURGED if dropped else block1, after, last_alloc, walk)
    return s[:6] + (("finish", IDLE, swept, start_ms, deferred), owner_of(t, owner[7]), new_page), None


# -- exploration ----------------------------------------------------------------------------

def successors(cfg: Config, s: tuple):
    """(action, successor, edge violation or None) for every enabled step."""
    if s[0] < cfg.clock_bound:
        yield "clock tick", (s[0] + 1,) + s[1:], None
    sweepers = s[5]
    for n, sw in enumerate(sweepers):
        if n and sweepers[n - 1] == sw:
            continue  # symmetry: an equal sweeper was stepped already
        sw2, st, why = step_sweeper(cfg, s, sw)
        if sw2 == IDLE and cfg.reduce_dead:
            sw2 = forget_dead(step_sweeper(cfg, s, IDLE)[0])  # its next call begins at once
        rest = sweepers[:n] + (sw2,) + sweepers[n + 1:]
        ns = with_epoch(s, st)
        label = "sweeper: begin advance" if sw == IDLE else f"sweeper: {sw[0]}"
        yield label, ns[:5] + (tuple(sorted(rest)),) + ns[6:], why
    if cfg.parked:
        for label, ns, why in scavenger_moves(cfg, s):
            yield label, ns, why
    if cfg.owner:
        for label, ns in owner_moves(cfg, s):
            yield label, ns, None


def touches_world(action: str) -> bool:
    """Steps after which the world invariants must be judged again: the owner's, and the
    scavenger's other than its epoch advance (ticks and advances change nothing they read)."""
    return action.startswith("owner") or (action.startswith("scavenger")
                                          and action in WORLD_SCAVENGER_STEPS)


WORLD_SCAVENGER_STEPS = ("scavenger: claim", "scavenger: sweep the page",
                         "scavenger: end of sweep")


def frames(s: tuple) -> list[AdvanceFrame]:
    out = [frame_of(sw) for sw in s[5] if sw != IDLE]
    if s[6] is not None and s[6][1] != IDLE:
        out.append(frame_of(s[6][1]))
    return out


def check_state(cfg: Config, parent: tuple, s: tuple, invs, world_invs, na: set,
                world_changed: bool = True) -> list:
    """Every invariant on successor s, with the parent's history entries kept (so that the
    invariants relating epoch e to e - 1 see both)."""
    st = epoch_state(s)
    if s[2] != parent[2] and parent[2]:
        st.history.real_begin[parent[2]] = parent[3]
        if parent[4] is not None:
            st.history.recorded_begin[parent[2]] = parent[4]
    view = EpochView(st, cfg.interval, True, frames(s))
    out = []
    for inv in invs:
        reason = inv.predicate(view)
        if reason:
            out.append((inv.id, reason))
    if s[7] is not None and world_changed:
        w = world_view(cfg, s)
        for inv in world_invs:
            if inv.id in na:
                continue
            try:
                reason = inv.predicate(w)
            except (AttributeError, KeyError, TypeError):
                na.add(inv.id)  # reads what the explorer does not keep
                continue
            if reason:
                out.append((inv.id, reason))
        t = w.threads[1]
        if len(t.park_sweeps) >= MI_PARK_SWEEPS_MAX and t.park_swept != PARK_SWEPT_DONE:
            out.append(("PK-DONE-WITHIN-MAX", f"the park was swept {len(t.park_sweeps)} times "
                                              f"and is not done"))
    return out


def explore(cfg: Config, max_states: int | None = None, progress=None,
            stop_at_first: bool = False, time_limit: float | None = None) -> Report:
    """Breadth-first over every reachable state; the first violation of each invariant is
    kept with its shortest path. `model.epoch.spin_max` is lowered for the run."""
    old_spin = ep.spin_max
    ep.spin_max = cfg.spin_max
    try:
        return _explore(cfg, max_states, progress, stop_at_first, time_limit)
    finally:
        ep.spin_max = old_spin


def _explore(cfg: Config, max_states, progress, stop_at_first, time_limit) -> Report:
    import networkx as nx

    reg = load_registry()
    invs = [i for i in reg.values() if i.scope == "epoch" and i.predicate]
    world_invs = [i for i in reg.values() if i.scope == "world" and i.predicate] \
        if cfg.owner else []
    rep = Report(cfg)
    na: set[str] = set()
    t0 = time.perf_counter()
    init = initial_state(cfg)
    parent: dict[tuple, tuple | None] = {init: None}
    depth = {init: 0}
    queue = deque([init])
    pending = nx.DiGraph()  # steps between states whose park is pending (not ticks)
    first_seen: dict[tuple, tuple] = {}  # a reached state of each node of `pending`
    while queue:
        s = queue.popleft()
        for action, ns, why in successors(cfg, s):
            rep.transitions += 1
            if why and "EP-EPOCH-MOVES" not in rep.violations:
                rep.violations["EP-EPOCH-MOVES"] = Violation(
                    "EP-EPOCH-MOVES", why, path_to(parent, s) + [(action, ns)])
            checked, ns = ns, forget_past(cfg, forget_walk(ns))
            if cfg.graph and action != "clock tick" and is_park_pending(s) \
                    and is_park_pending(ns):
                pending.add_edge(system_part(s), system_part(ns), action=action)
                first_seen.setdefault(system_part(s), s)
            if ns in parent:
                continue
            parent[ns] = (s, action)
            depth[ns] = depth[s] + 1
            rep.depth = max(rep.depth, depth[ns])
            for inv_id, reason in check_state(cfg, s, checked, invs, world_invs, na,
                                              touches_world(action)):
                if inv_id not in rep.violations:
                    rep.violations[inv_id] = Violation(inv_id, reason, path_to(parent, ns))
            queue.append(ns)
            if len(parent) % 10_000 == 0:
                if progress and len(parent) % 100_000 == 0:
                    progress(len(parent), time.perf_counter() - t0)
                if time_limit and time.perf_counter() - t0 > time_limit:
                    rep.complete = False
                    queue.clear()
                    break
            if (max_states and len(parent) >= max_states) or (stop_at_first and
                                                               rep.violations):
                queue.clear()
                break
    rep.states = len(parent)
    if cfg.graph:
        rep.graph_nodes = pending.number_of_nodes()
        cyc = stuck_cycle(pending)
        if cyc is not None:
            rep.violations["PK-NO-STUCK-CYCLE"] = Violation(
                "PK-NO-STUCK-CYCLE", "a cycle sweeps the parked thread again and again and "
                                     "the park is never done",
                path_to(parent, first_seen[cyc[0]]) + [(a, n) for a, n in cyc[1]])
    rep.seconds = time.perf_counter() - t0
    rep.checked = [i.id for i in invs] + [i.id for i in world_invs if i.id not in na] + \
        ["EP-EPOCH-MOVES"] + (["PK-DONE-WITHIN-MAX"] if cfg.parked else []) + \
        (["PK-NO-STUCK-CYCLE"] if cfg.graph else [])
    rep.not_applicable = sorted(na)
    return rep


def forget_past(cfg: Config, s: tuple) -> tuple:
    """Times more than an interval in the past are all alike to every later step and check:
    each is only ever compared as `later - it >= interval` (the next increment against the
    current epoch's real beginning, the scavenger's due test against holes_sweep_last, the
    next park record against the last one's end, a walk against the last allocation), and
    from `clock - interval` on that holds for all of them. So they are raised to
    `clock - interval`. The shared start and the sweepers' loaded starts are left exact:
    the CAS compares them for equality; so is the current epoch's beginning while an
    advance is between its CAS and its store (its clock read is compared with it)."""
    if not cfg.reduce_dead:
        return s
    floor = s[0] - cfg.interval
    up = lambda x: x if x is None or x >= floor else floor  # noqa: E731
    if s[1] != ep.MOVING:  # else a sweeper's now2 is yet to be recorded against it
        s = s[:3] + (up(s[3]), up(s[4])) + s[5:]
    owner, page = s[7], s[8]
    if owner is not None:
        sweeps = owner[6]
        if sweeps:
            count, first, last = sweeps
            end = up(last[1])
            sweeps = (count, first, (end, end) + last[2:])
        owner = owner[:2] + (up(owner[2]),) + owner[3:6] + (sweeps, owner[7])
        page = page[:2] + (up(page[2]), page[3])
        s = s[:7] + (owner, page)
    return s


def forget_walk(s: tuple) -> tuple:
    """Drop the ghost record of a walk once the state that follows the walk was checked:
    the invariants that read it judge the walk against the page's state then, which no later
    step changes until an allocation replaces the record anyway."""
    page = s[8]
    if page is None or page[3] is None:
        return s
    return s[:8] + (page[:3] + (None,),)


def system_part(s: tuple) -> tuple:
    """The state without its ghosts (the park's sweep records, the walk record, the last
    allocation's time): a cycle of the system is a cycle of this projection, whatever the
    ghosts, which only grow, say."""
    owner, page = s[7], s[8]
    if owner is None or len(owner) == 7:  # no owner, or projected already
        return s
    return s[:7] + (owner[:6] + owner[7:], page[:2])


def is_park_pending(s: tuple) -> bool:
    """The owner is parked (or being swept) and its park is not done."""
    return s[7] is not None and s[7][0] in (PARKED, SWEEPING) and s[7][1] != PARK_SWEPT_DONE


def stuck_cycle(g):
    """A cycle of the park-pending subgraph that contains an end of a sweep: returns (first
    state, [(action, state)...] around the cycle) or None."""
    import networkx as nx

    for comp in nx.strongly_connected_components(g):
        if len(comp) < 2:
            continue
        sub = g.subgraph(comp)
        for u, v, a in sub.edges(data="action"):
            if a == "scavenger: end of sweep":
                back = nx.shortest_path(sub, v, u)
                cyc = [(a, v)] + [(sub.edges[x, y]["action"], y) for x, y in zip(back, back[1:])]
                return u, cyc
    return None


def path_to(parent: dict, s: tuple) -> list[tuple[str, tuple]]:
    out = []
    while s is not None:
        p = parent[s]
        out.append(("initial state" if p is None else p[1], s))
        s = p[0] if p else None
    return out[::-1]


def actor_of(action: str) -> str:
    return action.split(":")[0] if ":" in action else action


def describe_state(s: tuple, cfg: Config) -> dict:
    T, S, E, realE, recE = s[:5]
    d = {"clock": T, "start": "MOVING" if S == ep.MOVING else S, "epoch": E,
         "began": realE, "recorded": "-" if recE is None else recE,
         "sweepers at": " ".join(sw[0] for sw in s[5])}
    if s[6] is not None:
        d["scavenger"] = s[6][0] if s[6][1] == IDLE else f"{s[6][0]}/{s[6][1][0]}"
    if s[7] is not None:
        d["owner"] = s[7][0]
        d["park_swept"] = s[7][1]
        ghost = len(s[7]) == 8  # a state of a cycle is shown without its ghosts
        d["sweeps"] = (s[7][6][0] if s[7][6] else 0) if ghost else "-"
        d["block1"] = s[8][0]
        d["swept_state"] = hex(s[8][1]) if s[8][1] != MI_PAGE_SWEPT_NONE else "NONE"
    return d


def to_dot(v: Violation, cfg: Config) -> str:
    """The counterexample path as a Graphviz digraph (one node per state)."""
    lines = ["digraph counterexample {", "  rankdir=TB; node [shape=box, fontsize=10];"]
    for n, (action, s) in enumerate(v.path):
        label = "\\n".join(f"{k}={x}" for k, x in describe_state(s, cfg).items())
        lines.append(f'  s{n} [label="{label}"];')
        if n:
            lines.append(f'  s{n - 1} -> s{n} [label="{action}"];')
    lines.append(f'  label="{v.invariant}: {v.reason}";')
    lines.append("}")
    return "\n".join(lines)
