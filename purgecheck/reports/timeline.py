"""The timeline of one scenario run: after each op, what the sweeps did to memory.

A step records the virtual time, the epoch, the bytes discarded and the blocks refaulted by
the op, the resident bytes after it, the allocating side's clock reads, and the invariants
that first failed there. The design pages, the timeline plots and the mutants report all
read runs through this module, so the same scenario means the same rows everywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from model.invariants import HeldPages, check_world, load_registry
from purgecheck.runner import run_ops
from purgecheck.scenarios import Scenario

ALLOCATING_OPS = ("malloc", "zalloc", "realloc")
SWEEP_EVENTS = ("idle", "park_sweep")


@dataclass
class Step:
    line: int
    op: str  # the op as written in the script
    op_name: str
    now: int  # virtual ms after the op
    epoch: int
    discarded: int = 0  # bytes this op discarded (successful discards)
    refaulted: int = 0  # blocks this op took back from discarded units (each a page fault)
    resident: int = 0  # resident bytes of the process after the op
    sweeps: int = 0  # sweeps (inline idle or a park's handoff) this op ran
    held: int = 0  # pages a sweep of this op held back
    alloc_clock_reads: int = 0  # clock reads by the allocating side during this op
    violations: list[tuple[str, str]] = field(default_factory=list)  # first failures here


@dataclass
class Timeline:
    scenario: str
    variant: str
    steps: list[Step]
    end_violations: list[tuple[str, str]]  # liveness invariants judged at the end

    @property
    def discarded(self) -> int:
        return sum(s.discarded for s in self.steps)

    @property
    def refaulted(self) -> int:
        return sum(s.refaulted for s in self.steps)

    @property
    def discard_ops(self) -> int:
        return sum(1 for s in self.steps if s.discarded)

    @property
    def alloc_clock_reads(self) -> int:
        return sum(s.alloc_clock_reads for s in self.steps)

    @property
    def sweeps(self) -> int:
        return sum(s.sweeps for s in self.steps)

    def first_violation(self, invariant: str | None = None) -> tuple[int, str, str] | None:
        """(step index, invariant, reason) of the first failure (of `invariant` if given)."""
        for n, s in enumerate(self.steps):
            for inv, reason in s.violations:
                if invariant in (None, inv):
                    return n, inv, reason
        return None

    def violated(self) -> set[str]:
        return {inv for s in self.steps for inv, _ in s.violations} | \
            {inv for inv, _ in self.end_violations}


def run_timeline(sc: Scenario, variant: str | None = None) -> Timeline:
    """Run scenario `sc` (under `variant`, default its own options) and record every op."""
    options = sc.options if variant is None else dataclasses.replace(sc.options, variant=variant)
    steps: list[Step] = []
    seen_log = 0
    seen: set[str] = set()
    reads_before = 0
    held = HeldPages()  # the pages judged already (model.invariants.check_world)

    def after(op, world) -> None:
        nonlocal seen_log, reads_before
        new = world.log[seen_log:]
        seen_log = len(world.log)
        step = Step(op.line, op.render(), op.name, world.clock.now, world.epoch.epoch)
        for ev in new:
            kind = ev["ev"]
            if kind in ("discard", "discard_tail") and ev.get("ok"):
                step.discarded += ev["size"]
            elif kind == "unpurge" and ev.get("reuse"):
                step.refaulted += ev["blocks"]
            elif kind in SWEEP_EVENTS and (kind == "park_sweep" or not ev.get("handoff")):
                step.sweeps += 1  # a park sweep logs an idle (handoff) too: count it once
            elif kind == "sweep_page" and ev.get("outcome") == "held":
                step.held += 1
        if op.name in ALLOCATING_OPS:
            step.alloc_clock_reads = world.clock.reads - reads_before
        reads_before = world.clock.reads
        step.resident = len(world.mem.resident) * world.mem.os_page_size
        for inv, reason in check_world(world, held):
            if inv not in seen:
                seen.add(inv)
                step.violations.append((inv, reason))
        steps.append(step)

    run = run_ops(sc.ops(), options, after_step=after, source=f"scenario:{sc.name}")
    end: list[tuple[str, str]] = []
    if "liveness" in sc.tags:
        for inv in load_registry().values():
            if inv.predicate is not None and inv.scope == "final":
                reason = inv.predicate(run.world)
                if reason:
                    end.append((inv.id, reason))
    return Timeline(sc.name, options.variant, steps, end)


def window_around(tl: Timeline, index: int, before: int = 8, after: int = 2) -> tuple[int, int]:
    """The steps to show around step `index`: the ops that led to it, and what followed."""
    return max(0, index - before), min(len(tl.steps), index + after + 1)
