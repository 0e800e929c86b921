"""Sizes and limits of glibc's malloc on 64-bit Linux with 4 KiB pages (digest "Rules").

Names are glibc's own (malloc/malloc.c, malloc/arena.c); the values are the x86_64 ones.
"""

from __future__ import annotations

KiB = 1024
MiB = 1024 * KiB

PAGESIZE = 4 * KiB
SIZE_SZ = 8
MALLOC_ALIGNMENT = 16
MALLOC_ALIGN_MASK = MALLOC_ALIGNMENT - 1
CHUNK_HDR_SZ = 2 * SIZE_SZ
MINSIZE = 32

HEAP_MIN_SIZE = 32 * KiB
HEAP_MAX_SIZE = 64 * MiB

DEFAULT_MMAP_THRESHOLD = 128 * KiB
DEFAULT_MMAP_THRESHOLD_MAX = 32 * MiB  # 4 * 1024 * 1024 * sizeof(long)
DEFAULT_TRIM_THRESHOLD = 128 * KiB
DEFAULT_TOP_PAD = 128 * KiB
DEFAULT_MMAP_MAX = 65536

# A free whose merged chunk reaches this size consolidates the fastbins and considers a trim.
FASTBIN_CONSOLIDATION_THRESHOLD = 64 * KiB
MAX_FAST_CHUNK = 128  # global_max_fast: chunks up to 128 bytes go to the fastbins
MIN_LARGE_SIZE = 64 * MALLOC_ALIGNMENT  # chunks below 1024 bytes are in the small bins

TCACHE_MAX_BINS = 64
TCACHE_FILL_COUNT = 7
# the largest chunk a tcache bin holds (tidx2usize (TCACHE_MAX_BINS - 1) = 1032 usable bytes):
# a larger chunk's csize2tidx is past the last bin, so it never reaches a tcache
MAX_TCACHE_CHUNK = (TCACHE_MAX_BINS - 1) * MALLOC_ALIGNMENT + MINSIZE
TCACHE_STRUCT_REQUEST = 640  # sizeof(tcache_perthread_struct): the request that creates a thread's arena

# pthread's side (nptl): the default stack, its guard, the cache of joined stacks, the dtv
# each new stack's TLS block gets from the creating thread's arena with calloc.
STACK_SIZE = 8 * MiB + PAGESIZE
STACK_CACHE_MAXSIZE = 40 * MiB
DTV_CALLOC_REQUEST = 17 * 16  # (dtv_length + 2) * sizeof(dtv_t) for one TLS module


def align_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def align_down(n: int, a: int) -> int:
    return n // a * a


def request2size(req: int) -> int:
    """checked_request2size: the chunk size serving a request of `req` bytes."""
    if req + SIZE_SZ + MALLOC_ALIGN_MASK < MINSIZE:
        return MINSIZE
    return (req + SIZE_SZ + MALLOC_ALIGN_MASK) & ~MALLOC_ALIGN_MASK


def csize2tidx(size: int) -> int:
    """The tcache bin of a chunk size."""
    return (size - MINSIZE + MALLOC_ALIGNMENT - 1) // MALLOC_ALIGNMENT


def mmapped_chunk_size(nb: int) -> int:
    """sysmalloc_mmap: a chunk served by mmap takes whole pages, nb plus one size field."""
    return align_up(nb + SIZE_SZ, PAGESIZE)
