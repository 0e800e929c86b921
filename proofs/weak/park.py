"""The park handoff of seed 000 over the weak memory of proofs.weak.memory (issue 31).

What the scavenger reads of a parked thread, and what the owner reads back when it leaves the
park, each access with an ordering from `ParkOrderings` (the C reference's by default:
reference_c/park.c, where an `atomic_load`/`atomic_store` without `_explicit` is seq_cst).
Digest 8 names the accesses ("CAS RUNNING -> PARKED", "claim with CAS PARKED -> SWEEPING",
"store park_swept = next; store state PARKED") but no ordering for them.

Threads:
- the owner runs `Config.program`, one atomic access per step:
  malloc (take block 1: load it, un-purge it when it was purged (swept_state := NONE), store
  LIVE; then the stamp of digest 5: a relaxed load of the epoch, a load of swept_state and a
  store of the stamp when it differs), free (store block 1 FREE), park
  (mi_on_thread_idle_start: load park_state, store park_swept := NONE, CAS RUNNING -> PARKED),
  unpark (mi_on_thread_idle_end: load park_state, spin while SWEEPING, CAS PARKED -> RUNNING);
- the scavenger loops over _mi_theap_sweep_parked for the one parked thread: load park_state
  (PARKED?), load park_swept (not DONE?), load holes_sweep_last and read the clock (due?), CAS
  PARKED -> SWEEPING; then swept := load park_swept, the epoch advance of digest 7 (the
  sweepers' program of proofs.weak.protocol), the sweep's epoch read (holes_sweep_epoch), the
  page's swept_state and block 1 (the hold of digest 6.2: kept when stamped less than two
  epochs ago, else walked: a free block 1 is purged, swept_state := WALKED), the clock and
  store holes_sweep_last, store park_swept := next (model.park.compute_park_next), store
  park_state := PARKED;
- `sweepers` more threads run the advance and their sweep's epoch read (proofs.weak.protocol),
  so that the epoch also moves while the scavenger is not sweeping.
The page's fields (swept_state, block 1) are plain fields in C: they are modelled as relaxed
atomics, so a read that the handoff does not order shows as a stale read (in C it would be a
data race, undefined behaviour, which is worse). park_reclaim and holes_sweep_deferred are
left out: no step of this model reads them (a sweep is not cut short by a reclaim here).

Properties (a violation stops the run with its timeline):
- PK-HANDOFF-FRESH: every read of the parked thread's state that the scavenger makes after its
  claim (park_swept, swept_state, block 1), and every read of the page the owner makes, returns
  the latest value in mo: what the seed rests on ("a page that reaches a sweeper does so
  through a release that the sweeper acquired (the park ...)"; "Stamps are written by the
  owner of a page only, never while a sweep has the page");
- HD-INTERVAL: block 1 is purged only `interval` or more after the owner's last allocation
  (the stamp's load, physical time);
- HD-YOUNG-KEPT: block 1 is purged only if the page's latest swept_state is not a stamp less
  than two epochs older than the epoch the sweep read;
- PK-SPACING: a claim of a park is an interval or more after the end of its sweep before;
- PK-MAX-SWEEPS and PK-DONE-TWO-EPOCHS: a park is swept at most MI_PARK_SWEEPS_MAX times, and a
  sweep that began two epochs after the park's first marks it done.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from model.park import compute_park_next
from model.thread import MI_PARK_SWEEPS_MAX, PARK_SWEPT_DONE, PARK_SWEPT_NONE
from proofs.weak import explorer as ex
from proofs.weak import memory as mm
from proofs.weak import protocol as P
from proofs.weak.memory import ACQ, ACQ_REL, REL, RLX, SC

START, EPOCH, PARK_STATE, PARK_SWEPT, SWEEP_LAST, SWEPT_STATE, BLOCK = range(7)
LOCATIONS = ("start", "epoch", "park_state", "park_swept", "holes_sweep_last", "swept_state",
             "block1")
RUNNING, PARKED, SWEEPING = 0, 1, 2  # reference_c/purge.h: PARK_RUNNING, PARKED, SWEEPING
SWEPT_NONE, WALKED = -1, -2  # swept_state: MI_PAGE_SWEPT_NONE, (capacity, used); else a stamp
LIVE, FREE, PURGED = 0, 1, 2  # block 1
INITIAL = (0, 0, RUNNING, PARK_SWEPT_NONE, 0, SWEPT_NONE, FREE)
STATE_NAMES = {RUNNING: "RUNNING", PARKED: "PARKED", SWEEPING: "SWEEPING"}


@dataclass(frozen=True)
class ParkOrderings:
    """One ordering per atomic access of the handoff (success/failure for the CASes); the
    C reference's: reference_c/park.c."""

    park_load_state: str = SC  # idle_start: atomic_load(park_state) == RUNNING
    park_store_swept: str = SC  # idle_start: atomic_store(park_swept, NONE)
    park_cas: str = ACQ_REL  # idle_start: CAS RUNNING -> PARKED (acq_rel, acquire)
    park_cas_fail: str = ACQ
    unpark_load_state: str = ACQ  # idle_end: load_explicit(park_state, acquire)
    unpark_cas: str = ACQ_REL  # idle_end: CAS PARKED -> RUNNING (acq_rel, acquire)
    unpark_cas_fail: str = ACQ
    scav_load_state: str = ACQ  # sweep_parked: load_explicit(park_state, acquire)
    scav_load_swept: str = SC  # sweep_parked: atomic_load(park_swept) != DONE
    scav_load_last: str = SC  # sweep_parked: atomic_load(holes_sweep_last)
    claim_cas: str = ACQ_REL  # sweep_parked: CAS PARKED -> SWEEPING (acq_rel, acquire)
    claim_cas_fail: str = ACQ
    claim_load_swept: str = SC  # sweep_parked_thread: swept = atomic_load(park_swept)
    store_last: str = SC  # atomic_store(holes_sweep_last, now)
    store_swept: str = SC  # atomic_store(park_swept, next)
    release_state: str = REL  # store_explicit(park_state, PARKED, release)

    def items(self):
        return [(k, getattr(self, k)) for k in self.__dataclass_fields__]


REFERENCE = ParkOrderings()
# The accesses whose ordering is a load's, a store's or an RMW's (for the one-step weakenings).
LOADS = ("park_load_state", "unpark_load_state", "scav_load_state", "scav_load_swept",
         "scav_load_last", "claim_load_swept", "park_cas_fail", "unpark_cas_fail",
         "claim_cas_fail")
STORES = ("park_store_swept", "store_last", "store_swept", "release_state")


@dataclass(frozen=True)
class Config:
    name: str
    sweepers: int = 0
    interval: int = 2
    clock_bound: int = 5
    program: tuple[str, ...] = ("malloc", "free", "park")
    orderings: ParkOrderings = REFERENCE
    advance: P.Orderings = P.REFERENCE
    model: mm.MemoryModel = mm.RC11

    def describe(self) -> str:
        parts = [f"owner ({' '.join(self.program)}) + scavenger"]
        if self.sweepers:
            parts.append(f"{self.sweepers} sweeper{'s' if self.sweepers != 1 else ''}")
        parts.append(f"interval {self.interval} ms, clock to {self.clock_bound} ms")
        return ", ".join(parts)


@dataclass
class Stats:
    park_sweeps: int = 0  # the most sweeps of one park
    purged: bool = False  # block 1 was purged by some sweep
    held: bool = False  # some sweep kept the page (the hold)
    unparked_after_sweep: bool = False  # the owner left a park that was swept


# -- the owner -------------------------------------------------------------------------------
# regs: (pc, op, b) with op the index in the program and b a value read earlier in the op.
O_NEXT, O_BLOCK, O_UNPURGE, O_TAKE, O_STAMP, O_STATE, O_STORE_STAMP, O_FREE, \
    O_PARK_LOAD, O_PARK_SWEPT, O_PARK_CAS, O_UNPARK_LOAD, O_UNPARK_CAS = range(13)
OP_START = {"malloc": O_BLOCK, "free": O_FREE, "park": O_PARK_LOAD, "unpark": O_UNPARK_LOAD}


def owner_program(cfg: Config):
    o = cfg.orderings

    def next_op(r):
        op = r[1] + 1
        return (OP_START[cfg.program[op]], op, None) if op < len(cfg.program) else (O_NEXT, op,
                                                                                     None)

    def prog(r):
        pc, op, b = r
        if pc == O_NEXT:
            return None
        if pc == O_BLOCK:
            return ex.Load(BLOCK, RLX, lambda r, v: (O_UNPURGE if v == PURGED else O_TAKE,
                                                     op, None), tag="owner_block")
        if pc == O_UNPURGE:  # _mi_page_unpurge_run: the run comes back, swept_state NONE
            return ex.Store(SWEPT_STATE, SWEPT_NONE, RLX, lambda r: (O_TAKE, op, None),
                            tag="unpurge")
        if pc == O_TAKE:
            return ex.Store(BLOCK, LIVE, RLX, lambda r: (O_STAMP, op, None), tag="take")
        if pc == O_STAMP:  # digest 5: a relaxed load of the epoch
            return ex.Load(EPOCH, cfg.advance.stamp_load, lambda r, v: (O_STATE, op, v),
                           tag="stamp")
        if pc == O_STATE:  # ... stored only when the page does not carry it already
            return ex.Load(SWEPT_STATE, RLX, lambda r, v: (O_STORE_STAMP, op, b) if v != b
                           else next_op(r), tag="owner_state")
        if pc == O_STORE_STAMP:
            return ex.Store(SWEPT_STATE, b, RLX, next_op, tag="store_stamp")
        if pc == O_FREE:
            return ex.Store(BLOCK, FREE, RLX, next_op, tag="free")
        if pc == O_PARK_LOAD:
            return ex.Load(PARK_STATE, o.park_load_state, lambda r, v: (O_PARK_SWEPT, op, None)
                           if v == RUNNING else next_op(r), tag="park_load_state")
        if pc == O_PARK_SWEPT:
            return ex.Store(PARK_SWEPT, PARK_SWEPT_NONE, o.park_store_swept,
                            lambda r: (O_PARK_CAS, op, None), tag="park_store_swept")
        if pc == O_PARK_CAS:
            return ex.cas(PARK_STATE, RUNNING, PARKED, o.park_cas, o.park_cas_fail,
                          lambda r, old, ok: next_op(r), tag="park")
        if pc == O_UNPARK_LOAD:  # a sweep has the heap: wait for it (park_reclaim left out)
            return ex.Load(PARK_STATE, o.unpark_load_state, lambda r, v: r if v == SWEEPING
                           else (O_UNPARK_CAS, op, None) if v == PARKED else next_op(r),
                           tag="unpark_load_state")
        if pc == O_UNPARK_CAS:
            return ex.cas(PARK_STATE, PARKED, RUNNING, o.unpark_cas, o.unpark_cas_fail,
                          lambda r, old, ok: next_op(r) if ok else (O_UNPARK_LOAD, op, None),
                          tag="unpark")
        raise AssertionError(pc)
    return prog


# -- the scavenger ---------------------------------------------------------------------------
# regs: (pc, adv, swept, e, park_epoch, stamp, block, deferred)
S_STATE, S_SWEPT, S_LAST, S_CLAIM, S_CLAIM_SWEPT, S_ADVANCE, S_EPOCH, S_PAGE_STATE, \
    S_PAGE_BLOCK, S_PURGE, S_WALKED, S_CLOCK, S_STORE_LAST, S_STORE_SWEPT, S_RELEASE = range(15)
IDLE_REGS = (S_STATE, None, PARK_SWEPT_NONE, 0, 0, None, None, False)


def scavenger_program(cfg: Config):
    o, interval = cfg.orderings, cfg.interval
    adv_cfg = P.Config("scavenger", sweepers=1, interval=interval, clock_bound=cfg.clock_bound,
                       observer=False, orderings=cfg.advance)
    advance = P.program(adv_cfg, owner=False)
    adv_start = P.initial_regs(False)

    def at(r, pc, **kw):
        out = list(r)
        out[0] = pc
        for k, v in kw.items():
            out[("adv", "swept", "e", "park_epoch", "stamp", "block", "deferred").index(k) + 1] = v
        return tuple(out)

    def idle(r):
        return IDLE_REGS[:4] + (r[4],) + IDLE_REGS[5:]  # park_epoch is kept across sweeps

    def lift(ins, r):
        """The advance's instruction, its registers kept in the scavenger's `adv` slot; when
        the advance returns (its next step is the sweep's epoch read) the sweep goes on."""
        def then(reg, *args):
            adv = ins.then(reg[1], *args)
            return at(reg, S_EPOCH, adv=None) if adv[0] == P.P_EPOCH else at(reg, S_ADVANCE,
                                                                             adv=adv)
        return replace(ins, then=then)

    def on_page(r):
        """Digest 6.2: a stamped page less than two epochs old is held; else walked."""
        e, stamp, block = r[3], r[5], r[6]
        if stamp >= 0 and e - stamp < 2:
            return at(r, S_CLOCK, deferred=block == FREE)
        return at(r, S_PURGE if block == FREE else S_WALKED)

    def prog(r):
        pc = r[0]
        if pc == S_STATE:
            return ex.Load(PARK_STATE, o.scav_load_state, lambda r, v: at(r, S_SWEPT)
                           if v == PARKED else r, tag="scav_load_state")
        if pc == S_SWEPT:
            return ex.Load(PARK_SWEPT, o.scav_load_swept, lambda r, v: at(r, S_LAST)
                           if v != PARK_SWEPT_DONE else idle(r), tag="scav_load_swept")
        if pc == S_LAST:
            return ex.Load(SWEEP_LAST, o.scav_load_last, lambda r, v, T: at(r, S_CLAIM)
                           if T - v >= interval else idle(r), tag="scav_load_last", timed=True)
        if pc == S_CLAIM:
            return ex.cas(PARK_STATE, PARKED, SWEEPING, o.claim_cas, o.claim_cas_fail,
                          lambda r, old, ok: at(r, S_CLAIM_SWEPT) if ok else idle(r),
                          tag="claim")
        if pc == S_CLAIM_SWEPT:
            return ex.Load(PARK_SWEPT, o.claim_load_swept,
                           lambda r, v: at(r, S_ADVANCE, swept=v, adv=adv_start),
                           tag="claim_load_swept")
        if pc == S_ADVANCE:
            return lift(advance(r[1]), r)
        if pc == S_EPOCH:
            return ex.Load(EPOCH, cfg.advance.sweep_epoch, lambda r, v: at(r, S_PAGE_STATE, e=v),
                           tag="sweep_epoch")
        if pc == S_PAGE_STATE:
            return ex.Load(SWEPT_STATE, RLX, lambda r, v: at(r, S_PAGE_BLOCK, stamp=v),
                           tag="page_state")
        if pc == S_PAGE_BLOCK:
            return ex.Load(BLOCK, RLX, lambda r, v: on_page(at(r, S_PAGE_BLOCK, block=v)),
                           tag="page_block")
        if pc == S_PURGE:
            return ex.Store(BLOCK, PURGED, RLX, lambda r: at(r, S_WALKED), tag="purge")
        if pc == S_WALKED:  # a complete walk: swept_state := (capacity, used)
            return ex.Store(SWEPT_STATE, WALKED, RLX, lambda r: at(r, S_CLOCK), tag="walked")
        if pc == S_CLOCK:  # holes_sweep_last is taken AFTER the work
            return ex.Clock(lambda r, T: at(r, S_STORE_LAST, stamp=T), tag="read_clock_last")
        if pc == S_STORE_LAST:
            return ex.Store(SWEEP_LAST, r[5], o.store_last, lambda r: at(r, S_STORE_SWEPT),
                            tag="store_last")
        if pc == S_STORE_SWEPT:
            return ex.Store(PARK_SWEPT, park_next(r), o.store_swept,
                            lambda r: at(r, S_RELEASE, park_epoch=park_epoch_of(r)),
                            tag="store_swept")
        if pc == S_RELEASE:
            return ex.Store(PARK_STATE, PARKED, o.release_state, idle, tag="release")
        raise AssertionError(pc)
    return prog


def park_epoch_of(r) -> int:
    """holes_park_epoch: the epoch of the park's first sweep (swept NONE), else as it was."""
    return r[3] if r[2] == PARK_SWEPT_NONE else r[4]


def park_next(r) -> int:
    """park_swept after this sweep (model.park.compute_park_next)."""
    t = SimpleNamespace(holes_sweep_epoch=r[3], holes_park_epoch=park_epoch_of(r))
    return compute_park_next(t, r[2], r[7])


# -- the system and its properties ---------------------------------------------------------

FRESH_READS = {"claim_load_swept": PARK_SWEPT, "page_state": SWEPT_STATE,
               "page_block": BLOCK, "owner_block": BLOCK, "owner_state": SWEPT_STATE}


def system(cfg: Config, stats: Stats | None = None, collect: bool = True) -> ex.System:
    stats = stats if stats is not None else Stats()
    sweeper_cfg = P.Config("sweeper", sweepers=1, interval=cfg.interval,
                           clock_bound=cfg.clock_bound, observer=False, orderings=cfg.advance)
    threads = [("owner", owner_program(cfg), (OP_START[cfg.program[0]], 0, None)),
               ("scavenger", scavenger_program(cfg), IDLE_REGS)]
    threads += [("sweeper", P.program(sweeper_cfg, False), P.initial_regs(False))
                for _ in range(cfg.sweepers)]
    scav = 1

    # ghost: (t_alloc, sweeps of this park, first epoch of this park, end of its last sweep,
    # the park was swept)
    def on_step(ghost, info, ns):
        t = info["thread"]
        if t is None:
            return ghost, None
        T, mem = info["T"], ns[1]
        t_alloc, sweeps, first, last_end, swept = ghost
        tag, bad = info["tag"], None
        loc = FRESH_READS.get(tag)
        if loc is not None and info["value"] != mm.latest(mem, loc):
            who = "the owner" if t == 0 else "the scavenger"
            bad = f"PK-HANDOFF-FRESH: {who} read {LOCATIONS[loc]} = {info['value']}, " \
                  f"not the latest ({mm.latest(mem, loc)})"
        elif tag == "stamp":
            t_alloc = T
        elif tag == "park" and info["ok"]:
            sweeps, first, last_end = 0, None, None
        elif tag == "unpark" and info["ok"] and sweeps:
            stats.unparked_after_sweep = True
        elif tag == "claim" and info["ok"]:
            if last_end is not None and T - last_end < cfg.interval:
                bad = f"PK-SPACING: the park claimed at {T} ms, {T - last_end} ms after the " \
                      f"end of its sweep before (interval {cfg.interval} ms)"
        elif tag == "purge":
            e = ns[3][scav][3]
            latest = mm.latest(mem, SWEPT_STATE)
            stats.purged = True
            if t_alloc is not None and T - t_alloc < cfg.interval:
                bad = f"HD-INTERVAL: block 1 purged at {T} ms, {T - t_alloc} ms after the " \
                      f"last allocation (interval {cfg.interval} ms)"
            elif latest >= 0 and e - latest < 2:
                bad = f"HD-YOUNG-KEPT: block 1 purged in epoch {e}, the page stamped {latest}"
        elif tag == "store_swept":
            regs = info["regs_before"]
            sweeps += 1
            first = regs[3] if first is None else first
            stats.park_sweeps = max(stats.park_sweeps, sweeps)
            stats.held = stats.held or regs[7]
            if sweeps > MI_PARK_SWEEPS_MAX:
                bad = f"PK-MAX-SWEEPS: the park swept {sweeps} times"
            elif regs[3] - first >= 2 and info["value"] != PARK_SWEPT_DONE:
                bad = f"PK-DONE-TWO-EPOCHS: sweep {sweeps} of the park began in epoch " \
                      f"{regs[3]}, two after the first ({first}), and left it not done"
        elif tag == "read_clock_last":
            last_end = T
        return (t_alloc, sweeps, first, last_end, swept), bad

    return ex.System(locations=LOCATIONS, initial=INITIAL, threads=threads, model=cfg.model,
                     clock_bound=cfg.clock_bound,
                     symmetric=(tuple(range(2, 2 + cfg.sweepers)),) if cfg.sweepers > 1 else (),
                     ghost=(None, 0, None, None, False), on_step=on_step, collect=collect)


def check(cfg: Config, max_states: int | None = None) -> P.Result:
    stats = Stats()
    return P.Result(cfg, ex.explore(system(cfg, stats), max_states=max_states), stats)


def counterexample(cfg: Config) -> str | None:
    """The shortest violation's timeline (breadth first, old messages kept)."""
    return ex.counterexample(system(cfg, collect=False))


weaken = P.weaken_beside
