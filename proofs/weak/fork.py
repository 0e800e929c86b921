"""A fork beside the epoch advance, over the weak memory of proofs.weak.memory (issue 31).

Seed 000 (2): "A fork that lands while another thread holds the mark: the child records a new
beginning (_mi_page_purge_holes_forked_child)"; digest 7: "Fork: in the child, if start ==
MOVING, store now". The real code's rule is a relaxed load of start and a store-release of the
clock; the C reference's (reference_c/protocol.h, mi_proto_forked_child) a seq_cst CAS
MOVING -> now. Until it creates a thread the child has one, so the two come to the same.

Threads (the sequentially consistent explorer's fork-2 and fork-3 in shape, proofs/explorer.py):
- `sweepers` sweepers of the parent loop over the advance and the sweep's epoch read
  (proofs.weak.protocol);
- the forking thread, which sweeps nothing (the advance does not fork inside itself), forks
  once, at any step: the child's memory is a copy (`memory.fork_copies`: per location a prefix
  of mo that holds the forker's view and is closed under happens-before, or with
  `Config.latest_copy` every write), no thread of the parent exists in the child (their
  registers are GONE), and the forker's view is the copy's; then, in the child, the forked-child
  rule (`model.epoch.mi_page_purge_holes_forked_child`, on the start the forker loads, at the
  time of the load: a mutant of the model's rule is what runs) and the store of what it gives,
  then it starts `child_sweepers` threads (pthread_create: each begins with the forker's view)
  and ends;
- the child's sweepers loop over the advance and the sweep's epoch read as the parent's did.

Properties (a violation stops the run with its timeline): those of proofs.weak.protocol over
both processes (EP-NO-SHORT-EPOCH: an increment in the child comes an interval after the
beginning, in the parent, of the epoch the copy holds; EP-MOVING-EXCL; EP-RECORDED-NOT-BEFORE-
REAL, also on the rule's store; EP-SEES-STARTED, also for a start the rule recorded), and
EP-MOVING-HELD: when the rule is done the child, where no thread is inside an advance, does not
hold MOVING (else every sweeper of the child waits on a move that never ends).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import model.epoch as ep
from model.epoch import MOVING
from proofs.weak import explorer as ex
from proofs.weak import memory as mm
from proofs.weak import protocol as P
from proofs.weak.memory import REL, RLX

# The forker's program counters (apart from the sweepers' P_*: EP-MOVING-EXCL counts those).
F_FORK, F_RULE_LOAD, F_RULE_STORE, F_SPAWN, F_DONE = range(100, 105)
GONE, UNBORN = 200, 201  # a parent's thread in the child; a child's thread before its creation


@dataclass(frozen=True)
class ForkOrderings:
    """The forked-child rule's accesses (the real code's: a relaxed load, a store-release)."""

    fork_load: str = RLX
    fork_store: str = REL


@dataclass(frozen=True)
class Config:
    name: str
    sweepers: int = 2
    child_sweepers: int = 1
    interval: int = 2
    clock_bound: int = 5
    spin_max: int = 1
    latest_copy: bool = False  # the copy holds every write made before the fork
    advance: P.Orderings = P.REFERENCE
    orderings: ForkOrderings = ForkOrderings()
    model: mm.MemoryModel = mm.RC11

    def describe(self) -> str:
        copy = "every write" if self.latest_copy else "a happens-before-closed prefix"
        return f"{self.sweepers} sweepers, a fork (the copy: {copy}), {self.child_sweepers} " \
               f"sweeper{'s' if self.child_sweepers != 1 else ''} in the child, interval " \
               f"{self.interval} ms, clock to {self.clock_bound} ms"


@dataclass
class Stats(P.Stats):
    forked_on_moving: bool = False  # a copy held MOVING (the case the rule is for)
    child_recorded: bool = False  # the rule stored a new beginning
    child_epochs: int = 0  # the greatest epoch a child's increment reached


def _regs(pc: int) -> tuple:
    return (pc,) + P.initial_regs(False)[1:]


def forker_program(cfg: Config, parents: tuple[int, ...], children: tuple[int, ...]):
    o = cfg.orderings

    def fork(T, mem, views, regs, t):
        for mem2, k in mm.fork_copies(mem, views[t][0], cfg.latest_copy):
            rel = tuple(tuple(min(v, e) for v, e in zip(r, k)) for r in views[t][2])
            # the parent's threads are gone; their views are the copy's (no one reads them:
            # it keeps the old messages collectable)
            views2 = tuple((k, k, rel) if i == t else (k, k, (k,) * len(k))
                           for i in range(len(views)))
            regs2 = tuple(_regs(GONE) if i in parents else _regs(F_RULE_LOAD) if i == t
                          else r for i, r in enumerate(regs))
            what = "fork: the child's copy holds " + ", ".join(
                f"{name} mo#{e} = {ex._v(loc[e][0])}"
                for name, loc, e in zip(P.LOCATIONS, mem2[0], k))
            yield what, mem2, views2, regs2

    def spawn(T, mem, views, regs, t):
        views2 = tuple(views[t] if i in children else v for i, v in enumerate(views))
        regs2 = tuple(P.initial_regs(False) if i in children else _regs(F_DONE) if i == t
                      else r for i, r in enumerate(regs))
        yield f"creates {len(children)} thread{'s' if len(children) != 1 else ''}", mem, \
            views2, regs2

    def on_rule(r, v, T):
        """The model's forked-child rule on the loaded start, at the time of the load."""
        st = ep.EpochState(start=v)
        ep.mi_page_purge_holes_forked_child(st, T)
        return P._set(r, pc=F_RULE_STORE, now=st.start) if st.start != v else \
            P._set(r, pc=F_SPAWN)

    def prog(r):
        pc = r[0]
        if pc == F_FORK:
            return ex.Process(fork, tag="fork")
        if pc == F_RULE_LOAD:
            return ex.Load(P.START, o.fork_load, on_rule, tag="fork_load", timed=True)
        if pc == F_RULE_STORE:  # a recorded beginning, judged as the advance's store is
            return ex.Store(P.START, r[2], o.fork_store, lambda r: P._set(r, pc=F_SPAWN),
                            tag="store_start")
        if pc == F_SPAWN:
            return ex.Process(spawn, tag="spawn")
        return None
    return prog


def sweeper_program(cfg: Config):
    prog = P.program(P.Config("sweeper", sweepers=1, interval=cfg.interval,
                              clock_bound=cfg.clock_bound, spin_max=cfg.spin_max,
                              observer=False, orderings=cfg.advance), owner=False)
    return lambda r: None if r[0] in (GONE, UNBORN) else prog(r)


def system(cfg: Config, stats: Stats | None = None, collect: bool = True) -> ex.System:
    stats = stats if stats is not None else Stats()
    adv = P.Config(cfg.name, sweepers=cfg.sweepers, interval=cfg.interval,
                   clock_bound=cfg.clock_bound, spin_max=cfg.spin_max, observer=False,
                   orderings=cfg.advance, model=cfg.model)
    base = P.system(adv, stats, collect)
    parents = tuple(range(cfg.sweepers))
    forker = cfg.sweepers
    children = tuple(range(forker + 1, forker + 1 + cfg.child_sweepers))
    sweeper = sweeper_program(cfg)
    threads = [("sweeper", sweeper, P.initial_regs(False)) for _ in parents]
    threads.append(("forker", forker_program(cfg, parents, children), _regs(F_FORK)))
    threads += [("child", sweeper, _regs(UNBORN)) for _ in children]

    def on_step(ghost, info, ns):
        tag, mem = info["tag"], ns[1]
        if tag == "fork":  # the child's history: the epochs up to the one its copy holds
            begins, started = ghost
            e = mm.latest(mem, P.EPOCH)
            ghost = (begins[:e + 1], tuple((s, k) for s, k in started if k <= e))
            stats.forked_on_moving |= mm.latest(mem, P.START) == MOVING
        elif tag == "store_start" and info["thread"] == forker:
            stats.child_recorded = True
        ghost, bad = base.on_step(ghost, info, ns)
        if tag == "spawn" and mm.latest(mem, P.START) == MOVING:
            bad = bad or f"EP-MOVING-HELD: the child holds MOVING in epoch " \
                         f"{mm.latest(mem, P.EPOCH)} after the forked-child rule, and no " \
                         f"thread of it is inside an advance"
        if info["thread"] in children and tag == "increment":
            stats.child_epochs = max(stats.child_epochs, info["value"] + 1)
        return ghost, bad

    symmetric = tuple(g for g in (parents, children) if len(g) > 1)
    return replace(base, threads=threads, symmetric=symmetric, on_step=on_step)


def check(cfg: Config, max_states: int | None = None) -> P.Result:
    stats = Stats()
    return P.Result(cfg, ex.explore(system(cfg, stats), max_states=max_states), stats)


def counterexample(cfg: Config) -> str | None:
    """The shortest violation's timeline (breadth first, old messages kept: the copy's mo
    indices are the parent's)."""
    return ex.counterexample(system(cfg, collect=False))


weaken = P.weaken_beside
