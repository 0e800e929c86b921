"""Named mutants of the glibc model: each breaks one rule, and names the invariants that
catch it (seed 001). Loaded with the rest of the catalogue by purgecheck/mutants/.
"""

from __future__ import annotations

from model.glibc import arena, trim
from model.glibc.constants import PAGESIZE, align_down
from purgecheck.mutants.patching import Patch, mutant


def _ratio_le(mt: trim.MadviseThrottle) -> bool:
    """Broken: the RFC ratio compared with `<=` (madvise when growths and shrinks balance)."""
    ratio = (mt.event_large_malloc + 1) * 100 // mt.event_madvise
    return ratio <= 100 and mt.event_large_malloc > 1


def _no_halving(mt: trim.MadviseThrottle) -> None:
    """Broken: the counters are never halved (they count up to the uint16 limit and wrap)."""


def _top_not_absorbing(av: arena.Arena, c) -> object:
    """Broken: a chunk freed next to the top chunk is binned instead of merged into top."""
    av.bins.add(c)
    return c


def _remainder_lost(av: arena.Arena, c, nb: int) -> None:
    """Broken: a best-fit split keeps nb bytes and forgets the remainder."""
    if c.size - nb >= 32:
        c.size = nb


def _no_threshold_2_23(top_size: int, pad: int, trim_threshold: int) -> int:
    """Broken: the 2.23+ rule without its trim_threshold check (2.21's behaviour)."""
    return trim.trimmable_extra(top_size, pad)


def _pad_ignored(top_size: int, pad: int, pagesize: int = PAGESIZE) -> int:
    """Broken: the whole top above MINSIZE is given back, top_pad ignored."""
    return align_down(max(0, top_size - 33), pagesize)


def _every_free_trims(merged_size: int) -> bool:
    """Broken: every free considers a trim, however small the merged chunk."""
    return True


def _trim_not_doubled(mp, chunk_size: int) -> None:
    """Broken: the dynamic threshold raises mmap_threshold but leaves trim_threshold."""
    if not mp.no_dyn_threshold and (chunk_size | 2) > mp.mmap_threshold \
            and chunk_size <= 32 * 1024 * 1024:
        mp.mmap_threshold = chunk_size


def _shrink_keeps_size(p, seg, diff, rec) -> bool:
    """Broken: shrink_heap madvises but forgets to lower heap->size."""
    p.emit("madvise", "heap_madvise", seg.base + seg.size - diff, diff)
    return True


# Why the glibc model's arena mutants are seen by one engine (issue 28's "two engines where
# two can see it"): the glibc engine is the only one that runs the glibc model (its arena
# invariants after every op, the published counts, strace against the installed glibc); the
# prove engine's glibc proofs are about heap_trim's floor and the 2015 RFC's counters, and
# every other engine runs the mimalloc model.
GLIBC_MODEL_ONLY = ("only the glibc engine runs the glibc model (arena invariants after every "
                    "op, the published counts, strace against the real glibc); the glibc "
                    "proofs cover heap_trim's floor and the RFC's counters, not this rule, and "
                    "the other engines run the mimalloc model")


mutant("rfc-ratio-le", "the glibc RFC ratio compared with `<=`",
       ("GL-TRIM-RULE",),
       Patch("model.glibc.trim", "rfc_ratio_allows", _ratio_le))
mutant("rfc-no-halving", "the glibc RFC counters not halved",
       ("GL-RFC-COUNTERS",),
       Patch("model.glibc.trim", "rfc_decay", _no_halving))
mutant("glibc-top-coalesce-skipped", "glibc: a chunk freed next to top is not merged into it",
       ("GL-NO-FREE-NEIGHBOURS",),
       Patch("model.glibc.arena", "coalesce_with_top", _top_not_absorbing),
       seen_by_one=GLIBC_MODEL_ONLY)
mutant("glibc-split-remainder-lost", "glibc: a best-fit split forgets its remainder",
       ("GL-CHUNKS-TILE",),
       Patch("model.glibc.arena", "split_chunk", _remainder_lost),
       seen_by_one=GLIBC_MODEL_ONLY)
mutant("glibc-2.23-no-threshold", "glibc 2.23+: heap_trim without the trim_threshold check",
       ("GL-TRIM-RULE", "GL-PUBLISHED"),
       Patch("model.glibc.trim", "heap_trim_extra_2_23", _no_threshold_2_23))
mutant("glibc-pad-ignored", "glibc: a trim gives back the top without keeping top_pad",
       ("GL-PAD-KEPT", "GL-TRIM-RULE"),
       Patch("model.glibc.trim", "trimmable_extra", _pad_ignored))
mutant("glibc-every-free-trims", "glibc: a trim is considered on every free, not from 64 KiB",
       ("GL-TRIM-TRIGGER",),
       Patch("model.glibc.trim", "is_trim_considered", _every_free_trims),
       seen_by_one=GLIBC_MODEL_ONLY)
mutant("glibc-trim-not-doubled", "glibc: the dynamic threshold leaves trim_threshold alone",
       ("GL-DYNAMIC-THRESHOLD",),
       Patch("model.glibc.params", "raise_dynamic_threshold", _trim_not_doubled),
       seen_by_one=GLIBC_MODEL_ONLY)
mutant("glibc-shrink-keeps-size", "glibc: shrink_heap does not lower heap->size",
       ("GL-TOP-LAST", "GL-ACCOUNTING"),
       Patch("model.glibc.system", "shrink_heap", _shrink_keeps_size),
       seen_by_one=GLIBC_MODEL_ONLY)
