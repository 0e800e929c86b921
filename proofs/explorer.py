"""The exhaustive interleaving checker: every interleaving of the model's atomic steps.

An explicit-state, breadth-first explorer over: K sweepers running the epoch advance
(`model.epoch.advance_step`, one atomic access per step), optionally an allocating thread
that owns one large page (`model.stamp.read_epoch_relaxed` / `mi_page_stamp`) and parks
(`model.park.mi_on_thread_idle_start` / `_end`), and the scavenger that sweeps the parked
thread's heap (its claim by `model.park.is_park_waiting`, `is_park_due` and
`claim_parked_thread`, its advance by `advance_step`, the hold by
`model.variants.is_page_held` with what it leaves by `model.sweep.has_held_memory`, a
walk's state by `model.holes.mark_walked`, the end of the sweep by `release_parked_thread`),
with the clock ticking one ms at a time up to a bound. With `xfree` in the owner's program,
another thread frees the page's block onto xthread_free at any point, and the collects of
the sweep and of the malloc path (`model.alloc.mi_page_free_collect`) bring it back; the
page's counting invariants (PAGE_INVARIANTS) are judged on the page. Every step calls the
model; the explorer only keeps the state in tuples, so a mutant applied to the model is what
the explorer runs.

Reductions (sound for the properties checked; docs/proofs.md gives the arguments):
- symmetry: the K sweepers are identical, so a state keeps them as a sorted tuple, and only
  one of several sweepers with equal locals is stepped;
- dead locals: a local that no later step of the call reads is zeroed, and a sweeper whose
  call ended begins its next call at once (no idle state between calls; the scavenger's
  begin is taken with its claim); the compare, which touches nothing shared, is taken
  together with the clock read before it. Each step is taken a second time with the
  forgotten locals poisoned (probe_dead_locals): a mutant that reads one stops the run;
- canonical frames: a loaded start that the shared start has moved past and that is more
  than an interval old is one value (STALE_START: every later compare finds it due, every
  CAS fails; checked against the model's compare per run), and the ghost e_load keeps only
  "the current epoch or an older one" (the epoch never goes back; a step that moves it back
  stops the run);
- ghost history and past times: only the current epoch's real and recorded beginnings, the
  park's last sweep record (and the one before it until it was judged) are kept; each
  invariant is checked on every successor before older entries are dropped, and no step
  reads them; times more than an interval in the past are raised to `clock - interval`
  (forget_past), since each is only compared as `later - t >= interval`.
Pure model-step results and verdicts are kept per run in dictionaries keyed by the small
tuples they read (`moves`, `check_state`); a new run starts with empty ones, so a mutant
applied for a run is what that run computes.
Checked in every reachable state: every invariant of the registry with scope "epoch" (on an
EpochView), every invariant with scope "world" that reads only what the explorer keeps
(pages' last walk and last allocation, threads' park records), and PK-DONE-WITHIN-MAX.
Checked on edges: EP-EPOCH-MOVES, and with a clock that steps back (Config.clock_back) the
invariants that judge a call by its frame on each call as it ends (FINISHED_CALL_INVARIANTS:
EP-BACK-IS-DUE). Opt-in moves of the rare paths (Config.fork, Config.clock_back): a fork
while a sweeper holds MOVING, going on in the child; a clock step back. Checked on the graph (networkx): PK-NO-STUCK-CYCLE.
A violation is reported with the shortest path from an initial state.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace

import model.alloc as alloc
import model.epoch as ep
import model.holes as holes
import model.park as park
import model.stamp as stamp
import model.sweep as sweep
import model.variants as variants
from model.epoch import AdvanceFrame, EpochHistory, EpochState
from model.epoch_invariants import EpochView
from model.geometry import PageKind
from model.invariants import load_registry
from model.page import MI_PAGE_SWEPT_NONE
from model.stats import SubprocCounters
from model.sweep import WalkRecord
from model.thread import (MI_PARK_SWEEPS_MAX, PARK_SWEPT_DONE, PARK_SWEPT_NONE, PARKED,
                          RUNNING, SWEEPING, ParkSweep, ThreadState)
from proofs.steptable import Step, render

IDLE = ("idle",)


class ReductionError(Exception):
    """A step broke an assumption a reduction rests on (the explorer stops: it would
    otherwise report on a reduced space that no longer stands for the real one)."""
# Where block 1 is: handed out (LIVE), on the free list, on xthread_free (another thread
# freed it: Config.program's "xfree"), or purged. A place is its tags joined by "+", sorted:
# the model's collect or a mutant of it may leave the block in two places at once.
LIVE, FREE, PURGED, XFREE = "live", "free", "purged", "xfree"
CAPACITY = 2  # block 0 stays live (the page is in use), block 1 is taken and freed


def place_tags(block1: str) -> set[str]:
    return set(block1.split("+"))


def place_of(tags: set[str]) -> str:
    return "+".join(sorted(tags))


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
    # the allocating thread's ops; "xfree" is another thread's free of block 1, pushed on
    # xthread_free, which the next collect (a sweep's, or the malloc path's) takes
    program: tuple[str, ...] = ("malloc", "free", "park")
    # The rare paths (issue 20; opt-in, so the configurations above keep their state spaces):
    # `fork`: another thread forks while a sweeper holds MOVING and the exploration goes on
    # in the child, where no sweeper of the parent exists (sweepers only: not with an owner
    # or a park); `clock_back`: the clock may also step back this many ms, also between the
    # steps of an advance (the clock is then not monotone: the invariants that assume one
    # say nothing, and the reductions that assume time only grows are off: reduce_dead=False),
    # in the first CLOCK_BACK_EPOCHS epochs (else the epoch grows without bound).
    fork: bool = False
    clock_back: int = 0

    def __post_init__(self) -> None:
        if self.fork and (self.owner or self.parked):
            raise ValueError(f"{self.name}: fork explores sweepers only (no owner, no park)")
        if self.clock_back and self.reduce_dead:
            raise ValueError(f"{self.name}: clock_back needs reduce_dead=False (forget_past "
                             f"assumes the clock never goes back)")

    def describe(self) -> str:
        parts = [f"{self.sweepers} sweeper{'s' if self.sweepers != 1 else ''}"]
        if self.owner:
            parts.append("1 allocating thread")
        if self.parked:
            parts.append("scavenger + 1 parked thread")
        parts.append(f"interval {self.interval} ms, clock to {self.clock_bound} ms")
        if self.fork:
            parts.append("forks while MOVING is held")
        if self.clock_back:
            parts.append(f"clock steps back {self.clock_back} ms")
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
    complete: bool = True  # False: stopped by a time limit or max_states before the end

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
        sweeper = begin_call(cfg, (0, 0, 0, 0, None))
    return (0, 0, 0, 0, None, (sweeper,) * cfg.sweepers, scav, owner, page)


def epoch_state(s: tuple) -> EpochState:
    T, S, E, realE, recE = s[:5]
    h = EpochHistory({E: realE} if E else {}, {E: recE} if E and recE is not None else {})
    return EpochState(start=S, epoch=E, history=h)


def frame_of(sw: tuple) -> AdvanceFrame:
    pc, start, now, now2, spins, incs = sw[:6]
    return AdvanceFrame(pc, start, now, now2, spins, incs, incs > 0)


# The locals each program counter of the real advance still reads: start until the CAS,
# now until the compare, now2 until the store, spins until the wait (0 until then). The ghosts of
# EP-EPOCH-MOVES, e_load (the epoch at the load) and found_due (the compare found the epoch
# due), are read when the call ends: e_load lives until the compare, and both live to the end
# of a call whose compare found the epoch due (they cost no state in the real advance: from
# the CAS to the store e_load is the epoch or the one before, and found_due is True).
LIVE_LOCALS = {
    ep.PC_LOAD: ("spins",), ep.PC_READ_CLOCK: ("start", "spins", "e_load"),
    ep.PC_COMPARE: ("start", "now", "spins", "e_load"), ep.PC_CAS: ("start", "spins"),
    ep.PC_INCREMENT: (), ep.PC_READ_CLOCK2: (), ep.PC_STORE: ("now2",),
    ep.PC_WAIT: ("spins",),
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
    if sw[7]:  # found the epoch due: judged by EP-EPOCH-MOVES when the call ends
        out[6], out[7] = sw[6], True
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
        if cfg.clock_back:
            return IDLE, st, judge_finished_call(cfg, st, f)
        return IDLE, st, None
    out = (f.pc, f.start, f.now, f.now2, f.spins, f.increments, e_load, found_due)
    return (forget_dead(out) if cfg.reduce_dead else out), st, None


def judge_finished_call(cfg: Config, st: EpochState, f: AdvanceFrame):
    """The epoch invariants that judge one call by its own frame, on a call as it ends (its
    frame is gone in the next state): with a clock that goes back, EP-BACK-IS-DUE judges the
    compare's verdict on a reading behind the start. Only those that read nothing but the
    frame: the result is kept per (epoch state, sweeper) (advance_move). Returns (invariant
    id, reason) or None."""
    view = EpochView(st, cfg.interval, False, [f])
    registry = load_registry()
    for inv_id in FINISHED_CALL_INVARIANTS:
        reason = registry[inv_id].predicate(view)
        if reason:
            return inv_id, reason
    return None


FINISHED_CALL_INVARIANTS = ("EP-ONE-PER-SWEEP", "EP-BACK-IS-DUE")


def edge_verdict(why) -> tuple[str, str]:
    """(invariant id, reason) of a transition's verdict: a reason alone is EP-EPOCH-MOVES's;
    judge_finished_call's carry their id."""
    return why if isinstance(why, tuple) else ("EP-EPOCH-MOVES", why)


def begin_call(cfg: Config, s: tuple) -> tuple:
    """A new call of the advance (model.epoch.begin_advance) as the dead-locals reduction
    keeps it: a sweeper begins its next call when one ends, the scavenger with its claim."""
    return forget_dead(step_sweeper(cfg, s, IDLE)[0])


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


# The ghost records of a park's sweeps are kept as (count, epoch of the first, the record
# before the last or None, the last record). A new record is judged with the one before it
# (PK-SPACING reads the end of the one before), then the one before is dropped
# (forget_judged): later checks need only the count, the first sweep's epoch and the last
# record, so the records before are stood in for by ones that say nothing new: the first's
# epoch, a long time ago.
LONG_AGO_MS = 10 ** 9


def park_records(sweeps: tuple) -> list[ParkSweep]:
    if not sweeps:
        return []
    count, first_epoch, before, last = sweeps
    kept = [ParkSweep(*r) for r in (before, last) if r is not None]
    older = [ParkSweep(-LONG_AGO_MS * (count - k), -LONG_AGO_MS * (count - k), first_epoch,
                       True, PARK_SWEPT_NONE) for k in range(count - len(kept))]
    return older + kept


def _record(r: ParkSweep) -> tuple:
    return (r.start_ms, r.end_ms, r.epoch, r.deferred, r.next_state)


def owner_of(t: ThreadState, op: int) -> tuple:
    ps = t.park_sweeps
    sweeps = (len(ps), ps[0].epoch, _record(ps[-2]) if len(ps) > 1 else None,
              _record(ps[-1])) if ps else ()
    return (t.park_state, t.park_swept, t.holes_sweep_last, t.holes_park_epoch,
            t.holes_sweep_epoch, t.epoch_seen, sweeps, op)


class _World(SimpleNamespace):
    """What the model's park functions and the world invariants read of a World."""

    def thread(self, tid: int) -> ThreadState:
        return self.threads[tid]


def page_view(page: tuple) -> SimpleNamespace:
    """The page as the model's rules and the invariants read it: its lists, `used` (a block
    on xthread_free counts in it until a collect), the purged blocks, the blocks held."""
    block1, swept_state, last_alloc, last_walk = page
    tags = place_tags(block1)
    purged = {1} if PURGED in tags else set()
    v = SimpleNamespace(id=1, version=0, swept_state=swept_state, last_alloc_ms=last_alloc,
                        last_walk=WalkRecord(*last_walk) if last_walk else None,
                        geom=SimpleNamespace(kind=PageKind.LARGE), retired=False,
                        free=[1] if FREE in tags else [], local_free=[],
                        xthread_free=[1] if XFREE in tags else [],
                        used=1 + (LIVE in tags or tags == {XFREE}), capacity=CAPACITY,
                        handed_out={0, 1} if LIVE in tags else {0},
                        emit=lambda *a, **k: None, block_size=256 * 1024, reserved=16,
                        has_unformed_tail=_formed, purged_blocks=lambda: set(purged),
                        is_block_purged=lambda i: i in purged, purged=len(purged),
                        sweeping=False)
    v.listed_blocks = lambda: v.free + v.local_free + v.xthread_free
    return v


def collect(pg: SimpleNamespace) -> None:
    """The model's collect (model.alloc.mi_page_free_collect, a mutant of it is what runs)
    on the page view. One that reads more of the page than the explorer keeps (the bitmap's
    geometry, to unpurge a run) stops the run: the explorer cannot follow it."""
    try:
        alloc.mi_page_free_collect(pg)
    except AttributeError as e:
        raise ReductionError(f"the collect reads page state the explorer does not keep "
                             f"({e}); it runs on the model's pages in the other engines") \
            from None


def place_in(pg: SimpleNamespace, was: set[str]) -> str:
    """block 1's place as the model's steps left the page view `pg`; purged as it `was`."""
    tags = {t for t, on in ((FREE, 1 in pg.free), (XFREE, 1 in pg.xthread_free),
                            (LIVE, 1 in pg.handed_out)) if on}
    return place_of(tags | (was & {PURGED}))


def _formed() -> bool:
    """The explorer's page has formed every block it uses: no unformed tail is pending."""
    return False


def world_view(cfg: Config, s: tuple, judged: bool = False) -> _World:
    """What the model's park functions read of a World; `judged`: what the world invariants
    may read (pages, threads, options: no clock, no epoch, see check_state)."""
    opts = SimpleNamespace(purge_holes_min_interval=cfg.interval, variant=variants.EPOCH,
                           stale_epochs=cfg.stale_epochs, clock_monotone=True)
    w = _World(pages={1: page_view(s[8])}, threads={1: thread_of(s[7])}, options=opts)
    if not judged:
        w.clock, w.log, w.epoch = SimpleNamespace(read=lambda: s[0]), [], epoch_state(s)
        # the park moves parked_count; the explorer keeps no process-wide counter (PR-* are
        # not applicable here), so the count the owner's park moves is a scratch one
        w.subproc = SubprocCounters()
    return w


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
    (the generic path: a collect when the free list is empty, then the stamp), free, park
    (mi_on_thread_idle_start), unpark (_end); and xfree, another thread's free."""
    T, E = s[0], s[2]
    owner, page = s[7], s[8]
    op = owner[7]
    if op >= len(cfg.program):
        return
    name = cfg.program[op]
    block1, swept_state, last_alloc, last_walk = page
    t = thread_of(owner)
    tags = place_tags(block1)
    if name == "malloc" and LIVE not in tags:
        pg = page_view(page)
        if not pg.free and pg.xthread_free:  # mi_page_malloc: collect first (the model's)
            collect(pg)
            tags = place_tags(place_in(pg, tags))
        if PURGED in tags:  # _mi_page_unpurge_run: the run comes back, swept_state NONE
            pg.swept_state = MI_PAGE_SWEPT_NONE
        if not tags & {FREE, PURGED}:
            return  # block 1 is not to be had (the collect did not bring it back)
        seen = stamp.read_epoch_relaxed(E, t.epoch_seen, cfg.stale_epochs)
        stamp.mi_page_stamp(pg, seen)  # the gate holds: a large page
        # With fresh reads the next read never depends on this one: keep no copy.
        t.epoch_seen = seen if cfg.stale_epochs else 0
        # The walk record is judged against the last allocation: one from before this
        # allocation has been judged already and would now be compared with a later time.
        taken = place_of(tags - {FREE, PURGED} | {LIVE})
        yield "owner: malloc (stamp)", s[:7] + (owner_of(t, op + 1),
                                                (taken, pg.swept_state, T, None))
    elif name in ("free", "xfree") and LIVE in tags:
        label, to = ("owner: free", FREE) if name == "free" else (XFREE_LABEL, XFREE)
        yield label, s[:7] + (owner_of(t, op + 1),
                              (place_of(tags - {LIVE} | {to}), swept_state, last_alloc,
                               last_walk))
    elif name in ("park", "unpark"):
        w = world_view(cfg, s)
        done = park.mi_on_thread_idle_start(w, 1) if name == "park" else \
            park.mi_on_thread_idle_end(w, 1)
        if done:
            yield f"owner: {name}", s[:7] + (owner_of(w.threads[1], op + 1), page)


def scavenger_moves(cfg: Config, s: tuple, memo: dict | None = None):
    """_mi_theap_sweep_parked for the one parked thread, one atomic step at a time."""
    T = s[0]
    phase, sw, swept, start_ms, deferred = s[6]
    owner, page = s[7], s[8]
    if phase == "idle":
        t = thread_of(owner)
        if not park.is_park_waiting(t):
            return
        if not cfg.ignore_due and not park.is_park_due(t, T, cfg.interval):
            return
        swept = park.claim_parked_thread(t)
        label, sw = "scavenger: claim", IDLE
        if cfg.reduce_dead:  # begin_advance touches nothing shared: taken with the claim
            label, sw = "scavenger: claim + begin advance", begin_call(cfg, s)
        yield label, s[:6] + (("advance", sw, swept, T, False),
                              owner_of(t, owner[7]), page), None
    elif phase == "advance":
        sw2, shared, why = advance_move(cfg, s, sw, {} if memo is None else memo, loop=False)
        nxt = ("sweep" if sw2 == IDLE and sw != IDLE else "advance", sw2, swept, start_ms,
               deferred)
        label = "scavenger: begin advance" if sw == IDLE else SCAVENGER_LABELS[sw[0]]
        yield label, s[:1] + (shared or s[1:5]) + (s[5], nxt, owner, page), why
    elif phase == "sweep":
        yield ("scavenger: sweep the page",) + sweep_page(cfg, s)
    elif phase == "finish":
        w = world_view(cfg, s)
        t = w.threads[1]
        park.release_parked_thread(w, t, swept, start_ms, deferred)
        yield "scavenger: end of sweep", s[:6] + (("idle", IDLE, PARK_SWEPT_NONE, 0, False),
                                                  owner_of(t, owner[7]), page), None


XFREE_LABEL = "other thread: free (xthread_free)"


def sweep_page(cfg: Config, s: tuple):
    """mi_holes_sweep_begin's epoch read, the collect (the model's: another thread's free
    goes to the free list), then _mi_page_purge_holes of the one page: held (is_page_held)
    or walked (block 1 goes if it is on the free list)."""
    T, E = s[0], s[2]
    phase, sw, swept, start_ms, deferred = s[6]
    owner, page = s[7], s[8]
    block1, swept_state, last_alloc, last_walk = page
    t = thread_of(owner)
    t.holes_sweep_epoch = E
    ctx = variants.SweepContext(now=T, epoch=E, interval=cfg.interval, in_handoff=True,
                                full=False)
    pg = page_view(page)
    collect(pg)  # the sweep collects (never unpurges) before the hold
    tags = place_tags(place_in(pg, place_tags(block1)))
    if variants.is_page_held(variants.EPOCH, pg, ctx, {}):
        deferred = deferred or sweep.has_held_memory(pg)  # the model's test of what is left
        new_page = (place_of(tags),) + page[1:]
    else:
        dropped = 1 if FREE in tags else 0
        holes.mark_walked(pg)  # the model's rule (a mutant of it is what runs here)
        walk = (swept_state, E, T, dropped, True, pg.swept_state, CAPACITY, pg.used)
        after = tags - {FREE} | {PURGED} if dropped else tags
        new_page = (place_of(after), pg.swept_state, last_alloc, walk)
    return s[:6] + (("finish", IDLE, swept, start_ms, deferred), owner_of(t, owner[7]), new_page), None


# -- exploration ----------------------------------------------------------------------------

TICK = "clock tick"
CLOCK_BACK = "clock steps back"
# The clock steps back only in the first epochs: each step back can make the advance due
# (a reading behind start), so without a bound the epoch would grow without end.
CLOCK_BACK_EPOCHS = 2
FORK = "fork (the child)"
SWEEPER_LABELS = {pc: f"sweeper: {pc}" for pc in ep.STEPS}
SCAVENGER_LABELS = {pc: f"scavenger: {pc}" for pc in ep.STEPS}
COMPARE_BEHIND = "sweeper: compare (clock behind start)"


def advance_move(cfg: Config, s: tuple, sw: tuple, memo: dict, loop: bool = True) -> tuple:
    """step_sweeper as (sweeper after, (start, epoch, began, recorded) after or None, why).
    The result depends only on the shared part s[:5] and the sweeper, so it is kept in
    `memo`, which lives for one exploration: a mutant applied for the run is what runs.
    A sweeper (`loop`) begins its next call when one ends; the scavenger goes on to sweep."""
    key = (s[:5], sw, loop)
    hit = memo.get(key)
    if hit is None:
        sw2, st, why = step_sweeper(cfg, s, sw)
        shared = None if st is None else with_epoch(s, st)[1:5]
        if cfg.reduce_dead and sw != IDLE:
            probe_dead_locals(cfg, s, sw, (sw2, shared, why))
        if shared and shared[1] < s[2] and cfg.reduce_dead:
            raise ReductionError(f"the epoch went back from {s[2]} to {shared[1]}: "
                                 f"forget_past assumes it never does (explore this model "
                                 f"with reduce_dead=False)")
        if sw2 == IDLE and sw != IDLE and cfg.reduce_dead and loop:
            # a sweeper is always in a call: the next one begins at once (begin_advance
            # touches nothing shared)
            sw2 = begin_call(cfg, (s[0],) + (shared or s[1:5]))
        hit = memo[key] = (sw2, shared, why)
    return hit


PROBE = 7_777_777  # a value no local has: a step that reads a forgotten local shows it


def probe_dead_locals(cfg: Config, s: tuple, sw: tuple, result: tuple) -> None:
    """The dead-locals reduction zeroes what the real advance never reads again; a mutant
    may read it. So each step is taken a second time with the forgotten locals set to
    PROBE: a different result means the step read one, and the run stops (ReductionError)
    rather than explore a space that does not stand for the model's."""
    live = LIVE_LOCALS.get(sw[0], SLOTS)
    probe = list(sw)
    for name in ("start", "now", "now2", "spins"):
        if name not in live:
            probe[SLOTS[name]] = PROBE
    sw2, st, why = step_sweeper(cfg, s, tuple(probe))
    if (sw2, None if st is None else with_epoch(s, st)[1:5], why) != result:
        raise ReductionError(f"the step at {sw[0]} reads a local the dead-locals reduction "
                             f"forgets (explore this model with reduce_dead=False)")


def successors(cfg: Config, s: tuple, memo: dict | None = None):
    """(action, successor, edge violation or None) for every enabled step."""
    for action, ns, _, why in moves(cfg, s, {} if memo is None else memo):
        yield action, ns, why


def moves(cfg: Config, s: tuple, memo: dict):
    """(action, successor, successor as kept, why) for every enabled step: the successor
    is what the invariants judge; as kept, it has what no later step tells apart forgotten
    (forget_judged, forget_past). The steps are computed by the model once per distinct
    part of a state they read and kept in `memo` (this run's): a sweeper's steps read the
    epoch state and the sweepers, the scavenger's and the owner's the epoch state and
    their own parts, and forgetting is split the same way (forget_cached)."""
    T, head, sweepers, tail = s[0], s[:5], s[5], s[6:]
    if T < cfg.clock_bound:
        ns = (T + 1,) + s[1:]
        yield TICK, ns, forget_cached(cfg, ns, memo), None
    if cfg.clock_back and T >= cfg.clock_back and s[2] < CLOCK_BACK_EPOCHS:
        ns = (T - cfg.clock_back,) + s[1:]
        yield CLOCK_BACK, ns, forget_cached(cfg, ns, memo), None
    if cfg.fork and s[1] == ep.MOVING:
        ns = fork_child(cfg, s)
        yield FORK, ns, forget_cached(cfg, ns, memo), None
    if cfg.parked or cfg.owner:
        key = ("sweepers", head, sweepers)
        found = memo.get(key)
        if found is None:
            found = memo[key] = tuple(sweeper_moves(cfg, s, memo))
    else:  # the state is all the sweepers' steps read: nothing would be found again
        found = sweeper_moves(cfg, s, memo)
    for label, shared, rest, kept, why in found:
        ns = (T,) + shared + (rest,) + tail
        if kept is None:  # the start or the epoch changed: the scavenger's frame too
            kept = forget_cached(cfg, ns, memo)
        else:
            kept = kept + tail
        yield label, ns, kept, why
    if cfg.parked or cfg.owner:
        key = ("others", head, tail)
        found = memo.get(key)
        if found is None:
            found = memo[key] = tuple(other_moves(cfg, s, memo))
        for label, shared, tail2, why in found:
            ns = (T,) + shared + (sweepers,) + tail2
            yield label, ns, forget_cached(cfg, ns, memo), why


def fork_child(cfg: Config, s: tuple) -> tuple:
    """The child of a fork by a thread that is not sweeping, taken while a sweeper holds
    MOVING: the model's forked-child rule (model.epoch.mi_page_purge_holes_forked_child, a
    mutant of it is what runs) on the epoch state; no sweeper of the parent exists in the
    child, whose threads begin calls of their own (a state with as many sweepers stands for
    the child's threads, however many it starts)."""
    st = epoch_state(s)
    ep.mi_page_purge_holes_forked_child(st, s[0])
    ns = with_epoch(s, st)
    fresh = begin_call(cfg, ns) if cfg.reduce_dead else IDLE
    return ns[:5] + ((fresh,) * cfg.sweepers,) + ns[6:]


def sweeper_moves(cfg: Config, s: tuple, memo: dict):
    """(label, epoch state after, sweepers after, the state's head as kept or None, why)."""
    T, sweepers = s[0], s[5]
    prev = None
    for n, sw in enumerate(sweepers):
        if sw == prev:
            continue  # symmetry: an equal sweeper was stepped already
        prev = sw
        sw2, shared, why = advance_move(cfg, s, sw, memo)
        label = "sweeper: begin advance" if sw == IDLE else SWEEPER_LABELS[sw[0]]
        if sw != IDLE and sw[0] == ep.PC_COMPARE and sw[1] != ep.MOVING and sw[2] < sw[1]:
            label = COMPARE_BEHIND  # only a clock that went back reads before start
        rest = tuple(sorted(sweepers[:n] + (sw2,) + sweepers[n + 1:]))
        shared = shared or s[1:5]
        kept = None
        if not cfg.reduce_dead:
            kept = (T,) + shared + (rest,)
        elif shared[:2] == s[1:3]:  # start and epoch as they were: only sw2 is new
            rest_kept = sweepers[:n] + (canonical_frame(sw2, T - cfg.interval, s[1], s[2]),) \
                + sweepers[n + 1:]
            kept = (T,) + kept_shared(cfg, T, shared) + (tuple(sorted(rest_kept)),)
        yield label, shared, rest, kept, why


def other_moves(cfg: Config, s: tuple, memo: dict):
    """(label, epoch state after, (scavenger, owner, page) after, why)."""
    if cfg.parked:
        for label, ns, why in scavenger_moves(cfg, s, memo):
            yield label, ns[1:5], ns[6:], why
    if cfg.owner:
        for label, ns in owner_moves(cfg, s):
            yield label, ns[1:5], ns[6:], None


def forget_cached(cfg: Config, s: tuple, memo: dict) -> tuple:
    """forget_past(forget_judged(s)), in two halves kept in memo: the epoch state with the
    sweepers, and the scavenger, owner and page (which read the clock, start and epoch)."""
    if not cfg.reduce_dead:
        return forget_judged(s)
    key = ("epoch half", s[:6])
    head = memo.get(key)
    if head is None:
        head = memo[key] = forget_past(cfg, s[:6] + (None, None, None))[:6]
    key = ("world half", s[:3], s[6:])
    tail = memo.get(key)
    if tail is None:
        t = forget_judged(s[:3] + (0, None, ()) + s[6:])
        tail = memo[key] = forget_past(cfg, t)[6:]
    return head + tail


def kept_shared(cfg: Config, T: int, shared: tuple) -> tuple:
    """The epoch state of forget_past: the beginnings raised to `T - interval`, except while
    the start is MOVING (a sweeper's now2 is yet to be recorded against the beginning)."""
    S, E, began, rec = shared
    floor = T - cfg.interval
    if S == ep.MOVING or (began >= floor and (rec is None or rec >= floor)):
        return shared
    return (S, E, max(began, floor), rec if rec is None else max(rec, floor))


def touches_world(action: str) -> bool:
    """Steps after which the world invariants must be judged again: the owner's, and the
    scavenger's other than its epoch advance (ticks and advances change nothing they read)."""
    return action.startswith(("owner", "other thread")) or (action.startswith("scavenger")
                                          and action in WORLD_SCAVENGER_STEPS)


WORLD_SCAVENGER_STEPS = ("scavenger: claim", "scavenger: claim + begin advance",
                         "scavenger: sweep the page",
                         "scavenger: end of sweep")


def frames(s: tuple) -> list[AdvanceFrame]:
    out = [frame_of(sw) for sw in s[5] if sw != IDLE]
    if s[6] is not None and s[6][1] != IDLE:
        out.append(frame_of(s[6][1]))
    return out


def check_state(cfg: Config, parent: tuple, s: tuple, invs, world_invs, na: set,
                world_changed: bool = True, memo: dict | None = None) -> list:
    """Every invariant on successor s, with the parent's history entries kept (so that the
    invariants relating epoch e to e - 1 see both). The verdicts are kept in `memo` by what
    the judges read: the epoch invariants read the shared epoch state, its history and the
    advance frames; the world invariants read the owner and the page (their view of the
    world has no clock and no epoch, so one that read them would be reported not
    applicable, not judged on a stale value)."""
    memo = {} if memo is None else memo
    moved = s[2] != parent[2] and parent[2]
    key = (s[1:5], parent[2:5] if moved else None, s[5], s[6][1] if s[6] else None)
    out = memo.get(key)
    if out is None:
        st = epoch_state(s)
        if moved:
            st.history.real_begin[parent[2]] = parent[3]
            if parent[4] is not None:
                st.history.recorded_begin[parent[2]] = parent[4]
        view = EpochView(st, cfg.interval, not cfg.clock_back, frames(s))
        out = memo[key] = [(inv.id, r) for inv in invs if (r := inv.predicate(view))]
    if s[7] is None or not world_changed:
        return out
    key = ("world", s[7], s[8])
    found = memo.get(key)
    if found is None:
        found = memo[key] = judge_world(cfg, s, world_invs, na)
    return out + found


# The page's invariants judged on the one page (page_view): those that read only what the
# explorer keeps of it, its lists, `used`, the blocks held and purged (a collect that leaves a
# block on two lists, a walk that purges a listed block).
PAGE_INVARIANTS = ("PG-COUNT", "PG-LIVE-NOT-FREE", "PG-PURGED-OFF-LISTS")


def judged_invariants(cfg: Config) -> tuple[list, list]:
    """(the epoch invariants, the world's and PAGE_INVARIANTS) of the registry that a run of
    `cfg` judges: the second only with an owner, whose page and thread they read."""
    reg = load_registry()
    invs = [i for i in reg.values() if i.scope == "epoch" and i.predicate]
    world = [i for i in reg.values() if (i.scope == "world" or i.id in PAGE_INVARIANTS)
             and i.predicate] if cfg.owner else []
    return invs, world


def judge_world(cfg: Config, s: tuple, world_invs, na: set) -> list:
    w = world_view(cfg, s, judged=True)
    out = []
    for inv in world_invs:
        if inv.id in na:
            continue
        try:
            reason = inv.predicate(w.pages[1] if inv.scope == "page" else w)
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
            stop_at_first: bool = False, time_limit: float | None = None,
            on_transition=None) -> Report:
    """Breadth-first over every reachable state; the first violation of each invariant is
    kept with its shortest path. `model.epoch.spin_max` is lowered for the run."""
    old_spin, old_stale = ep.spin_max, _stale_start_ok[0]
    ep.spin_max = cfg.spin_max
    _stale_start_ok[0] = is_stale_start_sound(cfg)
    try:
        return _explore(cfg, max_states, progress, stop_at_first, time_limit, on_transition)
    finally:
        ep.spin_max, _stale_start_ok[0] = old_spin, old_stale


def _explore(cfg: Config, max_states, progress, stop_at_first, time_limit,
             on_transition=None) -> Report:
    """`on_transition(action, state, successor)`: called on every transition (what
    purgecheck.reach counts of the rules the explorer reaches)."""
    import networkx as nx

    invs, world_invs = judged_invariants(cfg)
    rep = Report(cfg)
    na: set[str] = set()
    memo: dict = {}  # this run's model-step results and verdicts (see advance_move)
    checks: dict = {}
    t0 = time.perf_counter()
    init = initial_state(cfg)
    parent: dict[tuple, tuple | None] = {init: None}
    violations = rep.violations
    pending: dict[tuple, str] = {}  # (u, v) -> action: steps between park-pending states
    first_seen: dict[tuple, tuple] = {}  # a reached state of each node of `pending`
    frontier, level, stop = [init], 0, False
    next_report = 100_000
    while frontier and not stop:
        nxt = []
        for s in frontier:
            pending_s = cfg.graph and is_park_pending(s)
            for action, checked, ns, why in moves(cfg, s, memo):
                rep.transitions += 1
                if why:
                    inv_id, why = edge_verdict(why)
                    if inv_id not in violations:
                        violations[inv_id] = Violation(
                            inv_id, why, path_to(parent, s) + [(action, checked)])
                if on_transition is not None:
                    on_transition(action, s, ns)
                if pending_s and action != TICK and is_park_pending(ns):
                    edge = (system_part(s), system_part(ns))
                    pending.setdefault(edge, action)
                    first_seen.setdefault(edge[0], s)
                size = len(parent)
                parent.setdefault(ns, (s, action))  # hashes the state once
                if len(parent) == size:
                    continue
                for inv_id, reason in check_state(cfg, s, checked, invs, world_invs, na,
                                                  touches_world(action), checks):
                    if inv_id not in violations:
                        violations[inv_id] = Violation(inv_id, reason, path_to(parent, ns))
                nxt.append(ns)
                if max_states and len(parent) >= max_states:
                    rep.complete, stop = False, True  # cut, not exhausted
                    break
                if stop_at_first and violations:
                    stop = True
                    break
            if stop:
                break
            if len(parent) >= next_report:
                next_report += 100_000
                elapsed = time.perf_counter() - t0
                if progress:
                    progress(len(parent), elapsed)
                if time_limit and elapsed > time_limit:
                    rep.complete, stop = False, True
                    break
        if nxt:
            level += 1
        frontier = nxt
    rep.states = len(parent)
    rep.depth = level
    if cfg.graph:
        g = nx.DiGraph()
        g.add_edges_from(pending)
        nx.set_edge_attributes(g, pending, "action")
        rep.graph_nodes = g.number_of_nodes()
        cyc = stuck_cycle(g)
        if cyc is not None:
            violations["PK-NO-STUCK-CYCLE"] = Violation(
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
    current epoch's real beginning, the scavenger's due test against holes_sweep_last, a
    walk against the last allocation), and from `clock - interval` on that holds for all of
    them. So they are raised to `clock - interval`. The end of the park's last sweep is
    compared with the start of the next one, the claim time once the scavenger has claimed:
    it is raised to `claim - interval` then. The shared start is left exact (the CAS compares
    it for equality); so is the current epoch's beginning while an advance is between its
    CAS and its store (its clock read is compared with it). The advance frames are made
    canonical (canonical_frame)."""
    if not cfg.reduce_dead:
        return s
    T = s[0]
    floor = T - cfg.interval
    S, E, began, rec = kept_shared(cfg, T, s[1:5])
    sweepers = tuple(sorted(canonical_frame(sw, floor, S, E) for sw in s[5]))
    scav, owner, page = s[6], s[7], s[8]
    if scav is not None and scav[1] != IDLE:
        scav = (scav[0], canonical_frame(scav[1], floor, S, E)) + scav[2:]
    if owner is not None:
        sweeps = owner[6]
        if sweeps:
            lo = (scav[3] if scav[0] != "idle" else T) - cfg.interval
            count, first, before, last = sweeps
            end = last[1] if last[1] >= lo else lo
            sweeps = (count, first, before, (end, end) + last[2:])
        last_ms = owner[2] if owner[2] >= floor else floor
        owner = owner[:2] + (last_ms,) + owner[3:6] + (sweeps, owner[7])
        if page[2] is not None and page[2] < floor:
            page = page[:2] + (floor, page[3])
    return (T, S, E, began, rec, sweepers, scav, owner, page)


STALE_START = -1  # a loaded start that no later CAS can match and every compare finds due
_stale_start_ok = [True]  # set per run by explore (is_stale_start_sound)


def is_stale_start_sound(cfg: Config) -> bool:
    """The model's compare (model.epoch.is_epoch_due, which a mutant may replace) finds
    every start more than an interval old due, and STALE_START with it, at every clock
    reading of this configuration: only then may canonical_frame stand one for the other."""
    for T in range(cfg.clock_bound + 1):
        for start in range(T - cfg.interval):
            for now in range(T, cfg.clock_bound + 1):
                if not (ep.is_epoch_due(start, now, cfg.interval)
                        and ep.is_epoch_due(STALE_START, now, cfg.interval)):
                    return False
    return True
START_LIVE = (ep.PC_READ_CLOCK, ep.PC_COMPARE, ep.PC_CAS)


def canonical_frame(sw: tuple, floor: int, S: int, E: int) -> tuple:
    """One representative for advance frames that no later step tells apart.
    - a loaded start that is no longer the shared start and is more than an interval in the
      past: every later compare finds the epoch due (now - start >= interval) and the CAS
      fails (the shared start is written only with MOVING or a clock reading taken after a
      CAS, later than it), so it is replaced by STALE_START, for which both hold too;
    - e_load (a ghost) is only compared for equality with the epoch when the call ends; the
      epoch never goes back (advance_move stops the run if it does), so every e_load older
      than the epoch before the current one is replaced by that one."""
    if sw == IDLE:
        return sw
    pc, start, e_load = sw[0], sw[1], sw[6]
    if pc in START_LIVE and start != S and start < floor and _stale_start_ok[0]:
        start = STALE_START
    if e_load < E - 1 and (sw[7] or pc in START_LIVE[:2]):
        e_load = E - 1
    if start == sw[1] and e_load == sw[6]:
        return sw
    return (pc, start) + sw[2:6] + (e_load, sw[7])


def forget_judged(s: tuple) -> tuple:
    """Drop the ghost records that were judged once, when the state after them was checked:
    a walk's record (the invariants that read it judge the walk against the page's state
    then, which no later step changes until an allocation replaces the record anyway) and
    the park record before the last one (PK-SPACING judged the last against it)."""
    owner, page = s[7], s[8]
    if page is not None and page[3] is not None:
        page = page[:3] + (None,)
    if owner is not None and owner[6] and owner[6][2] is not None:
        owner = owner[:6] + (owner[6][:2] + (None, owner[6][3]), owner[7])
    return s[:7] + (owner, page)


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
