"""The epoch protocol of seed 000 over the weak memory of proofs.weak.memory (issue 31).

Threads, each access with an ordering taken from `Orderings` (the C reference's by default):
- a sweeper loops: the advance of digest 7 (`load(start)`; clock; the compare;
  `CAS_strong(start: s -> MOVING)`; `fetch_add(epoch, 1)`; clock again; `store(start, now2)`;
  or the MOVING spin, `spin_max` loads), then the sweep's read of the epoch (digest 6.2 and 8:
  `holes_sweep_epoch`), with clock readings on either side of it;
- the allocating owner (`owner=True`) loops: the stamp's relaxed load of the epoch (digest 5),
  then, when `owner_sweeps`, a sweep of its own (the advance and the epoch read, as a sweeper),
  judging its page by the age `epoch read - stamp` (digest 6.2: held when the age is < 2).
The clock is virtual: it ticks 1 ms at a time to `clock_bound`, and a reading is the time of
its step (it synchronises nothing).

Properties (a violation stops the run with the path as a timeline):
- EP-NO-SHORT-EPOCH: each increment comes at least `interval` after the one before it in the
  epoch's mo (the epoch's real beginnings, in physical time; epoch 0 begins at time 0);
- EP-OBSERVED: the seed's test (a), "from readings of the clock that lie around its readings
  of the epoch that no epoch is shorter than the interval": a thread that read epoch v after
  clock reading c1 and later epoch e >= v + 2 before clock reading c2 has c2 - c1 >= interval;
- EP-MOVING-EXCL: at most one thread is between its successful CAS and its store;
- EP-RECORDED-NOT-BEFORE-REAL: a stored start is not before the beginning of the latest epoch;
- EP-SEES-STARTED: a sweep whose advance returned having read a start that some advance
  stored (not due; the spin saw the mark go; its own store) reads, at the sweep's epoch read,
  the epoch that began there or a later one (what the seed's spin is for: "so that it sees the
  new epoch"; a spin that ends on MOVING at its bound promises nothing);
- HD-INTERVAL (owner): the owner's sweep finds its page old (age >= 2) only when the last
  allocation, the stamp's load, is at least `interval` before the sweep's epoch read.
Observed, not judged: the staleness of the stamp (the epoch latest in mo at the stamp's load
minus the value the load returned), the greatest over every transition (`Stats`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from model.epoch import MOVING, is_epoch_due
from proofs.weak import explorer as ex
from proofs.weak import memory as mm
from proofs.weak.memory import ACQ, ACQ_REL, REL, RLX

START, EPOCH = 0, 1
LOCATIONS = ("start", "epoch")


@dataclass(frozen=True)
class Orderings:
    """One ordering per atomic access of the protocol (success/failure for the CAS)."""

    load_start: str = ACQ  # digest 7 step 2: load_acquire(start)
    cas: str = ACQ_REL  # the claim (the digest gives no ordering; the reference acq_rel)
    cas_fail: str = ACQ
    fetch_add: str = ACQ_REL  # the increment (digest: none given; the reference acq_rel)
    store_start: str = REL  # digest 7: store_release(start, now2)
    spin_load: str = ACQ  # the MOVING spin (the reference: acquire)
    sweep_epoch: str = ACQ  # digest 6.2: the epoch re-read with acquire for each page
    stamp_load: str = RLX  # digest 5: a relaxed load of the epoch

    def items(self):
        return [(k, getattr(self, k)) for k in self.__dataclass_fields__]


REFERENCE = Orderings()  # reference_c/epoch.c, sweep.c


@dataclass(frozen=True)
class Config:
    name: str
    sweepers: int
    interval: int = 2
    clock_bound: int = 5
    spin_max: int = 1
    owner: bool = False
    owner_sweeps: bool = True
    observer: bool = True  # the sweepers' clock readings around their epoch reads
    # judge EP-OBSERVED also on a reading after a spin that ended on MOVING at its bound
    # (the seed: "A sweeper that finds the mark waits for it, bounded, so that it sees the new
    # epoch"); by default such a reading is excused, as EP-EPOCH-MOVES excuses it under SC
    observe_after_give_up: bool = False
    orderings: Orderings = REFERENCE
    model: mm.MemoryModel = mm.RC11

    def describe(self) -> str:
        parts = [f"{self.sweepers} sweeper{'s' if self.sweepers != 1 else ''}"]
        if self.owner:
            parts.append("1 allocating owner" + ("" if self.owner_sweeps else
                                                 " that never sweeps"))
        parts.append(f"interval {self.interval} ms, clock to {self.clock_bound} ms")
        return ", ".join(parts)


@dataclass
class Stats:
    max_stamp_staleness: int = 0
    max_sweep_staleness: int = 0
    epochs: int = 0  # the greatest epoch reached


# Program counters.
P_STAMP, P_LOAD, P_CLOCK, P_CAS, P_FAA, P_CLOCK2, P_STORE, P_SPIN, P_EPOCH = range(9)
HOLDING = (P_FAA, P_CLOCK2, P_STORE)
GAVE_UP = -1  # in the spins slot: the spin ended on MOVING, at its bound
# regs: (pc, s, now, spins, e, seen, stamp, t_alloc, bad)
#   s, now, spins: the advance's locals; seen: ((epoch value, the clock at its reading), ...)
#   of the observer; stamp, t_alloc: the owner's stamp and the time of its load; bad: a
#   violation found by the thread's last step.
R_BAD = 8
_NAMES = ("pc", "s", "now", "spins", "e", "seen", "stamp", "t_alloc", "bad")


def initial_regs(owner: bool) -> tuple:
    return (P_STAMP if owner else P_LOAD, 0, 0, 0, 0, (), None, None, None)


def _set(r: tuple, **kw) -> tuple:
    out = list(r)
    for k, v in kw.items():
        out[_NAMES.index(k)] = v
    return tuple(out)


def program(cfg: Config, owner: bool):
    """One thread's loop. The clock readings around the sweep's epoch read are taken at the
    read's own step: that is the execution with no tick between them, the strictest for
    EP-OBSERVED (a tick in between only widens the window) and for HD-INTERVAL."""
    o, interval = cfg.orderings, cfg.interval
    first = P_STAMP if owner else P_LOAD

    def after_advance(r, gave_up=False, seen_start=MOVING):
        """The advance returns, having last seen start = seen_start."""
        return _set(r, pc=P_EPOCH, s=seen_start, now=0, spins=GAVE_UP if gave_up else 0)

    def on_epoch(r, e, T):
        bad = None
        stamp, t_alloc, seen = r[6], r[7], r[5]
        if owner and stamp is not None and e - stamp >= 2 and T - t_alloc < interval:
            bad = f"HD-INTERVAL: the owner's sweep read epoch {e}, its page stamped " \
                  f"{stamp} (age {e - stamp}): not held, {T - t_alloc} ms after the " \
                  f"allocation < interval {interval} ms"
        if cfg.observer and (r[3] != GAVE_UP or cfg.observe_after_give_up):
            for v, c1 in seen:
                if e - v >= 2 and T - c1 < interval:
                    bad = bad or f"EP-OBSERVED: read epoch {v} at clock {c1} and epoch {e} " \
                                 f"at clock {T}: {T - c1} ms for a whole epoch < interval " \
                                 f"{interval} ms"
            seen = tuple(sorted({**dict(seen), e: T}.items()))
            old = [v for v, _ in seen if v <= e - 2]
            if old:  # the latest reading two or more back judges all that the older ones do
                seen = tuple((v, c) for v, c in seen if v >= max(old))
        return _set(r, pc=first, s=0, now=0, spins=0, e=e, seen=seen, bad=bad)

    def prog(r):
        pc = r[0]
        if pc == P_STAMP:
            return ex.Load(EPOCH, o.stamp_load, lambda r, v, T: _set(
                r, pc=P_LOAD if cfg.owner_sweeps else P_STAMP, stamp=v, t_alloc=T, e=0),
                tag="stamp", timed=True)
        if pc == P_LOAD:
            return ex.Load(START, o.load_start, lambda r, v: _set(
                r, pc=P_SPIN if v == MOVING else P_CLOCK, s=v), tag="load_start")
        if pc == P_CLOCK:
            return ex.Clock(lambda r, T: _set(r, pc=P_CAS, now=T) if is_epoch_due(r[1], T, interval)
                            else after_advance(r, seen_start=r[1]), tag="read_clock")
        if pc == P_CAS:
            return ex.cas(START, r[1], MOVING, o.cas, o.cas_fail,
                          lambda r, old, ok: _set(r, pc=P_FAA if ok else P_SPIN), tag="cas")
        if pc == P_FAA:
            return ex.fetch_add(EPOCH, 1, o.fetch_add, lambda r, old, ok: _set(r, pc=P_CLOCK2),
                                tag="increment")
        if pc == P_CLOCK2:
            return ex.Clock(lambda r, T: _set(r, pc=P_STORE, now=T), tag="read_clock_again")
        if pc == P_STORE:
            return ex.Store(START, r[2], o.store_start,
                            lambda r: after_advance(r, seen_start=r[2]), tag="store_start")
        if pc == P_SPIN:
            return ex.Load(START, o.spin_load, lambda r, v: after_advance(r, seen_start=v)
                           if v != MOVING
                           else _set(r, spins=r[3] + 1) if r[3] + 1 < cfg.spin_max
                           else after_advance(r, gave_up=True), tag="spin")
        if pc == P_EPOCH:
            return ex.Load(EPOCH, o.sweep_epoch, on_epoch, tag="sweep_epoch", timed=True)
        raise AssertionError(pc)
    return prog


def system(cfg: Config, stats: Stats | None = None, collect: bool = True) -> ex.System:
    stats = stats if stats is not None else Stats()
    threads = [("sweeper", program(cfg, False), initial_regs(False))
               for _ in range(cfg.sweepers)]
    if cfg.owner:
        threads.append(("owner", program(cfg, True), initial_regs(True)))

    def on_step(ghost, info, ns):
        T, mem, regs = ns[0], ns[1], ns[3]
        t = info["thread"]
        if t is None:
            return ghost, None
        begins, started = ghost
        bad = regs[t][R_BAD]
        latest = mm.latest(mem, EPOCH)
        tag = info["tag"]
        if tag == "increment" and info["ok"]:
            old = info["value"]
            if old + 1 != len(begins):
                bad = bad or f"EP-NO-SHORT-EPOCH: the increment read epoch {old}, not the " \
                             f"latest ({len(begins) - 1})"
            elif T - begins[old] < cfg.interval:
                bad = bad or f"EP-NO-SHORT-EPOCH: epoch {old} began at {begins[old]} ms and " \
                             f"epoch {old + 1} at {T} ms: {T - begins[old]} ms < interval " \
                             f"{cfg.interval} ms"
            begins = begins + (T,)
            stats.epochs = max(stats.epochs, len(begins) - 1)
        elif tag == "store_start":
            if info["value"] < begins[-1]:
                bad = bad or f"EP-RECORDED-NOT-BEFORE-REAL: start {info['value']} ms stored, " \
                             f"epoch {len(begins) - 1} began at {begins[-1]} ms"
            started = tuple(sorted({**dict(started), info["value"]: len(begins) - 1}.items()))
        elif tag == "stamp":
            stats.max_stamp_staleness = max(stats.max_stamp_staleness, latest - info["value"])
        elif tag == "sweep_epoch":
            stats.max_sweep_staleness = max(stats.max_sweep_staleness, latest - info["value"])
            s_seen = info["regs_before"][1]
            want = 0 if s_seen == 0 else dict(started).get(s_seen)
            if want is not None and info["value"] < want:
                bad = bad or f"EP-SEES-STARTED: the advance returned having read start " \
                             f"{s_seen} ms, the beginning of epoch {want}, and the sweep then " \
                             f"read epoch {info['value']}"
        holders = sum(1 for r in regs if r[0] in HOLDING)
        if holders > 1:
            bad = bad or f"EP-MOVING-EXCL: {holders} threads between their CAS and their store"
        return (begins, started), bad

    return ex.System(locations=LOCATIONS, initial=(0, 0), threads=threads, model=cfg.model,
                     clock_bound=cfg.clock_bound,
                     symmetric=(tuple(range(cfg.sweepers)),) if cfg.sweepers > 1 else (),
                     ghost=((0,), ()), on_step=on_step, collect=collect)


@dataclass
class Result:
    config: Config  # or a park configuration (proofs.weak.park), with its Stats
    report: ex.Report
    stats: Stats = field(default_factory=Stats)

    @property
    def ok(self) -> bool:
        return self.report.violation is None


def check(cfg: Config, max_states: int | None = None) -> Result:
    stats = Stats()
    rep = ex.explore(system(cfg, stats), max_states=max_states)
    return Result(cfg, rep, stats)


def counterexample(cfg: Config) -> str | None:
    """The shortest violation's timeline, found breadth first without the sweepers' symmetry
    and without collecting old messages (so threads and mo indices keep their numbers along
    the path)."""
    return ex.counterexample(system(cfg, collect=False))


def weaken(cfg: Config, access: str, order: str) -> Config:
    return replace(cfg, orderings=replace(cfg.orderings, **{access: order}))


def weaken_beside(cfg, access: str, order: str):
    """`weaken` for a configuration that runs the advance beside accesses of its own (the park,
    the fork): the advance's orderings in `cfg.advance`, its own in `cfg.orderings`."""
    if access in Orderings.__dataclass_fields__:
        return replace(cfg, advance=replace(cfg.advance, **{access: order}))
    return replace(cfg, orderings=replace(cfg.orderings, **{access: order}))
