"""A Hypothesis state machine over the glibc model (seed 001): malloc, free and mallopt in
the main arena and in thread arenas, threads started and joined, every glibc-arena invariant
checked on every arena after every step.

Run it with `run_glibc_machine(...)`; the tests run it derandomized, and show that it finds a
mutant of the model (a chunk freed next to the top chunk left unmerged).
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, consumes, initialize,
                                 invariant, precondition, rule, run_state_machine_as_test)

from model.glibc.invariants import check_arena
from model.glibc.process import Process
from model.glibc.versions import VERSIONS
from model.invariants import load_registry

THREADS = (0, 1, 2, 3)  # 0 is the main thread
SIZES = st.one_of(
    st.sampled_from([0, 24, 100, 1000, 1500, 5000, 70000, 131072, 140000, 200000, 400000]),
    st.integers(0, 300_000))
MALLOPT = st.one_of(
    st.tuples(st.just("trim_threshold"), st.sampled_from([0, 4096, 131072, 1 << 20])),
    st.tuples(st.just("top_pad"), st.sampled_from([0, 4096, 131072])),
    st.tuples(st.just("mmap_threshold"), st.sampled_from([4096, 131072, 1 << 20, 1 << 25])),
    st.tuples(st.just("mmap_max"), st.sampled_from([0, 65536])))


class GlibcMachine(RuleBasedStateMachine):
    blocks = Bundle("blocks")

    def __init__(self) -> None:
        super().__init__()
        self.registry = load_registry()
        self.p: Process | None = None
        self.next_id = 0
        self.steps = 0

    @initialize(version=st.sampled_from(list(VERSIONS)))
    def make_process(self, version: str) -> None:
        self.p = Process(VERSIONS[version])

    def running(self, tid: int) -> bool:
        return tid in self.p.threads

    @rule(tid=st.sampled_from(THREADS[1:]))
    def start(self, tid: int) -> None:
        if not self.running(tid):
            self.p.start(tid)

    @rule(tid=st.sampled_from(THREADS[1:]))
    def join(self, tid: int) -> None:
        if self.running(tid):
            self.p.join(tid)

    @rule(target=blocks, tid=st.sampled_from(THREADS), size=SIZES)
    def malloc(self, tid: int, size: int) -> int:
        self.steps += 1
        if not self.running(tid):
            tid = 0
        self.next_id += 1
        self.p.malloc(tid, self.next_id, size)
        return self.next_id

    @rule(block=consumes(blocks), tid=st.sampled_from(THREADS))
    def free(self, block: int, tid: int) -> None:
        self.p.free(tid if self.running(tid) else 0, block)

    @precondition(lambda self: self.p is not None)
    @rule(setting=MALLOPT)
    def mallopt(self, setting: tuple[str, int]) -> None:
        self.p.mallopt(0, *setting)

    @invariant()
    def arenas_hold(self) -> None:
        if self.p is None:
            return
        for av in self.p.arenas:
            failures = check_arena(av, self.registry)
            assert not failures, f"{failures[0][0]}: {failures[0][1]}"


def run_glibc_machine(max_examples: int = 25, steps: int = 40, shrink: bool = True) -> None:
    """Run the machine derandomized (the same examples every time), no example database.
    `shrink=False` reports the first failing example as found (faster, longer)."""
    phases = list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate]
    run_state_machine_as_test(GlibcMachine, settings=settings(
        max_examples=max_examples, stateful_step_count=steps, derandomize=True, database=None,
        deadline=None, phases=phases, suppress_health_check=list(HealthCheck)))


TestGlibcMachine = GlibcMachine.TestCase
