"""The recorder's record format (alloc_trace.py) without numpy: its constants, and an image
read in call order with `array('Q')`, for the replay's PyPy child (purgecheck/simulate/
engine.py; Debian's PyPy has no numpy).

CPython finds an image's order and its index (alloc_stream.StreamImage: the checks, the
external sort, the cut, each thread's last record) and hands the child the file that holds
the records in call order (`StreamImage.in_order`): the trace itself (4 words a record, the
slots never written skipped, the record number its place in the file) or the sorted file
(5 words, the fifth the record number). The child converts them to ops as CPython would
(purgecheck/glibc/fromtrace.py reads `rows`, `last_of_threads`, `main_thread`,
`next_of_thread`): a JIT runs that loop about twice as fast (docs/record.md, ninth round).
"""

from __future__ import annotations

import sys
from array import array
from typing import Iterator

RECORD = 32
MAGIC = 0x3130434552435050
KINDS = {1: "start", 2: "malloc", 3: "free", 4: "calloc", 5: "realloc_old", 6: "realloc",
         7: "memalign", 8: "posix_memalign", 9: "aligned_alloc", 10: "valloc", 11: "pvalloc",
         12: "mallopt", 13: "malloc_trim", 14: "thread_new", 15: "thread_exit", 16: "fork",
         17: "exec", 18: "end"}
KIND = {v: k for k, v in KINDS.items()}
F_IN_CREATE = 0x80  # made by pthread_create itself (the new thread's dtv)
F_NOT_POW2 = 0x40  # an aligned call whose alignment was not a power of two
ALIGN_LOG2 = 0x3F  # the other bits of an aligned call's flags: log2 of the alignment, rounded up
CHUNK = 1 << 16  # records read at a time


class OrderedImage:
    """What an image read in call order gives the conversion beside its `rows`: its index,
    found by alloc_stream.StreamImage (the fields below) and carried to the child as a dict
    (`index`)."""

    FIELDS = ("source", "pid", "refused", "main_thread", "last", "cut", "n", "ended",
              "execed", "has_malloc")
    source: str
    n: int
    last: dict[int, int]
    ended: bool
    execed: bool
    has_malloc: bool

    def index(self) -> dict:
        return {k: getattr(self, k) for k in self.FIELDS}

    def __len__(self) -> int:
        return self.n

    def has_kind(self, kind: str) -> bool:
        return {"malloc": self.has_malloc, "end": self.ended, "exec": self.execed}[kind]

    def last_of_threads(self) -> dict[int, int]:
        return dict(self.last)

    def rows(self, start: int = 0) -> Iterator[tuple]:
        raise NotImplementedError

    def next_of_thread(self, i: int, thread: int) -> tuple[int, int, int, int] | None:
        """(kind, a, r, record number) of `thread`'s first record after index i (a second
        read from there: only a realloc in flight needs it)."""
        for j, k, t, _, a, r, rec in self.rows(i + 1):
            if j > i and t == thread:
                return k, a, r, rec
        return None


class RecordImage(OrderedImage):
    """An image in call order in a file of `words` u64 words a record, records lo..hi-1
    of it (module doc), with the index StreamImage found."""

    def __init__(self, path: str, words: int, lo: int, hi: int, index: dict) -> None:
        self.path, self.words, self.lo, self.hi = path, words, lo, hi
        for k in self.FIELDS:
            setattr(self, k, index[k])

    def rows(self, start: int = 0) -> Iterator[tuple]:
        """(index, kind, thread, flags, a, r, record number) in call order, up to the cut."""
        words, n = self.words, self.n
        # the sorted file has no slot left out: record i is at lo + i
        i = start if words == 5 else 0
        at = self.lo + i
        with open(self.path, "rb") as f:
            f.seek(at * words * 8)
            while at < self.hi and i < n:
                count = min(CHUNK, self.hi - at)
                w = array("Q")
                w.fromfile(f, count * words)
                if sys.byteorder != "little":
                    w.byteswap()
                for j in range(0, count * words, words):
                    w0 = w[j]
                    if words == 4:
                        if not w0:  # a slot never written (alloc_trace.is_record)
                            continue
                        rec = at + j // 4
                    else:
                        rec = w[j + 4]
                    if i >= start:
                        yield (i, w0 >> 56, (w0 >> 40) & 0xFFFF, (w[j + 1] >> 48) & 0xFF,
                               w[j + 2], w[j + 3], rec)
                    i += 1
                    if i >= n:
                        return
                at += count
