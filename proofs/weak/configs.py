"""The weak explorer's configurations, their manifest and the minimal-orderings analysis.

proofs/weak/manifest.json holds, per configuration, the states and transitions the weak
explorer found, the verdict (the first violation or "holds") and the greatest staleness of the
stamp and of the sweep's epoch read, written by `python -m proofs.weak.configs --write`; the
sequentially consistent explorer's counts stay in proofs/manifest.json.

`weakenings` explores every one-step weakening of every access of the advance (seq_cst to
acq_rel, acq_rel to acquire or release, acquire or release to relaxed) at WEAKEN_CONFIG, and
of the park handoff at PARK_WEAKEN_CONFIGS: either the first violation with its timeline, or
"holds weaker"; `weakest_holding` follows the weakenings down to the weakest ordering of each
access that still holds.
"""

from __future__ import annotations

import json
from pathlib import Path

from dataclasses import replace

from proofs.weak import fork as F
from proofs.weak import park as K
from proofs.weak import protocol as P
from proofs.weak.memory import ACQ, ACQ_REL, REL, RLX, SC

MANIFEST = Path(__file__).with_name("manifest.json")
# The one-step weakenings' verdicts and counts where they are too dear for the fast tests
# (`python -m proofs.weak.configs --weakenings weak-adv-3`): compared against a recomputation
# behind -m slow, and, within PREFIX_STATES states each, in the fast tier.
WEAKENINGS_RECORD = Path(__file__).with_name("weakenings.json")
PREFIX_STATES = 2_000

CONFIGS = {c.name: c for c in [
    # the advance with its sweep's epoch read: two and three sweepers
    P.Config("weak-adv-2", sweepers=2, observer=False),
    P.Config("weak-adv-3", sweepers=3, observer=False),
    # the seed's test (a): clock readings around the sweeps' epoch reads
    P.Config("weak-observe-2", sweepers=2),
    # the allocating owner's relaxed stamp, then its own sweep of its page (seed test (b))
    P.Config("weak-owner-1", sweepers=1, owner=True, observer=False),
    # the owner allocates only: how stale the relaxed stamp gets, by the length of the run
    P.Config("weak-stale-5", sweepers=1, owner=True, owner_sweeps=False, observer=False),
    P.Config("weak-stale-7", sweepers=1, owner=True, owner_sweeps=False, observer=False,
             clock_bound=7),
]}
# The park handoff (proofs/weak/park.py): the owner parks, comes back and parks again; the
# scavenger sweeps it (and moves the epoch itself). At the C reference's orderings; from the
# acquire/release baseline (every seq_cst access of the handoff made acquire or release: this
# model's seq_cst is stronger than RC11's, so the baseline's weakenings are the ones to trust);
# with one more sweeper moving the epoch (the relaxed stamp's finding, through the park).
PARK_PROGRAM = ("malloc", "free", "park", "unpark", "malloc", "free", "park")
PARK_ACQ_REL = replace(K.REFERENCE, **{a: ACQ if a in K.LOADS else REL
                                       for a, o in K.REFERENCE.items() if o == SC})
PARK_CONFIGS = {c.name: c for c in [
    K.Config("weak-park-2", program=PARK_PROGRAM, clock_bound=6),
    K.Config("weak-park-2-acqrel", program=PARK_PROGRAM, clock_bound=6,
             orderings=PARK_ACQ_REL),
    K.Config("weak-park-3", sweepers=1, program=PARK_PROGRAM, clock_bound=6),
]}
# A fork beside the advance (proofs/weak/fork.py): two sweepers of the parent, a thread that
# forks once, at any step, and a sweeper in the child. The copy the child gets: a prefix of
# each location's mo closed under happens-before, or every write (the strongest reading).
FORK_CONFIGS = {c.name: c for c in [
    F.Config("weak-fork-2"),
    F.Config("weak-fork-2-latest", latest_copy=True),
    # as many sweepers in the child as the sequentially consistent twin has (fork-2's moves)
    F.Config("weak-fork-2-child-2", child_sweepers=2),
]}
SLOW = ("weak-adv-3",)  # about 20 s: pinned by a test behind -m slow (and weak-fork-2-child-2)

WEAKEN_CONFIG = CONFIGS["weak-adv-2"]
# The accesses of the advance and its sweep's epoch read (the stamp is relaxed already).
ADVANCE_ACCESSES = ("load_start", "cas", "cas_fail", "fetch_add", "store_start", "spin_load",
                    "sweep_epoch")
# The handoff's accesses (proofs/weak/park.py), weakened at PARK_WEAKEN_CONFIGS: at the
# reference and from the acquire/release baseline.
PARK_ACCESSES = tuple(a for a, _ in K.REFERENCE.items())
PARK_WEAKEN_CONFIGS = ("weak-park-2", "weak-park-2-acqrel")
# The fork's accesses (proofs/weak/fork.py), weakened at weak-fork-2: the advance's and the
# forked-child rule's.
FORK_ACCESSES = ADVANCE_ACCESSES + tuple(F.ForkOrderings.__dataclass_fields__)
ONE_STEP_WEAKER = {SC: (ACQ_REL,), ACQ_REL: (ACQ, REL), ACQ: (RLX,), REL: (RLX,), RLX: ()}


# Weakenings applied to every configuration `engine_config` gives: per access, a function of
# the configuration's ordering to the one to run (as_is on the clean model). A weak mutant
# (purgecheck/mutants/catalogue/weak.py) replaces one entry for the length of its run.
def as_is(order: str) -> str:
    return order


WEAKENED: dict = {a: as_is for a in FORK_ACCESSES + ("stamp_load",) + PARK_ACCESSES}
# What the weak engine (purgecheck/engines/weak.py) runs: the configurations whose clean
# verdict is "holds", the advance's two and three sweepers and the park at the reference and
# from its acquire/release baseline.
ENGINE_CONFIGS = ("weak-adv-2", "weak-park-2", "weak-park-2-acqrel", "weak-fork-2")
ENGINE_CONFIGS_FULL = ENGINE_CONFIGS + ("weak-adv-3",)


def weakened() -> dict[str, object]:
    """The entries of WEAKENED a mutant replaced."""
    return {a: f for a, f in WEAKENED.items() if f is not as_is}


def config(name: str):
    return CONFIGS.get(name) or PARK_CONFIGS.get(name) or FORK_CONFIGS[name]


def engine_config(name: str):
    """Configuration `name` with the weakenings of WEAKENED applied."""
    cfg = config(name)
    for access, f in weakened().items():
        if has_access(cfg, access):
            cfg = checker(cfg).weaken(cfg, access, f(ordering_of(cfg, access)))
    return cfg


def checker(cfg):
    """The module that explores `cfg`: the advance (proofs.weak.protocol), the park or the
    fork."""
    return K if isinstance(cfg, K.Config) else F if isinstance(cfg, F.Config) else P


def has_access(cfg, access: str) -> bool:
    """Whether `cfg` has the access (the park and the fork have the advance's too)."""
    if access in P.Orderings.__dataclass_fields__:
        return True
    return not isinstance(cfg, P.Config) and access in type(cfg.orderings).__dataclass_fields__


def ordering_of(cfg, access: str) -> str:
    if not isinstance(cfg, P.Config) and access not in P.Orderings.__dataclass_fields__:
        return getattr(cfg.orderings, access)
    return getattr(cfg.orderings if isinstance(cfg, P.Config) else cfg.advance, access)


def check(name: str):
    cfg = config(name)
    return checker(cfg).check(cfg)


def verdict(res) -> str:
    return res.report.violation.split(":")[0] if res.report.violation else "holds"


def sc_twin(name: str):
    """The sequentially consistent explorer's configuration (proofs/explorer.py) of the same
    shape as weak configuration `name` (sweepers, interval, clock bound, the owner's park
    program), or None for the configurations it has no twin of (the observer, the owner that
    sweeps its own page)."""
    from proofs.explorer import Config

    cfg = config(name)
    if isinstance(cfg, F.Config):  # its fork fires only while a sweeper holds MOVING, and
        # the child keeps as many sweepers as the parent had
        return Config(f"sc {name}", sweepers=cfg.sweepers, interval=cfg.interval,
                      clock_bound=cfg.clock_bound, fork=True)
    if isinstance(cfg, K.Config):
        return Config(f"sc {name}", sweepers=cfg.sweepers, owner=True, parked=True,
                      interval=cfg.interval, clock_bound=cfg.clock_bound, program=cfg.program)
    if name.startswith("weak-adv"):
        return Config(f"sc {name}", sweepers=cfg.sweepers, interval=cfg.interval,
                      clock_bound=cfg.clock_bound)
    return None


def manifest_entry(res) -> dict:
    out = {"states": res.report.states, "transitions": res.report.transitions,
           "verdict": verdict(res), "describe": res.config.describe()}
    twin = sc_twin(res.config.name)
    if twin is not None:  # beside it, the sequentially consistent explorer's count
        from proofs.explorer import explore

        out["sc_states"] = explore(twin).states
    if isinstance(res.config, F.Config):
        return out | {"epochs": res.stats.epochs, "child_epochs": res.stats.child_epochs,
                      "forked_on_moving": res.stats.forked_on_moving,
                      "child_recorded": res.stats.child_recorded}
    if isinstance(res.config, K.Config):
        return out | {"park_sweeps": res.stats.park_sweeps, "purged": res.stats.purged,
                      "held": res.stats.held,
                      "unparked_after_sweep": res.stats.unparked_after_sweep}
    return out | {"max_stamp_staleness": res.stats.max_stamp_staleness,
                  "max_sweep_staleness": res.stats.max_sweep_staleness,
                  "epochs": res.stats.epochs}


def load_manifest() -> dict:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}


def weakenings(cfg=WEAKEN_CONFIG, accesses=ADVANCE_ACCESSES) -> list[dict]:
    """Each one-step weakening of each access, the others as in cfg: its verdict and, for a
    violation, the shortest counterexample's timeline."""
    mod = checker(cfg)
    rows = []
    for access in accesses:
        real = ordering_of(cfg, access)
        for weaker in ONE_STEP_WEAKER[real]:
            w = mod.weaken(cfg, access, weaker)
            res = mod.check(w)
            rows.append({"access": access, "from": real, "to": weaker, "verdict": verdict(res),
                         "violation": res.report.violation,
                         "timeline": mod.counterexample(w) if res.report.violation else None})
    return rows


def weakening_counts(cfg, accesses=ADVANCE_ACCESSES, max_states: int | None = None) -> list:
    """Each one-step weakening of each access, the others as in cfg: its verdict and its counts
    (the states and transitions to the first violation, or of the whole space; with
    `max_states`, of the depth-first search's first `max_states` states, which are the same on
    every run: the search's order is the model's)."""
    mod = checker(cfg)
    rows = []
    for access in accesses:
        real = ordering_of(cfg, access)
        for weaker in ONE_STEP_WEAKER[real]:
            res = mod.check(mod.weaken(cfg, access, weaker), max_states=max_states)
            rows.append({"access": access, "from": real, "to": weaker, "verdict": verdict(res),
                         "states": res.report.states, "transitions": res.report.transitions,
                         "complete": res.report.complete})
    return rows


def minimal_accesses(rows: list) -> set[str]:
    """The accesses whose ordering is minimal: every one-step weakening of it fails."""
    accesses = {r["access"] for r in rows}
    return accesses - {r["access"] for r in rows if r["verdict"] == "holds"}


def load_weakenings_record() -> dict:
    return json.loads(WEAKENINGS_RECORD.read_text()) if WEAKENINGS_RECORD.exists() else {}


def weakest_holding(cfg, access: str) -> tuple[list[str], dict | None]:
    """The weakest orderings of `access` that hold (following one-step weakenings from the
    real one, the others as in cfg), and the first failing weakening below them."""
    mod = checker(cfg)
    frontier, holding, failing = [ordering_of(cfg, access)], [], None
    while frontier:
        order = frontier.pop(0)
        below = []
        for weaker in ONE_STEP_WEAKER[order]:
            res = mod.check(mod.weaken(cfg, access, weaker))
            if res.ok:
                below.append(weaker)
            elif failing is None:
                failing = {"to": weaker, "violation": res.report.violation}
        if not below and order not in holding:
            holding.append(order)
        frontier += [b for b in below if b not in frontier]
    return holding, failing


if __name__ == "__main__":
    import sys
    import time

    names = [a for a in sys.argv[1:] if not a.startswith("-")] or \
        list(CONFIGS) + list(PARK_CONFIGS) + list(FORK_CONFIGS)
    data = load_manifest()
    for name in names if "--weakenings" not in sys.argv else ():
        t0 = time.perf_counter()
        res = check(name)
        data[name] = manifest_entry(res)
        print(name, res.report.figure(), verdict(res), f"{time.perf_counter() - t0:.1f}s",
              flush=True)
    if "--write" in sys.argv:
        MANIFEST.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    if "--weakenings" in sys.argv:  # record the names' weakenings (whole, and their prefixes)
        record = load_weakenings_record()
        for name in names:
            whole = weakening_counts(config(name))
            prefix = weakening_counts(config(name), max_states=PREFIX_STATES)
            for row, pre in zip(whole, prefix):
                row["prefix"] = {k: pre[k] for k in ("verdict", "states", "transitions")}
                print(name, row, flush=True)
            record[name] = whole
        WEAKENINGS_RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if "--orderings" in sys.argv:
        for a in ADVANCE_ACCESSES:
            print(a, getattr(WEAKEN_CONFIG.orderings, a), weakest_holding(WEAKEN_CONFIG, a))
        for name in PARK_WEAKEN_CONFIGS:
            for row in weakenings(PARK_CONFIGS[name], PARK_ACCESSES):
                print(name, row["access"], row["from"], "->", row["to"], row["verdict"])
