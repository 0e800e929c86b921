"""Invariants of a glibc arena (seed 001; digest "Rules"), scope "glibc-arena".

Each predicate takes an `Arena` (with its process) and returns None when the property
holds, else one line saying what is wrong. The policy invariants restate each version's rule
from the seed and the digest here, independently of `model.glibc.trim`, and judge the ghost
record of every trim decision against it.
"""

from __future__ import annotations

from operator import attrgetter

from model.glibc.arena import Arena, TrimRecord
from model.glibc.constants import (DEFAULT_MMAP_THRESHOLD_MAX, FASTBIN_CONSOLIDATION_THRESHOLD,
                                   HEAP_MAX_SIZE, MALLOC_ALIGNMENT, MINSIZE, PAGESIZE)
from model.glibc.heap import FAST, FENCE, FREE, INUSE, TOP
from model.invariants import Invariant, invariant, register

SCOPE = "glibc-arena"
_STATE = attrgetter("state")
RECENT_TRIMS = 16  # each op adds a few records at most; older ones were judged before


def _segments(av: Arena):
    return [s for s in av.segments if s.chunks]


@invariant("GL-CHUNKS-TILE",
           "The chunks of every heap (or of the main arena's break) tile it: from the first "
           "chunk to the end, no gap and no overlap, sizes multiples of 16 and at least "
           "MINSIZE (fenceposts 16).",
           "digest \"Rules\": chunks in address order; heap_info and malloc_state first",
           "model.glibc.arena.split_chunk", scope=SCOPE)
def chunks_tile(av: Arena) -> str | None:
    for seg in _segments(av):
        at = seg.first
        for c in seg.in_order():
            if c.addr != at:
                return f"{av.name}: chunk at {c.addr:#x} but the previous one ends at {at:#x}"
            least = 16 if c.state == FENCE else (0 if c.state == TOP else MINSIZE)
            if c.size % MALLOC_ALIGNMENT or c.size < least:
                return f"{av.name}: {c.state} chunk at {c.addr:#x} has size {c.size}"
            at = c.addr + c.size  # c.end without a property call per chunk per op
        if at != seg.end:
            return f"{av.name}: chunks end at {at:#x}, the heap at {seg.end:#x}"
    return None


@invariant("GL-TOP-LAST",
           "The top chunk is the last chunk of the arena's current heap (or of the break) and "
           "ends where it ends; no other chunk is marked top.",
           "digest \"Rules\": the top chunk; sbrk and shrink_heap only move its end",
           "model.glibc.system.shrink_heap", scope=SCOPE)
def top_last(av: Arena) -> str | None:
    if av.top is None:
        return None
    seg = av.segments[-1]
    if av.top.segment is not seg or max(seg.chunks) != av.top.addr:
        return f"{av.name}: the top chunk at {av.top.addr:#x} is not the last chunk of the " \
               f"current heap"
    if av.top.end != seg.end:
        return f"{av.name}: top ends at {av.top.end:#x}, its heap at {seg.end:#x}"
    # counted in C (a generator over every chunk was a fifth of `replay --invariants`)
    tops = sum(list(map(_STATE, s.chunks.values())).count(TOP) for s in av.segments)
    if tops != 1:
        return f"{av.name}: {tops} chunks are marked top"
    return None


@invariant("GL-NO-FREE-NEIGHBOURS",
           "No two binned free chunks are neighbours, and no binned free chunk borders the top "
           "chunk: _int_free and malloc_consolidate always coalesce.",
           "digest \"Rules\": coalescing with neighbours and with top",
           "model.glibc.arena.coalesce", scope=SCOPE)
def no_free_neighbours(av: Arena) -> str | None:
    for seg in _segments(av):
        prev = None
        for c in seg.in_order():
            if prev is not None and prev.state == FREE and c.state in (FREE, TOP):
                return f"{av.name}: free chunk at {prev.addr:#x} borders a {c.state} chunk " \
                       f"at {c.addr:#x}"
            prev = c
    return None


@invariant("GL-ACCOUNTING",
           "system_mem equals the heaps' sizes (the break's span); every heap is page-sized, "
           "size <= mprotect_size <= 64 MiB; the bins hold exactly the free chunks; the "
           "program's blocks are in-use chunks.",
           "digest \"Rules\": size shrinks, mprotect_size does not",
           "model.glibc.system.heap_trim", scope=SCOPE)
def accounting(av: Arena) -> str | None:
    total = sum(s.size for s in av.segments)
    if av.system_mem != total:
        return f"{av.name}: system_mem {av.system_mem} != {total} bytes of heaps"
    for s in av.segments:
        if s.size % PAGESIZE:
            return f"{av.name}: heap at {s.base:#x} has size {s.size}, not whole pages"
        if not av.is_main and not s.size <= s.mprotect_size <= HEAP_MAX_SIZE:
            return f"{av.name}: heap at {s.base:#x}: size {s.size}, mprotect_size " \
                   f"{s.mprotect_size}"
    binned = {id(c) for c in av.bins.chunks()}
    free = {id(c) for s in av.segments for c in s.chunks.values() if c.state == FREE}
    if binned != free:
        return f"{av.name}: {len(binned)} chunks in the bins, {len(free)} free chunks in heaps"
    for size, chunks in av.fastbins.items():
        if any(c.state != FAST or c.size != size for c in chunks):
            return f"{av.name}: fastbin {size} holds a chunk that is not a {size}-byte fast one"
    for block, c in av.process.blocks.items():
        if c.segment is not None and c.segment.arena is av and c.state != INUSE:
            return f"{av.name}: the program's block {block} is a {c.state} chunk"
    return None


def _rule_extra(r: TrimRecord) -> int:
    """Seed 001 / digest "History", restated: the bytes each version's rule gives back."""
    extra = max(0, (r.top_size - r.pad - MINSIZE - 1) // PAGESIZE * PAGESIZE)
    if r.where == "main" or r.version == "2.23+":
        return extra if r.top_size >= r.trim_threshold else 0
    if r.version == "2.22":
        return extra if extra >= r.trim_threshold else 0
    return extra  # 2.21 and the RFC: whenever a page lies above top_pad


@invariant("GL-TRIM-RULE",
           "Each trim follows its version's rule: 2.21 and the RFC shrink whenever a page "
           "lies above top_pad; 2.22 only when that extra >= trim_threshold; 2.23+ and the "
           "main arena only when the top chunk >= trim_threshold; the RFC madvises only if "
           "extra >= mmap_threshold or ((L+1)*100/M < 100 and L > 1).",
           "seed 001: \"if (diff >= mp_.mmap_threshold || (ratio < 100 && "
           "h->mt.event_large_malloc > 1))\"; digest \"History\"",
           "model.glibc.system.heap_trim", scope=SCOPE)
def trim_rule(av: Arena) -> str | None:
    for r in av.trims[-RECENT_TRIMS:]:
        want = _rule_extra(r)
        if r.extra != want:
            return f"{av.name} ({r.version}): top {r.top_size}, pad {r.pad}, trim_threshold " \
                   f"{r.trim_threshold}: asked to give back {r.extra}, the rule says {want}"
        shrink = want > 0
        if r.version == "rfc-2015" and r.where == "heap" and want and r.counters is not None:
            m, l = r.counters
            shrink = want >= r.mmap_threshold or (m > 0 and (l + 1) * 100 // m < 100 and l > 1)
        if r.shrunk != shrink:
            return f"{av.name} ({r.version}): extra {want}, counters {r.counters}: " \
                   f"{'shrank' if r.shrunk else 'kept'} the heap, the rule says " \
                   f"{'shrink' if shrink else 'keep'}"
    return None


@invariant("GL-PAD-KEPT",
           "A trim leaves the top chunk at least top_pad + MINSIZE bytes, and gives back "
           "whole pages.",
           "digest \"Rules\": extra = round_down(top - 33 - pad, page)",
           "model.glibc.trim.trimmable_extra", scope=SCOPE)
def pad_kept(av: Arena) -> str | None:
    for r in av.trims[-RECENT_TRIMS:]:
        if r.shrunk and (r.top_after < r.pad + MINSIZE or (r.top_size - r.top_after) % PAGESIZE):
            return f"{av.name}: a trim left a top of {r.top_after} bytes from {r.top_size} " \
                   f"(pad {r.pad})"
    return None


@invariant("GL-TRIM-TRIGGER",
           "A trim is considered only by a free whose merged chunk is at least 64 KiB "
           "(FASTBIN_CONSOLIDATION_THRESHOLD): small frees never trim.",
           "digest \"Rules\": \"A trim is considered only in free() of a chunk that did not go "
           "to tcache or a fastbin, once the merged chunk is at least 64 KiB\"",
           "model.glibc.trim.is_trim_considered", scope=SCOPE)
def trim_trigger(av: Arena) -> str | None:
    for r in av.trims[-RECENT_TRIMS:]:
        if r.trigger < FASTBIN_CONSOLIDATION_THRESHOLD:
            return f"{av.name}: a free of a {r.trigger}-byte merged chunk considered a trim"
    return None


@invariant("GL-RFC-COUNTERS",
           "RFC: every heap's event_madvise and event_large_malloc stay below 100 (so within "
           "uint16), both are zero right after a madvise.",
           "seed 001: \"if (++h->mt.event_madvise >= 100) { ... >>= 1; ... >>= 1; }\", "
           "\"h->mt.event_large_malloc = h->mt.event_madvise = 0\"",
           "model.glibc.trim.rfc_decay", scope=SCOPE)
def rfc_counters(av: Arena) -> str | None:
    for s in av.segments:
        m, l = s.mt.event_madvise, s.mt.event_large_malloc
        if not (0 <= m < 100 and 0 <= l < 100):
            return f"{av.name}: heap at {s.base:#x} has counters M={m} L={l}"
    for r in av.trims[-RECENT_TRIMS:]:
        if r.counters_after not in (None, (0, 0)):
            return f"{av.name}: counters {r.counters_after} after a madvise"
    return None


@invariant("GL-DYNAMIC-THRESHOLD",
           "While no parameter was set, trim_threshold is twice mmap_threshold once the "
           "dynamic threshold moved it, and mmap_threshold stays within 128 KiB .. 32 MiB.",
           "digest \"Rules\": \"sets mmap_threshold = chunk size and trim_threshold = 2 * "
           "mmap_threshold\"",
           "model.glibc.params.raise_dynamic_threshold", scope=SCOPE)
def dynamic_threshold(av: Arena) -> str | None:
    mp = av.process.mp
    if mp.no_dyn_threshold or mp.mmap_threshold == 128 * 1024 == mp.trim_threshold:
        return None
    if mp.trim_threshold != 2 * mp.mmap_threshold:
        return f"mmap_threshold {mp.mmap_threshold} but trim_threshold {mp.trim_threshold}"
    if not 128 * 1024 <= mp.mmap_threshold <= DEFAULT_MMAP_THRESHOLD_MAX:
        return f"mmap_threshold {mp.mmap_threshold} outside 128 KiB .. 32 MiB"
    return None


def check_arena(av: Arena, registry) -> list[tuple[str, str]]:
    """Every glibc-arena invariant of `registry` on one arena: [(id, reason)] that fail."""
    out = []
    for inv in registry.values():
        if inv.scope == SCOPE and inv.predicate is not None:
            reason = inv.predicate(av)
            if reason:
                out.append((inv.id, reason))
    return out


register(Invariant(
    "GL-STRACE-CONFORMANCE",
    "The model of the installed glibc predicts, category by category, the system calls the "
    "real library makes for each conformance case (strace -f, classified by address).",
    "digest \"Measured on glibc 2.36\": the table of heap madvise and brk shrink counts",
    "model.glibc.process.Process", scope=SCOPE))

# Properties only the proofs judge (proofs/glibc_throttle.py): no single state shows them.
register(Invariant(
    "GL-RFC-UINT16",
    "RFC: from a zeroed heap, event_madvise and event_large_malloc stay below 100 through "
    "any sequence of shrink requests, growths and madvise resets, so the uint16 counters "
    "never wrap and the ratio's divisor event_madvise is never 0 when it is used.",
    "seed 001: \"uint16_t event_madvise; uint16_t event_large_malloc;\", \"if "
    "(++h->mt.event_madvise >= 100) { ... >>= 1; ... >>= 1; }\"",
    "model.glibc.trim.rfc_count_shrink", scope="proof"))
register(Invariant(
    "GL-RFC-CONDITION",
    "RFC: the ratio test `(L+1)*100/M < 100 && L > 1` holds exactly when L >= 2 and M >= L + 2 "
    "(strictly more shrink requests than growths plus one): a static or growing heap defers "
    "its madvise.",
    "seed 001: \"If the heap size is roughly static or growing then madvise() is deferred\"",
    "model.glibc.trim.rfc_ratio_allows", scope="proof"))
register(Invariant(
    "GL-TRIM-FLOOR",
    "2.23+: heap_trim never shrinks a thread heap whose top chunk is below trim_threshold; "
    "when it shrinks, it gives back whole pages and leaves at least top_pad + MINSIZE + 1 "
    "bytes in the top chunk (for every 64-bit size_t input).",
    "digest \"Rules\": \"(b) if top < trim_threshold stop; (c) otherwise shrink_heap\"",
    "model.glibc.trim.heap_trim_extra_2_23", scope="proof"))

