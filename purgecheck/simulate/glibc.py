"""Seed 001's workloads on the glibc model of each version: what each trim rule costs.

The program's calls go to the model's own process (model/glibc/process.py: malloc, free,
use of a block, start and join of a thread); its system calls are counted by category
(model/glibc/syscalls.py) and the resident pages are the model's own ghost state
(model/glibc/resident.py: written pages are resident, madvise, shrink_heap, brk and munmap
drop them). Time is virtual: each thread has a clock that its own work moves on (the
workload's user time per record) and so does the kernel's work the model predicts (a cost
per call that gives memory back, per page fault, per other call; `COST_DEFAULTS`), so that
madvise calls per second and records per second are the model's figures, not the machine's.
Seed 001: "madvise() is not a cheap operation and if it is immediately followed by a malloc
and a refault then there is a lot of system overhead."

Workloads (`WORKLOADS`): `bench-free`, the seed's test case, wraps the op script of
purgecheck/glibc/workloads.py; `ebizzy`, threads that each allocate a large record, use it
and free it until their time is up. `simulate_glibc` runs one on every version;
`claim_figures` computes the figures of seed 001's claims (purgecheck/simulate/claims.py
judges them).
"""

from __future__ import annotations

import heapq
import inspect
from dataclasses import dataclass
from operator import attrgetter
from typing import Callable, Iterable, Iterator, NamedTuple

from model.glibc.constants import PAGESIZE
from model.glibc.malloc import OutOfMemory
from model.glibc.process import Process, ScriptError
from model.glibc.resident import PAGE_SHIFT
from model.glibc.versions import VERSIONS
from purgecheck.formats.glibc_ops import GlibcOp, expand, parse_script
from purgecheck.glibc import workloads as glibc_workloads
from purgecheck.simulate.result import DesignRun, Sample

KiB = 1024
ALLOCATING = frozenset({"malloc", "calloc", "memalign", "valloc", "pvalloc"})
_ADDR = attrgetter("addr")
MAX_SAMPLES = 4000  # the series of a run is thinned past this many samples

# The calls that give memory back (page-table teardown and a TLB flush each, seed 001) and
# the table's columns. `madvise` counts every madvise call, shrink_heap's and a thread
# stack's at its exit: strace counts both, and so does the seed's "1024 calls to madvise".
RELEASES = frozenset({"heap_madvise", "stack_madvise", "heap_remap", "brk_shrink",
                      "chunk_munmap", "heap_delete", "stack_munmap"})
MMAP = ("chunk_mmap", "heap_new", "heap_remap", "stack_mmap")
MUNMAP = ("chunk_munmap", "heap_delete", "stack_munmap")

# What the kernel's side costs in virtual time. The release cost is the digest's measurement
# (docs/glibc.md, glibc 2.36 on this project's machine): bench-free with fixed thresholds
# spent 5.7 s in the kernel for 200,000 iterations, each one madvise of the heap's tail and
# one refaulted page, 28.5 us an iteration. A minor fault with a zeroed 4 KiB page is taken
# as half a microsecond; other calls (mmap, mprotect, brk up) as much.
COST_DEFAULTS = {"release_us": 28.0, "fault_us": 0.5, "syscall_us": 0.5}


class Step(NamedTuple):
    """One thing a thread does: malloc (then the program writes `touch` bytes of the block),
    free, mallopt (block: the parameter, size: the value), start, join. `user_us` is the
    program's own time after it (seed 001's do_stuff); `at_ms`, when set, is when the step
    happens at the earliest (a trace's timestamp)."""

    thread: int
    op: str
    block: object = 0
    size: int = 0
    touch: int = 0
    user_us: float = 0.0
    at_ms: float | None = None


# A lane is what one clock runs: a function of `now()` (the lane's clock, ms) giving steps.
Lane = Callable[[Callable[[], float]], Iterator[Step]]


@dataclass(frozen=True)
class Costs:
    """The kernel's side in virtual time, us: a call that gives memory back, a page written
    while not resident, any other call (the workload parameters of the same names)."""

    release_us: float = COST_DEFAULTS["release_us"]
    fault_us: float = COST_DEFAULTS["fault_us"]
    syscall_us: float = COST_DEFAULTS["syscall_us"]


# -- the workloads -----------------------------------------------------------------------------

def script_lane(script: str, touch: int = 0, user_us: float = 0.0) -> Lane:
    """An op script (docs/glibc.md) run in its own order on one clock, as the driver runs it;
    after each malloc the program writes `touch` bytes of the block and spends `user_us`."""
    ops = parse_script(script, "<workload>")
    steps: dict[int, Step] = {}  # each line's step, made once however often it repeats
    for op in ops:
        if op.name == "malloc":
            steps[id(op)] = Step(op.thread, "malloc", op.args[0], op.args[1], touch, user_us)
        elif op.name == "free":
            steps[id(op)] = Step(op.thread, "free", op.args[0])
        elif op.name == "mallopt":
            steps[id(op)] = Step(op.thread, "mallopt", op.args[0], op.args[1])
        elif op.name in ("start", "join"):
            steps[id(op)] = Step(op.thread, op.name)

    def lane(now: Callable[[], float]) -> Iterator[Step]:
        for op in expand(ops):
            step = steps.get(id(op))
            if step is not None:
                yield step
    return lane


def bench_free(num: int = 1024, pages: int = 48, thread: int = 1, loop_ms: float = 0.0012,
               touch_pages: int = 0) -> list[Lane]:
    """Seed 001's bench-free: `for (i = num; i--;) { m = malloc (48*4096); dostuff (m);
    free (m); }` in a worker thread (`thread` 0: in the main thread), the op script of
    purgecheck/glibc/workloads.py. The seed's dostuff is empty: the block is not written
    (`touch_pages` writes that many of its pages). `loop_ms` is the user time of one
    iteration: the digest's 0.24 s for 200,000 iterations on glibc 2.36 without madvise."""
    script = glibc_workloads.bench_free(pages, thread)(num)
    return [script_lane(script, touch_pages * PAGESIZE, loop_ms * 1000)]


def ebizzy(threads: int = 1, seconds: float = 1.0, record: int = 256 * KiB,
           record_ms: float = 0.023, grow: int = 0) -> list[Lane]:
    """An ebizzy-like loop (seed 001: "threaded with a large working set that at its core has
    an allocation, do_stuff, free loop"): each of `threads` workers allocates a `record`-byte
    buffer, fills it, spends `record_ms` of its own time on it and frees it, until its clock
    reaches `seconds` (the seed ran 30 s). `record_ms` defaults to the seed's user time per
    record with the patch (29.96 s for 1,298,133 records; 2.21: 7.47 s for 306,904, 24 us);
    the seed gives no record size: 256 KiB is above the first mmap threshold, as a large
    record is. With `grow`, each record is that many bytes larger than the one before (a
    buffer that grows: the heap grows between shrinks, what the RFC's ratio weighs; give it
    a fixed mmap_threshold, or every record is mmapped)."""
    end_ms = seconds * 1000

    def worker(th: int) -> Lane:
        def lane(now: Callable[[], float]) -> Iterator[Step]:
            take = Step(th, "malloc", th, record, record, record_ms * 1000)
            give = Step(th, "free", th)
            yield Step(th, "start")
            while now() < end_ms:
                yield take
                yield give
                if grow:
                    size = take.size + grow
                    take = Step(th, "malloc", th, size, size, record_ms * 1000)
            yield Step(th, "join")
        return lane
    return [worker(th) for th in range(1, threads + 1)]


@dataclass(frozen=True)
class GlibcWorkload:
    build: Callable[..., list[Lane]]
    description: str
    tiny: dict  # the parameters of make bench's tiny size
    sample_ms: float  # default sampling of resident memory
    idle_ms: float  # default idle after the load


WORKLOADS: dict[str, GlibcWorkload] = {
    "bench-free": GlibcWorkload(
        bench_free, "seed 001's bench-free: free(malloc(48 pages)) 1024 times in a worker "
                    "thread (the block not written)", {"num": 64}, 0.1, 5.0),
    "ebizzy": GlibcWorkload(
        ebizzy, "an ebizzy-like loop: each worker allocates a 256 KiB record, fills it, works "
                "23 us of its own on it, frees it, for 1 s", {"seconds": 0.05}, 5.0, 100.0),
}

# The parameters every workload takes: fixed thresholds (glibc's MALLOC_*_ variables; -1:
# glibc's default, with the dynamic threshold) and the kernel's costs.
SETTINGS = ("mmap_threshold", "trim_threshold", "top_pad")
RANGES = {  # name: (lowest, highest, integer)
    "num": (0, 10**8, True), "pages": (1, 262_144, True), "thread": (0, 7, True),
    "loop_ms": (0, 1e6, False), "touch_pages": (0, 262_144, True),
    "threads": (1, 7, True), "seconds": (0, 36_000, False), "record": (1, 1 << 30, True),
    "record_ms": (0.0001, 1e6, False), "grow": (0, 1 << 20, True),
    "mmap_threshold": (-1, 2**31 - 1, True), "trim_threshold": (-1, 2**31 - 1, True),
    "top_pad": (-1, 2**31 - 1, True),
    "release_us": (0, 1e6, False), "fault_us": (0, 1e6, False), "syscall_us": (0, 1e6, False),
}


def workload_descriptions() -> dict[str, str]:
    return {name: w.description for name, w in WORKLOADS.items()}


def version_names() -> list[str]:
    return list(VERSIONS)


def bench_params(name: str, tiny: bool) -> dict:
    return dict(WORKLOADS[name].tiny) if tiny else {}


def workload_parameters(name: str) -> dict:
    """Every parameter of a workload with its default."""
    sig = inspect.signature(WORKLOADS[name].build)
    out = {k: p.default for k, p in sig.parameters.items()}
    out.update({k: -1 for k in SETTINGS})
    out.update(COST_DEFAULTS)
    return out


def _check(name: str, params: dict) -> dict:
    known = workload_parameters(name)
    for k, v in params.items():
        if k not in known:
            raise ValueError(f"workload {name} has no parameter {k!r}; it has "
                             f"{', '.join(known)}")
        lo, hi, integer = RANGES[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                (integer and not isinstance(v, int)) or v != v:
            kind = "an integer" if integer else "a number"
            raise ValueError(f"workload {name}: {k} must be {kind} in {lo:g}..{hi:g}, "
                             f"found {v!r}")
        if not lo <= v <= hi:
            raise ValueError(f"workload {name}: {k} must be in {lo:g}..{hi:g}, found {v!r}")
    p = {**known, **params}
    if "record_ms" in p:  # ebizzy: a record every record_ms (at least) of each thread's clock
        records = p["seconds"] * 1000 / p["record_ms"]
        if records * p["threads"] > RANGES["num"][1]:
            raise ValueError(f"workload {name}: seconds / record_ms x threads is "
                             f"{records * p['threads']:,.0f} records, more than "
                             f"{RANGES['num'][1]:,}")
        if p["record"] + records * p["grow"] > RANGES["record"][1]:
            raise ValueError(f"workload {name}: with grow {p['grow']} the last record would "
                             f"be {p['record'] + records * p['grow']:,.0f} bytes, more than "
                             f"{RANGES['record'][1]:,}")
    return params


def _check_versions(versions: Iterable[str] | None) -> list[str]:
    versions = list(versions or VERSIONS)
    for v in versions:
        if v not in VERSIONS:
            raise ValueError(f"--version: unknown glibc version {v!r}; expected one of "
                             f"{', '.join(VERSIONS)}")
    return versions


# -- the simulation ----------------------------------------------------------------------------

class GlibcSimulation:
    """The glibc model of one version, its threads' clocks, and what it costs.

    Only counters and the samples are kept: the process's call log and trim records are
    read and cleared after every step, so memory does not grow with the workload."""

    def __init__(self, version: str, costs: Costs = Costs(), settings: dict | None = None,
                 sample_ms: float = 10.0) -> None:
        self.p = Process(VERSIONS[version], dict(settings or {}))
        self.version = version
        self.costs = costs
        self.sample_ms = sample_ms
        self.counts: dict[str, int] = {}
        self.madvise = 0
        self.madvised_bytes = 0
        self.allocations = 0
        self.user_us = 0.0
        self.sys_us = 0.0
        self.samples: list[Sample] = []
        self.next_sample = 0.0
        self.t = 0.0  # the start of the step being run: never goes back
        self.rss_area = 0.0  # resident bytes x ms, for the mean
        self.last_alloc_ms = 0.0
        self.at_last_alloc = (0, 0, 0)  # resident bytes, madvise calls, bytes, then
        self.end_ms = 0.0
        self.rss_peak_pages = 0

    # -- what it costs ----------------------------------------------------------------------

    def live_resident_bytes(self) -> int:
        """Resident bytes of the pages holding the program's live blocks: the blocks in address
        order (live chunks do not overlap), their pages merged into runs, each run counted once.
        The loop reads the chunks' fields itself: at each sample it visits every live block
        (issue 29, 4: per-block tuples and the `end` property were most of a sample)."""
        res = self.p.resident
        total, lo, hi = 0, 0, -1
        for c in sorted(self.p.blocks.values(), key=_ADDR):
            a = c.addr >> PAGE_SHIFT
            b = -(-(c.addr + c.size) >> PAGE_SHIFT)  # the page past the last byte
            if a <= hi:
                if b > hi:
                    hi = b
                continue
            if hi > lo:
                total += res.resident_in_pages(lo, hi)
            lo, hi = a, b
        if hi > lo:
            total += res.resident_in_pages(lo, hi)
        return total * PAGESIZE

    def sample(self, t: float) -> None:
        rss = self.p.resident.resident_bytes
        self.samples.append(Sample(t, rss, rss - self.live_resident_bytes(), self.madvise,
                                   self.madvised_bytes))

    def advance_to(self, t: float) -> None:
        """Virtual time moves on to `t`: the samples due on the way, the mean's area. Past
        MAX_SAMPLES every other sample goes and the interval doubles: a long run keeps a
        series of bounded size."""
        if t <= self.t:
            return
        while self.next_sample <= t:
            self.sample(self.next_sample)
            self.next_sample += self.sample_ms
            if len(self.samples) > MAX_SAMPLES:
                self.samples = self.samples[::2]
                self.sample_ms *= 2
                self.next_sample = self.samples[-1].t_ms + self.sample_ms
        self.rss_area += self.p.resident.resident_bytes * (t - self.t)
        self.t = t

    def step(self, s: Step) -> float:
        """Run one step at self.t; returns the virtual time it took, in us."""
        p = self.p
        res = p.resident
        faults = res.faults
        op = s.op
        if op == "free":
            p.free(s.thread, s.block)
            for av in p.arenas:  # the trim records of the free: the simulator keeps none
                if av.trims:
                    av.trims.clear()
        elif op == "malloc":
            p.malloc(s.thread, s.block, s.size)
            if s.touch:
                p.use(s.block, s.touch)
            self.allocations += 1
            self.last_alloc_ms = self.t
        elif op == "start":
            p.start(s.thread)
        elif op == "join":
            p.join(s.thread)
        elif op == "mallopt":
            p.mallopt(s.thread, s.block, s.size)
        else:
            raise ValueError(f"unknown step {op!r}")
        sys_us = self._account(faults)
        if op == "join":
            for av in p.arenas:  # the exiting thread's tcache was freed
                av.trims.clear()
        elif op == "malloc":
            self.at_last_alloc = (res.resident_bytes, self.madvise, self.madvised_bytes)
        self.user_us += s.user_us
        self.sys_us += sys_us
        return s.user_us + sys_us

    def _account(self, faults: int) -> float:
        """The system calls the last step made, counted (and cleared from the process: the
        simulator keeps counters only), and what they and its page faults cost, us."""
        p, costs = self.p, self.costs
        sys_us = (p.resident.faults - faults) * costs.fault_us
        calls = p.calls
        if calls:
            counts = self.counts
            for c in calls:
                cat = c.category
                counts[cat] = counts.get(cat, 0) + 1
                if c.name == "madvise":
                    self.madvise += 1
                    self.madvised_bytes += c.length
                sys_us += costs.release_us if cat in RELEASES else costs.syscall_us
            calls.clear()
        if p.resident.pages > self.rss_peak_pages:
            self.rss_peak_pages = p.resident.pages
        return sys_us

    def run_ops(self, timed_ops: Iterable[tuple[float, GlibcOp]], idle_ms: float) -> None:
        """A program's ops (purgecheck/simulate/program.py) at their own times, on the
        process's own methods, the ones `purgecheck replay` calls for the same ops; the
        program writes every block it allocates. Then `idle_ms` in which nothing runs."""
        from purgecheck.glibc.modelrun import handlers
        p = self.p
        do = handlers(p)
        self.sample(0.0)
        self.next_sample = self.sample_ms
        op = None
        try:
            for t, op in timed_ops:
                name = op.name
                if name == "loop":
                    continue
                if t > self.t:
                    self.advance_to(t)
                faults = p.resident.faults
                do[name](op.thread, *op.args)
                if name in ALLOCATING or (name == "realloc" and op.args[1]):
                    p.use(op.args[0], op.args[-1])
                    self.allocations += 1
                    self.last_alloc_ms = self.t
                self._account(faults)
                for av in p.arenas:  # the trim records: the simulator keeps none
                    if av.trims:
                        av.trims.clear()
                if name in ALLOCATING:
                    self.at_last_alloc = (p.resident.resident_bytes, self.madvise,
                                          self.madvised_bytes)
        except (ScriptError, OutOfMemory) as e:
            raise ValueError(f"record {op.line}: the glibc model cannot run `{op.render()}`: "
                             f"{e}") from None
        self.end_ms = self.t
        load_area = self.rss_area
        self.advance_to(self.end_ms + idle_ms)
        self.sample(self.t)
        self.rss_mean = load_area / self.end_ms if self.end_ms else \
            float(p.resident.resident_bytes)

    def run(self, lanes: list[Lane], idle_ms: float) -> None:
        """Each lane on its own clock; the lane whose clock is earliest goes next, so steps
        start in time order. Then `idle_ms` in which nothing runs (glibc trims only in free)."""
        self.sample(0.0)
        self.next_sample = self.sample_ms
        try:
            if len(lanes) == 1:
                clocks = [self._run_one(lanes[0])]
            else:
                clocks = self._run_lanes(lanes)
        except (ScriptError, OutOfMemory) as e:
            raise ValueError(f"the glibc model could not run the workload: {e}") from None
        self.end_ms = max([self.t, *clocks])
        self.advance_to(self.end_ms)
        running = sorted(t for t in self.p.threads if t)
        if running:
            raise ValueError(f"thread {running[0]} is still running at the end: join it")
        load_area = self.rss_area
        self.advance_to(self.end_ms + idle_ms)
        self.sample(self.t)
        self.rss_mean = load_area / self.end_ms if self.end_ms else \
            float(self.p.resident.resident_bytes)

    def _run_one(self, lane: Lane) -> float:
        clock = [0.0]
        step, advance_to = self.step, self.advance_to
        t = 0.0
        for s in lane(lambda: clock[0]):
            if s.at_ms is not None and s.at_ms > t:
                t = s.at_ms
            advance_to(t)
            t += step(s) / 1000
            clock[0] = t
        return t

    def _run_lanes(self, lanes: list[Lane]) -> list[float]:
        clocks = [0.0] * len(lanes)
        iters = [lane(lambda i=i: clocks[i]) for i, lane in enumerate(lanes)]
        ready = [(0.0, i) for i in range(len(lanes))]
        heapq.heapify(ready)
        while ready:
            t, i = ready[0]
            s = next(iters[i], None)
            if s is None:
                heapq.heappop(ready)
                continue
            if s.at_ms is not None and s.at_ms > t:
                t = s.at_ms
            self.advance_to(t)
            clocks[i] = t + self.step(s) / 1000
            heapq.heapreplace(ready, (clocks[i], i))
        return clocks

    def counters(self) -> dict[str, float]:
        k = self.counts.get
        res = self.p.resident
        seconds = self.end_ms / 1000
        rss_alloc, madvise_alloc, bytes_alloc = self.at_last_alloc
        last = self.samples[-1]
        return {
            "allocations": self.allocations,
            "madvise": self.madvise,
            "heap_madvise": k("heap_madvise", 0),
            "madvise_per_s": self.madvise / seconds if seconds else 0.0,
            "records_per_s": self.allocations / seconds if seconds else 0.0,
            "brk_grow": k("brk_grow", 0),
            "brk_shrink": k("brk_shrink", 0),
            "mmap": sum(k(c, 0) for c in MMAP),
            "munmap": sum(k(c, 0) for c in MUNMAP),
            "discards_load": madvise_alloc,
            "discarded_bytes_load": bytes_alloc,
            "discards_idle": self.madvise - madvise_alloc,
            "discarded_bytes_idle": self.madvised_bytes - bytes_alloc,
            "page_faults": res.faults,
            "refaults": res.refaults,
            "refaults_per_1k_allocs": 1000 * res.refaults / max(1, self.allocations),
            "rss_load_end": rss_alloc,
            "rss_mean": self.rss_mean,
            "rss_end": last.resident,
            "free_resident_end": last.free_resident,
            "user_ms": self.user_us / 1000,
            "sys_ms": self.sys_us / 1000,
            "discards": sum(k(c, 0) for c in RELEASES),  # calls that give memory back
            "discarded_bytes": res.dropped * PAGESIZE,
            "rss_peak": self.rss_peak_pages * PAGESIZE,
            "rss_mb_s": self.rss_area / 1000 / (1 << 20),
        }

    def design_run(self, workload: str) -> DesignRun:
        return DesignRun(workload, "glibc", self.version, self.counters(), self.samples,
                         load_end_ms=self.last_alloc_ms, end_ms=self.t,
                         syscalls=dict(sorted(self.counts.items())))


def _settings(params: dict) -> dict[str, int]:
    """Takes the fixed thresholds out of `params`: the process's settings (as MALLOC_*_)."""
    picked = {k: params.pop(k) for k in SETTINGS if k in params}
    return {k: v for k, v in picked.items() if v != -1}


def simulate_glibc(workload: str, versions: list[str] | None = None,
                   idle_ms: float | None = None, sample_ms: float | None = None,
                   **params) -> list[DesignRun]:
    """Run a named glibc workload on the model of each version (all of VERSIONS by default);
    one DesignRun per version. Raises ValueError with a one-line reason on a bad name,
    version or parameter."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown glibc workload {workload!r}; expected one of "
                         f"{', '.join(WORKLOADS)}")
    w = WORKLOADS[workload]
    if sample_ms is not None and not 0 < sample_ms <= 1e9:
        raise ValueError(f"sample_ms: expected a positive number of ms, found {sample_ms:g}")
    if idle_ms is not None and not 0 <= idle_ms <= 1e9:
        raise ValueError(f"idle_ms: expected a number of ms >= 0, found {idle_ms:g}")
    params = dict(_check(workload, params))
    versions = _check_versions(versions)
    settings = _settings(params)
    costs = Costs(**{k: params.pop(k) for k in COST_DEFAULTS if k in params})
    out = []
    for version in versions:
        sim = GlibcSimulation(version, costs, settings,
                              w.sample_ms if sample_ms is None else sample_ms)
        sim.run(w.build(**params), w.idle_ms if idle_ms is None else idle_ms)
        out.append(sim.design_run(workload))
    return out


# -- a mimalloc workload or a trace on glibc -----------------------------------------------------

def simulate_calls(name: str, calls, versions: list[str] | None = None,
                   idle_ms: float = 100.0, sample_ms: float = 10.0) -> list[DesignRun]:
    """A mimalloc workload's calls (a list) on the glibc model of each version: its first
    thread is glibc's main thread, every other one is started at its first call and joined
    after its last (purgecheck/simulate/program.py); the calls' times are the program's."""
    from purgecheck.simulate.program import ops_of_calls
    calls = list(calls)
    return simulate_ops(name, lambda: ops_of_calls(calls), versions, idle_ms, sample_ms)


def simulate_ops(name: str, timed_ops: Callable[[], Iterable[tuple[float, GlibcOp]]],
                 versions: list[str] | None = None, idle_ms: float = 100.0,
                 sample_ms: float = 10.0) -> list[DesignRun]:
    """A program's timed ops (a fresh stream from `timed_ops()` for each version) on the
    glibc model of each version, with no cost added to the program's own times."""
    versions = _check_versions(versions)
    out = []
    for version in versions:
        sim = GlibcSimulation(version, Costs(0.0, 0.0, 0.0), None, sample_ms)
        sim.run_ops(timed_ops(), idle_ms)
        out.append(sim.design_run(name))
    return out


# -- the figures of seed 001's claims, computed now ------------------------------------------------

# The runs the claims read. The seed ran ebizzy for 30 s; the model's rates are steady after
# its first records, so the claims run a second of it (scale 1) and carry the RFC's calls over
# to the seed's 30 s only when they stopped in the first half of the run.
CLAIM_EBIZZY_S = 1.0
CLAIM_THREADS_S = 0.2
SEED_RUN_S = 30.0


def _last_call_ms(run: DesignRun) -> float:
    """When the madvise count reached its value at the last allocation (from the samples)."""
    target = run.counters["discards_load"]
    return next((s.t_ms for s in run.samples if s.discards >= target), run.load_end_ms)


def claim_figures(scale: float = 1.0) -> dict[str, dict]:
    """The model's figures that seed 001's claims read, as numbers ({run: {figure: value}});
    `purgecheck.simulate.claims` sets them beside the seed's and judges them. `scale`
    shortens the ebizzy runs (the tests run them small)."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale: expected a number in (0, 1], found {scale:g}")
    bench = {r.design: r.counters for r in simulate_glibc("bench-free")}
    seconds = CLAIM_EBIZZY_S * scale
    runs = {r.design: r for r in simulate_glibc("ebizzy", ["2.21", "rfc-2015", "2.23+"],
                                                seconds=seconds)}
    eb = {v: dict(r.counters) for v, r in runs.items()}
    rfc_run = runs["rfc-2015"]
    quiet_after = _last_call_ms(rfc_run)
    # the RFC's calls in the seed's 30 s: as many as in this run when they stopped in its
    # first half (the rest of the run is steady), else at this run's rate
    steady = quiet_after <= rfc_run.load_end_ms / 2
    eb["rfc-2015"]["madvise_quiet_after_ms"] = quiet_after
    eb["rfc-2015"]["madvise_in_seed_run"] = (eb["rfc-2015"]["madvise"] if steady else
                                             eb["rfc-2015"]["madvise"] * SEED_RUN_S / seconds)
    threads = {1: (eb["2.21"]["records_per_s"], eb["rfc-2015"]["records_per_s"])}
    for n in (2, 4):  # 8 workers and the main arena are more than the model's 8 arenas
        got = {r.design: r.counters["records_per_s"] for r in
               simulate_glibc("ebizzy", ["2.21", "rfc-2015"], threads=n,
                              seconds=CLAIM_THREADS_S * scale)}
        threads[n] = (got["2.21"], got["rfc-2015"])
    return {"bench-free": bench, "ebizzy": eb, "seconds": seconds,
            "threads": {n: {"2.21": a, "rfc-2015": b} for n, (a, b) in threads.items()}}
