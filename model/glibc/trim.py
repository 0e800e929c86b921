"""The rules that decide a trim, one small function each (seed 001; digest "History", "Rules").

Each `heap_trim_extra_*` answers, for a thread heap whose top chunk is `top_size` bytes, how
many bytes `heap_trim` asks `shrink_heap` to give back (0: none). `systrim_extra` is the main
arena's rule. The RFC's throttle (seed 001, never merged) is the `rfc_*` functions over the
two uint16 counters it adds to `heap_info`.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.glibc.constants import (FASTBIN_CONSOLIDATION_THRESHOLD, MINSIZE, PAGESIZE,
                                   align_down)

RFC_DECAY_AT = 100  # "if (++h->mt.event_madvise >= 100)": both counters are halved


def is_trim_considered(merged_size: int) -> bool:
    """_int_free considers a trim only once the merged chunk is at least 64 KiB
    (FASTBIN_CONSOLIDATION_THRESHOLD): small frees never trim (digest "Rules")."""
    return merged_size >= FASTBIN_CONSOLIDATION_THRESHOLD


def trimmable_extra(top_size: int, pad: int, pagesize: int = PAGESIZE) -> int:
    """The whole pages of the top chunk above `pad` and MINSIZE: round_down(top - 33 - pad)."""
    top_area = top_size - MINSIZE - 1
    if top_area <= pad:
        return 0
    return align_down(top_area - pad, pagesize)


def systrim_extra(top_size: int, pad: int, trim_threshold: int) -> int:
    """Main arena: `if (top >= trim_threshold) systrim(top_pad)`: one sbrk(-extra)."""
    if top_size < trim_threshold:
        return 0
    return trimmable_extra(top_size, pad)


def heap_trim_extra_2_21(top_size: int, pad: int, trim_threshold: int) -> int:
    """2.10 .. 2.21: "heap_trim shrinks whenever at least one page lies above top_pad"
    (seed 001: "the free() will call madvise ... every time")."""
    return trimmable_extra(top_size, pad)


def heap_trim_extra_2_22(top_size: int, pad: int, trim_threshold: int) -> int:
    """2.22, "Consistently apply trim_threshold to all heaps" (BZ 17195): skip the shrink
    when `extra` (page-rounded top minus pad) is below trim_threshold."""
    extra = trimmable_extra(top_size, pad)
    return extra if extra >= trim_threshold else 0


def heap_trim_extra_2_23(top_size: int, pad: int, trim_threshold: int) -> int:
    """2.23 and later: skip when the top chunk itself is below trim_threshold."""
    if top_size < trim_threshold:
        return 0
    return trimmable_extra(top_size, pad)


# -- the RFC's madvise throttle (seed 001) ---------------------------------------------------

@dataclass
class MadviseThrottle:
    """`madvise_throttle mt` in heap_info: two uint16 counters, zero in a new heap."""

    event_madvise: int = 0  # M: shrink requests since the last madvise (decaying)
    event_large_malloc: int = 0  # L: heap growths seen while M != 0 (decaying)


def rfc_decay(mt: MadviseThrottle) -> None:
    """"Only keep track of recent ... events by decaying counters": both halved."""
    mt.event_large_malloc >>= 1
    mt.event_madvise >>= 1


def rfc_count_shrink(mt: MadviseThrottle) -> None:
    """shrink_heap: `if (++h->mt.event_madvise >= 100)` halve both."""
    mt.event_madvise += 1
    if mt.event_madvise >= RFC_DECAY_AT:
        rfc_decay(mt)


def rfc_count_growth(mt: MadviseThrottle) -> None:
    """sysmalloc, when grow_heap extended the heap: "Track ratio of heap grows/shrinks after
    recent shrinks": counted only while event_madvise != 0, halved at 100."""
    if mt.event_madvise:
        mt.event_large_malloc += 1
        if mt.event_large_malloc >= RFC_DECAY_AT:
            rfc_decay(mt)


def rfc_ratio_allows(mt: MadviseThrottle) -> bool:
    """"there are a mix of growths and shrinks but more shrink requests recently":
    `ratio = (L + 1) * 100 / M; ratio < 100 && L > 1` (unsigned division)."""
    ratio = (mt.event_large_malloc + 1) * 100 // mt.event_madvise
    return ratio < 100 and mt.event_large_malloc > 1


def rfc_should_madvise(diff: int, mmap_threshold: int, mt: MadviseThrottle) -> bool:
    """"Only call madvise if it is a request bigger than mmap_threshold or if ..." the ratio
    allows it; otherwise shrink_heap returns -1 and the heap keeps its size."""
    return diff >= mmap_threshold or rfc_ratio_allows(mt)


def rfc_reset(mt: MadviseThrottle) -> None:
    """After the madvise: `h->mt.event_large_malloc = h->mt.event_madvise = 0`."""
    mt.event_large_malloc = 0
    mt.event_madvise = 0
