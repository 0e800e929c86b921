"""Seed 001's workloads on the glibc model of each version: what each trim rule costs.

The calls go to the model's own process (model/glibc/process.py: malloc, free, start, join
of a thread); its system calls are counted by category (model/glibc/syscalls.py) and the
resident bytes are read off them, per 4 KiB page: a page is resident once the program or
malloc writes it (the whole block of a malloc: the program uses it) and stops being resident
at a madvise(MADV_DONTNEED) of a heap's tail (shrink_heap), a brk that gives the top of the
main arena back (systrim), the remap of a heap's tail, or a munmap of a chunk, a heap or a
stack. Seed 001: "For a large size, the free() will call madvise (pagetable teardown, page
free and TLB flush) every time followed immediately by a malloc (fault, kernel page alloc,
zeroing and charge accounting)." Time is virtual: each workload says how long a record
takes, so madvise calls per second mean the same thing on every machine.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

from model.glibc.constants import PAGESIZE
from model.glibc.process import Process
from model.glibc.versions import VERSIONS
from purgecheck.simulate.result import DesignRun, Sample

KiB = 1024
# the categories that give pages back, and those counted as the table's calls
DROPS = {"heap_madvise", "stack_madvise", "brk_shrink", "heap_remap", "chunk_munmap",
         "heap_delete", "stack_munmap"}
MADVISE = {"heap_madvise"}
MMAP = {"chunk_mmap", "heap_new", "stack_mmap"}
MUNMAP = {"chunk_munmap", "heap_delete", "stack_munmap"}


class Op(NamedTuple):
    t_ms: float
    thread: int
    op: str  # malloc, free, start, join
    block: int = 0
    size: int = 0


def bench_free(num: int = 1024, pages: int = 48, record_ms: float = 0.01) -> Iterator[Op]:
    """Seed 001's bench-free: a worker thread runs `for (i = num; i--;) free(malloc(48 *
    4096))` (the seed: 1024 madvise calls on 2.21, 2 with the patch)."""
    t = 0.0
    yield Op(t, 1, "start")
    for _ in range(num):
        yield Op(t, 1, "malloc", 0, pages * PAGESIZE)
        t += record_ms
        yield Op(t, 1, "free", 0)
    yield Op(t, 1, "join")


def ebizzy(threads: int = 1, seconds: float = 3.0, record: int = 256 * KiB,
           record_ms: float = 0.1) -> Iterator[Op]:
    """An ebizzy-like loop (seed 001: "threaded with a large working set that at its core has
    an allocation, do_stuff, free loop"): each of `threads` workers allocates a `record`-byte
    buffer, uses it for `record_ms`, frees it, for `seconds` of virtual time (the seed ran 30
    s and measured about 9,000 madvise calls a second on 2.21, 0.06 with the patch)."""
    for th in range(1, threads + 1):
        yield Op(0.0, th, "start")
    t, n = 0.0, 0
    while t < seconds * 1000:
        for th in range(1, threads + 1):
            yield Op(t, th, "malloc", th, record)
        t += record_ms
        for th in range(1, threads + 1):
            yield Op(t, th, "free", th)
        n += 1
    for th in range(1, threads + 1):
        yield Op(t, th, "join")


# name -> (generator, what it is, the parameters make bench uses at its tiny size)
WORKLOADS: dict[str, tuple[Callable[..., Iterator[Op]], str, dict]] = {
    "bench-free": (bench_free, "seed 001's bench-free: free(malloc(48 pages)) 1024 times in a "
                               "worker thread", {"num": 64}),
    "ebizzy": (ebizzy, "an ebizzy-like loop: each worker allocates a 256 KiB record, uses it "
                       "0.1 ms, frees it, for 3 s", {"seconds": 0.1}),
}


def workload_descriptions() -> dict[str, str]:
    return {name: description for name, (_, description, _) in WORKLOADS.items()}


def version_names() -> list[str]:
    return list(VERSIONS)


def bench_params(name: str, tiny: bool) -> dict:
    return dict(WORKLOADS[name][2]) if tiny else {}


GLIBC_RANGES = {"num": (0, 10_000_000, True), "pages": (1, 262_144, True),
                "threads": (1, 7, True), "record": (1, 1 << 30, True),
                "record_ms": (0.0001, 1e7, False), "seconds": (0, 36_000, False)}


def _params(name: str, params: dict) -> dict:
    import inspect
    gen = WORKLOADS[name][0]
    known = list(inspect.signature(gen).parameters)
    for k, v in params.items():
        if k not in known:
            raise ValueError(f"workload {name} has no parameter {k!r}; it has "
                             f"{', '.join(known)}")
        lo, hi, integer = GLIBC_RANGES[k]
        if integer and (not isinstance(v, int) or isinstance(v, bool)):
            raise ValueError(f"workload {name}: {k} must be an integer in {lo}..{hi}, "
                             f"found {v!r}")
        if not lo <= v <= hi:
            raise ValueError(f"workload {name}: {k} must be in {lo:g}..{hi:g}, found {v!r}")
    return params


class GlibcSimulation:
    """The glibc model of one version, driven by ops in virtual time, with its residency."""

    def __init__(self, version: str, sample_ms: float = 10.0) -> None:
        if version not in VERSIONS:
            raise ValueError(f"unknown glibc version {version!r}; expected one of "
                             f"{', '.join(VERSIONS)}")
        self.p = Process(VERSIONS[version])
        self.version = version
        self.resident: set[int] = set()
        self.counts: dict[str, int] = {}
        self.madvised_bytes = 0
        self.allocations = 0
        self.blocks: dict[tuple[int, int], object] = {}
        self.samples: list[Sample] = []
        self.sample_ms = sample_ms
        self.next_sample = 0.0
        self.t = 0.0
        self.load_end = 0.0

    def _touch(self, addr: int, size: int) -> None:
        self.resident.update(range(addr // PAGESIZE, (addr + size - 1) // PAGESIZE + 1))

    def _drop(self, addr: int, size: int) -> None:
        self.resident.difference_update(range(-(-addr // PAGESIZE), (addr + size) // PAGESIZE))

    def _sample(self) -> None:
        rss = len(self.resident) * PAGESIZE
        live = sum(c.size for c in self.p.blocks.values())
        self.samples.append(Sample(self.t, rss, max(0, rss - live),
                                   sum(self.counts.get(c, 0) for c in MADVISE),
                                   self.madvised_bytes))

    def advance_to(self, t: float) -> None:
        while self.next_sample <= t:
            self.t = max(self.t, self.next_sample)
            self._sample()
            self.next_sample += self.sample_ms
        self.t = max(self.t, t)

    def apply(self, op: Op) -> None:
        self.advance_to(op.t_ms)
        p = self.p
        if op.op == "malloc":
            c = p.malloc(op.thread, op.block, op.size)
            self._touch(c.addr, c.size)  # the program writes its block, malloc the header
            self.allocations += 1
            self.load_end = self.t
        elif op.op == "free":
            p.free(op.thread, op.block)
        elif op.op == "start":
            p.start(op.thread)
        elif op.op == "join":
            p.join(op.thread)
        else:
            raise ValueError(f"unknown op {op.op!r}")
        for call in p.calls:
            self.counts[call.category] = self.counts.get(call.category, 0) + 1
            if call.category in DROPS:
                self._drop(call.addr, call.length)
            if call.category in MADVISE:
                self.madvised_bytes += call.length
        p.calls.clear()  # counted: the process keeps no log of its own

    def counters(self, load_end: float) -> dict[str, float]:
        k = self.counts.get
        madvise = sum(k(c, 0) for c in MADVISE)
        seconds = max(load_end, 1e-9) / 1000
        at_load_end = next((s for s in reversed(self.samples) if s.t_ms <= load_end),
                           self.samples[0])
        return {"allocations": self.allocations, "madvise": madvise,
                "madvise_per_s": madvise / seconds,
                "brk_grow": k("brk_grow", 0), "brk_shrink": k("brk_shrink", 0),
                "mmap": sum(k(c, 0) for c in MMAP), "munmap": sum(k(c, 0) for c in MUNMAP),
                "discarded_bytes_load": self.madvised_bytes,
                "rss_load_end": at_load_end.resident, "rss_end": self.samples[-1].resident}


def simulate_glibc(workload: str, versions: list[str] | None = None, idle_ms: float = 100.0,
                   sample_ms: float = 10.0, **params) -> list[DesignRun]:
    """Run a glibc workload on the model of each version (all by default)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown glibc workload {workload!r}; expected one of "
                         f"{', '.join(WORKLOADS)}")
    params = _params(workload, params)
    for v in versions or []:
        if v not in VERSIONS:
            raise ValueError(f"--version: unknown glibc version {v!r}; expected one of "
                             f"{', '.join(VERSIONS)}")
    gen = WORKLOADS[workload][0]
    out = []
    for version in versions or list(VERSIONS):
        sim = GlibcSimulation(version, sample_ms)
        for op in gen(**params):
            sim.apply(op)
        load_end = sim.load_end
        sim.advance_to(sim.t + idle_ms)
        sim._sample()
        out.append(DesignRun(workload, "glibc", version, sim.counters(load_end), sim.samples,
                             load_end_ms=load_end, end_ms=sim.t))
    return out


def ops_of_calls(calls) -> Iterator[Op]:
    """A mimalloc workload's calls as glibc ops: its first thread is the main thread, every
    other one is started at its first call and joined after the last; a `loop` call does
    nothing in glibc. A realloc is refused (the glibc model has none yet)."""
    threads: dict[int, int] = {}
    t = 0.0
    for c in calls:
        t = c.t_ms
        if c.thread not in threads:
            threads[c.thread] = len(threads)
            if len(threads) > 8:
                raise ValueError("the glibc model takes at most 8 threads (arenas) at once")
            if threads[c.thread]:
                yield Op(t, threads[c.thread], "start")
        th = threads[c.thread]
        if c.op == "malloc":
            yield Op(t, th, "malloc", c.name, c.size)
        elif c.op == "free":
            yield Op(t, th, "free", c.name)
        elif c.op == "realloc":
            raise ValueError("realloc: the glibc model has no realloc yet; run the mimalloc "
                             "designs only (no --version)")
    for th in sorted(v for v in threads.values() if v):
        yield Op(t, th, "join")


def simulate_calls(name: str, calls, versions: list[str] | None = None,
                   idle_ms: float = 100.0, sample_ms: float = 10.0) -> list[DesignRun]:
    """A mimalloc workload's calls (a list) on the glibc model of each version."""
    for v in versions or []:
        if v not in VERSIONS:
            raise ValueError(f"--version: unknown glibc version {v!r}; expected one of "
                             f"{', '.join(VERSIONS)}")
    out = []
    for version in versions or list(VERSIONS):
        sim = GlibcSimulation(version, sample_ms)
        for op in ops_of_calls(calls):
            sim.apply(op)
        load_end = sim.load_end
        sim.advance_to(sim.t + idle_ms)
        sim._sample()
        out.append(DesignRun(name, "glibc", version, sim.counters(load_end), sim.samples,
                             load_end_ms=load_end, end_ms=sim.t))
    return out


def glibc_claims() -> list[dict]:
    """Seed 001's claims beside the model's figures, computed now."""
    bench = {r.design: r.counters for r in simulate_glibc("bench-free")}
    eb = {r.design: r.counters for r in simulate_glibc("ebizzy")}
    old, rfc = bench["2.21"], bench["rfc-2015"]
    out = [{
        "seed": "001", "workload": "bench-free",
        "claim": "bench-free: 2.21 calls madvise at every free, the RFC's throttle twice",
        "seed_figures": "1024 madvise calls on 2.21, 2 with the patch",
        "model_figures": f"{old['madvise']:.0f} on 2.21, {rfc['madvise']:.0f} with the RFC "
                         f"({bench['2.22']['madvise']:.0f} on 2.22, "
                         f"{bench['2.23+']['madvise']:.0f} on 2.23+)",
        "holds": old["madvise"] >= 900 and rfc["madvise"] <= 10,
    }]
    old, rfc = eb["2.21"], eb["rfc-2015"]
    frees = old["allocations"]
    out.append({
        "seed": "001", "workload": "ebizzy",
        "claim": "ebizzy: 2.21 calls madvise at nearly every free (thousands a second), the "
                 "RFC almost never",
        "seed_figures": "about 9,000 madvise calls a second on 2.21, 0.06 a second with the patch",
        "model_figures": f"{old['madvise_per_s']:,.0f}/s on 2.21 ({old['madvise']:.0f} of "
                         f"{frees:.0f} frees), {rfc['madvise_per_s']:.2f}/s with the RFC; "
                         f"{eb['2.23+']['madvise_per_s']:.2f}/s on 2.23+",
        "holds": old["madvise"] >= 0.9 * frees and old["madvise_per_s"] >= 1000
                 and rfc["madvise_per_s"] < 1,
    })
    return out
