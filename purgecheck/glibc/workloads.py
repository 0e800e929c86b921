"""Named workloads (op scripts) and the conformance cases built from them (digest table).

A workload is a script generator with a scale (iterations or blocks): `full` for
`purgecheck glibc compare` and `make check`, `quick` for the test suite. A case is a workload
with an environment; every case is run on the model and, for the installed glibc, under strace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

PAGE = 4096


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[int], str]
    full: int
    quick: int

    def script(self, quick: bool = False, scale: int | None = None) -> str:
        return self.build(scale if scale is not None else (self.quick if quick else self.full))


def _in_thread(tid: int, body: str) -> str:
    if tid == 0:
        return body
    return f"{tid} start\n{body}{tid} join\n"


def bench_free(pages: int, tid: int) -> Callable[[int], str]:
    """Seed 001's bench-free: `for (i = num; i--;) free(malloc(P * 4096))` in a worker."""
    def build(n: int) -> str:
        return _in_thread(tid, f"repeat {n}\n{tid} malloc 0 {pages * PAGE}\n{tid} free 0\nend\n")
    return build


def phases(order: str, tid: int, size: int = 40 * PAGE) -> Callable[[int], str]:
    """Allocate `n` blocks, free them all in LIFO or FIFO order; three phases."""
    def build(n: int) -> str:
        body = ["repeat 3"]
        body += [f"{tid} malloc {i} {size}" for i in range(n)]
        ids = range(n - 1, -1, -1) if order == "lifo" else range(n)
        body += [f"{tid} free {i}" for i in ids]
        body.append("end")
        return _in_thread(tid, "\n".join(body) + "\n")
    return build


MIXED_SIZES = (24, 100, 700, 1500, 5000, 20000, 70000, 100000, 150000, 300000)


def mixed(n: int) -> str:
    """Mixed sizes in a worker: tcache, fastbin, small, large and mmapped chunks, freed with
    a lag of three, so frees meet free neighbours, the top chunk and the dynamic threshold."""
    lines = []
    for i in range(n):
        size = MIXED_SIZES[(i * 7) % len(MIXED_SIZES)]
        lines.append(f"1 malloc {i % 8} {size}")
        lines.append(f"1 free {(i + 5) % 8}")
    return _in_thread(1, "\n".join(lines) + "\n")


def threads(n: int) -> str:
    """Three workers at once, each with its arena: seed 001's loop in each, interleaved,
    plus blocks freed by another thread than the one that allocated them."""
    lines = ["1 start", "2 start", "3 start", f"repeat {n}"]
    for t in (1, 2, 3):
        lines += [f"{t} malloc {t} {(32 + 16 * t) * PAGE}", f"{t} free {t}"]
    lines += ["end", f"repeat {max(1, n // 4)}"]
    lines += ["1 malloc 10 200000", "2 malloc 11 300000", "2 free 10", "1 free 11"]
    lines += ["end", "1 join", "2 join", "3 join"]
    return "\n".join(lines) + "\n"


def growing(n: int) -> str:
    """A worker whose blocks grow step by step (heap growths between shrinks): the RFC's
    ratio of growths to shrinks decides its madvise calls."""
    lines = ["1 mallopt mmap_threshold 33554432", "1 mallopt trim_threshold 131072"]
    for i in range(n):
        lines += [f"1 malloc 0 {200000 + 70000 * (i % 12)}", "1 free 0"]
    return _in_thread(1, "\n".join(lines) + "\n")


def heap_delete(n: int) -> str:
    """A worker fills more than one 64 MiB heap with 120,000-byte blocks, then frees them
    newest first: the second heap is deleted whole, then the first is trimmed."""
    lines = [f"1 malloc {i} 120000" for i in range(n)]
    lines += [f"1 free {i}" for i in range(n - 1, -1, -1)]
    return _in_thread(1, "\n".join(lines) + "\n")


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("bench-free", "seed 001: free(malloc(48 pages)) in a worker thread",
             bench_free(48, 1), 1024, 160),
    Workload("bench-free-main", "the same loop in the main thread (brk, systrim)",
             bench_free(48, 0), 1024, 64),
    Workload("bench-free-16", "free(malloc(16 pages)) in a worker thread",
             bench_free(16, 1), 1024, 64),
    Workload("bench-free-16-main", "free(malloc(16 pages)) in the main thread",
             bench_free(16, 0), 1024, 64),
    Workload("lifo", "a worker allocates N blocks of 40 pages, frees them newest first, x3",
             phases("lifo", 1), 200, 24),
    Workload("fifo", "a worker allocates N blocks of 40 pages, frees them oldest first, x3",
             phases("fifo", 1), 200, 24),
    Workload("lifo-main", "lifo in the main thread", phases("lifo", 0), 200, 24),
    Workload("fifo-main", "fifo in the main thread", phases("fifo", 0), 200, 24),
    Workload("mixed", "mixed sizes from 24 bytes to 300 KB in a worker, freed with a lag",
             mixed, 2000, 200),
    Workload("threads", "three workers at once, each with its arena, and cross-thread frees",
             threads, 512, 32),
    Workload("growing", "a worker's blocks grow step by step, fixed thresholds",
             growing, 240, 48),
    Workload("heap-delete", "a worker fills two heaps, then frees all: a heap is deleted",
             heap_delete, 600, 600),
)}

FIXED_32M_128K = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "131072"}
FIXED_32M_64M = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "67108864"}
ONLY_MMAP_128K = {"MALLOC_MMAP_THRESHOLD_": "131072"}


@dataclass(frozen=True)
class Case:
    name: str
    workload: str
    env: dict[str, str] = field(default_factory=dict)
    quick: bool = False  # part of the quick budget (the default test tier)


CASES: list[Case] = [
    Case("bench-free/defaults", "bench-free", {}, quick=True),
    Case("bench-free/fixed-128k", "bench-free", FIXED_32M_128K, quick=True),
    Case("bench-free/trim-64m", "bench-free", FIXED_32M_64M),
    Case("bench-free/only-mmap-128k", "bench-free", ONLY_MMAP_128K),
    Case("bench-free-main/defaults", "bench-free-main", {}),
    Case("bench-free-main/fixed-128k", "bench-free-main", FIXED_32M_128K, quick=True),
    Case("bench-free-main/trim-64m", "bench-free-main", FIXED_32M_64M),
    Case("bench-free-main/only-mmap-128k", "bench-free-main", ONLY_MMAP_128K),
    Case("bench-free-16/defaults", "bench-free-16", {}),
    Case("bench-free-16-main/defaults", "bench-free-16-main", {}),
    Case("bench-free/tunables", "bench-free",
         {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432:"
                            "glibc.malloc.trim_threshold=131072"}),
    Case("lifo/defaults", "lifo", {}),
    Case("fifo/defaults", "fifo", {}),
    Case("lifo/fixed-128k", "lifo", FIXED_32M_128K),
    Case("fifo/fixed-128k", "fifo", FIXED_32M_128K),
    Case("lifo-main/fixed-128k", "lifo-main", FIXED_32M_128K),
    Case("fifo-main/fixed-128k", "fifo-main", FIXED_32M_128K),
    Case("mixed/defaults", "mixed", {}),
    Case("mixed/fixed-128k", "mixed", FIXED_32M_128K),
    Case("threads/defaults", "threads", {}),
    Case("threads/fixed-128k", "threads", FIXED_32M_128K),
    Case("growing/mallopt", "growing", {}),
    Case("heap-delete/defaults", "heap-delete", {}),
]
