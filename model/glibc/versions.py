"""The policy table: each modelled glibc version and what differs between them (digest "History").

| version  | thread-heap trim rule                                  | tcache | heap_info |
|----------|--------------------------------------------------------|--------|-----------|
| 2.21     | shrink when a page lies above top_pad                  | no     | 32 bytes  |
| rfc-2015 | 2.21 + the seed's madvise throttle (uint16 counters)   | no     | 48 bytes  |
| 2.22     | 2.21, but skip when `extra` < trim_threshold (BZ 17195) | no     | 32 bytes  |
| 2.23+    | skip when the top chunk < trim_threshold (today)        | 2.26+  | 48 bytes  |

"2.23+" is modelled as the glibc installed here (2.36): tcache on, the 2.35 heap_info with
its `pagesize` field, and the malloc_state of 2.27+. The main arena (`systrim`) is the same in
every version.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.glibc.constants import HEAP_MAX_SIZE


@dataclass(frozen=True)
class Version:
    name: str
    summary: str
    heap_trim_rule: str  # name of the rule in model.glibc.trim (looked up at call time)
    throttle: bool  # the RFC's madvise throttle in shrink_heap and sysmalloc
    tcache: bool  # 2.26+: per-thread cache; the 640-byte request creates a thread's arena
    sizeof_heap_info: int
    sizeof_malloc_state: int
    mmap_threshold_cap: int | None  # mallopt refuses a larger M_MMAP_THRESHOLD


VERSIONS: dict[str, Version] = {v.name: v for v in (
    Version("2.21", "heap_trim shrinks whenever a page lies above top_pad (seed 001)",
            "heap_trim_extra_2_21", False, False, 32, 2184, HEAP_MAX_SIZE // 2),
    Version("rfc-2015", "2.21 plus the RFC's decaying madvise counters (seed 001, never merged)",
            "heap_trim_extra_2_21", True, False, 48, 2184, HEAP_MAX_SIZE // 2),
    Version("2.22", "skip the shrink when extra < trim_threshold (BZ 17195)",
            "heap_trim_extra_2_22", False, False, 32, 2184, HEAP_MAX_SIZE // 2),
    Version("2.23+", "skip when the top chunk < trim_threshold; tcache (2.26+); as 2.36",
            "heap_trim_extra_2_23", False, True, 48, 2200, None),
)}


def version_for_release(release: str) -> Version:
    """The modelled version that stands for a glibc release string such as "2.36"."""
    try:
        major, minor = (int(x) for x in release.split(".")[:2])
    except ValueError:
        raise ValueError(f"not a glibc release: {release!r}; expected MAJOR.MINOR") from None
    if (major, minor) < (2, 21):
        raise ValueError(f"glibc {release} is older than every modelled version (2.21)")
    if (major, minor) >= (2, 23):
        return VERSIONS["2.23+"]
    return VERSIONS[f"{major}.{minor}"]
