"""The system calls the allocator makes, as the model predicts and as strace shows them.

Each call has a category named by where it lands; `purgecheck glibc run` classifies a real
trace into the same categories by address, so the two can be counted side by side. The
seed's subject is `heap_madvise` (shrink_heap of a thread heap) and `brk_shrink` (systrim).
"""

from __future__ import annotations

from dataclasses import dataclass

CATEGORIES: dict[str, str] = {
    "heap_madvise": "madvise(MADV_DONTNEED) of a thread heap's tail (shrink_heap)",
    "heap_remap": "mmap(PROT_NONE, MAP_FIXED) of a heap tail (shrink_heap, overcommit 2)",
    "heap_new": "a new thread heap: the mprotect that opens its first pages",
    "heap_mprotect": "a thread heap grows past mprotect_size (grow_heap)",
    "heap_delete": "munmap of a whole 64 MiB heap that became empty (heap_trim)",
    "brk_query": "brk(NULL): the first sbrk of the process asks for the break",
    "brk_grow": "brk up: the main arena grows (sysmalloc)",
    "brk_shrink": "brk down: the main arena's top is trimmed (systrim)",
    "chunk_mmap": "mmap of a chunk at or above mmap_threshold",
    "chunk_munmap": "munmap of an mmapped chunk on free",
    "chunk_mremap": "mremap of an mmapped chunk whose page count a realloc changes",
    "main_madvise": "madvise(MADV_DONTNEED) of free pages inside the main arena (malloc_trim)",
    "stack_mmap": "mmap of a new thread stack (pthread_create)",
    "stack_mprotect": "mprotect opening a new thread stack below its guard page",
    "stack_madvise": "madvise of a thread's stack when it exits",
    "stack_munmap": "munmap of a cached stack when the stack cache is over 40 MiB",
}


@dataclass(frozen=True)
class SysCall:
    name: str  # madvise, brk, mmap, munmap, mprotect
    category: str  # a key of CATEGORIES
    addr: int
    length: int


def count_by_category(calls: list[SysCall]) -> dict[str, int]:
    out = {c: 0 for c in CATEGORIES}
    for call in calls:
        out[call.category] += 1
    return out
