"""What a simulation reports for one design on one workload: named counters and a series.

Every figure is computed by running the model (seed 000's mimalloc model, or seed 001's glibc
model of one version) on the workload; nothing here is measured on the machine. Residency is
per OS page, as mincore reports it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Sample:
    """The process at virtual time `t_ms`: resident bytes (RSS of the heap), resident bytes
    that hold no live allocation, and the discards (madvise calls) and bytes discarded so far."""

    t_ms: float
    resident: int
    free_resident: int
    discards: int
    discarded_bytes: int


@dataclass
class DesignRun:
    """One design (a mimalloc variant, or a glibc version) on one workload.

    `counters` are the figures of the table, by name (see COUNTERS); `load_end_ms` is the
    time of the last allocation, after which the workload's idle begins."""

    workload: str
    model: str  # "mimalloc" or "glibc"
    design: str  # a variant of model/variants.py, "off", or a glibc version
    counters: dict[str, float] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    load_end_ms: float = 0.0
    end_ms: float = 0.0
    syscalls: dict[str, int] = field(default_factory=dict)  # glibc: calls by category

    def as_json(self) -> dict:
        return asdict(self)


# The counters a run may have, with what they mean (the table's legend and the docs).
COUNTERS = {
    "allocations": "allocations the workload made (malloc, calloc, realloc that moved)",
    "requests": "requests of the workload (where it has requests)",
    "discards_load": "discard calls (madvise) before the last allocation",
    "discards_load_large": "mimalloc: of those, the calls of 64 KiB or more (what "
                           "`purgecheck measure` counts apart from small pages' holes)",
    "discarded_bytes_load": "bytes discarded before the last allocation",
    "discards_idle": "discard calls after the last allocation",
    "discarded_bytes_idle": "bytes discarded after the last allocation",
    "refaults": "OS pages discarded and then written again (a page fault and kernel zeroing each)",
    "refaults_per_request": "refaults per request",
    "refaults_per_1k_allocs": "refaults per 1,000 allocations",
    "rss_load_end": "resident bytes at the last allocation",
    "free_resident_load_end": "resident bytes holding no live allocation, at the last allocation",
    "rss_end": "resident bytes at the end of the idle",
    "free_resident_end": "resident free bytes at the end of the idle",
    "ms_to_floor": "ms from the last allocation until resident free bytes reach their floor",
    "arena_purges": "mimalloc: retired pages whose memory the arena gave back (every design alike)",
    "arena_purged_bytes": "mimalloc: bytes the arena gave back of retired pages",
    "arena_purges_load": "mimalloc: the arena's purges of retired pages before the last allocation",
    "arena_purged_bytes_load": "mimalloc: bytes the arena gave back before the last allocation",
    "discards": "calls that gave memory back (mimalloc: hole purging's discards and the arena's "
                "purges; glibc: madvise, brk shrink, munmap)",
    "discarded_bytes": "resident bytes those calls gave back",
    "rss_peak": "resident bytes at their peak",
    "rss_mb_s": "resident memory integrated over the run, load and idle (MB x s)",
    "madvise": "glibc: madvise(MADV_DONTNEED) calls",
    "brk_grow": "glibc: brk calls that grow the main heap",
    "brk_shrink": "glibc: brk calls that shrink the main heap",
    "mmap": "glibc: mmap calls (chunks and heaps)",
    "munmap": "glibc: munmap calls (chunks and heaps)",
    "madvise_per_s": "glibc: madvise calls per second of the workload's load",
    "heap_madvise": "glibc: madvise calls of shrink_heap (a thread heap's tail), without stacks'",
    "page_faults": "glibc: pages written while not resident (a fault and a zeroed page each)",
    "records_per_s": "glibc: the workload's records (malloc, use, free) per second of virtual time",
    "rss_mean": "glibc: resident bytes averaged over the load (weighted by virtual time)",
    "user_ms": "glibc: virtual time the program spent on its records (all threads)",
    "sys_ms": "glibc: virtual time the model's kernel costs add: calls and page faults",
}
