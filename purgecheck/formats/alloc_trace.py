"""Allocation traces written by the recorder (reference_c/recorder.c, docs/record.md).

A trace is a sequence of 32-byte records, four little-endian 64-bit words each:

    w0 = seq (bits 0..39) | thread (40..55) | kind (56..63)
    w1 = ns since the image started (0..47) | flags (48..55) | check (56..63)
    w2 = a, the first argument (a size, a pointer, a mallopt parameter)
    w3 = r, the result (the pointer returned) or a second argument (mallopt's value)

`check` is 0xA5 xor the 31 other bytes. Each process image begins with a START record (a =
pid, r = the magic "PPCREC01"); an exec appends a new image to the same file. Within an image
the records are in the order of their threads' windows of the file (the recorder maps the
file and hands each thread a window of it); `seq` is the calls' order. A slot whose w0 is
zero was never written (the rest of a window, the room the file was extended by ahead, a
record in flight at a kill: the recorder stores w0 last, and it is never zero in a record):
the readers skip it (`is_record`). They sort by `seq` and cut the image at the first number
missing, which after a kill is a call whose record was in flight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

# the format's constants, in a module without numpy (the replay's PyPy child reads them)
from purgecheck.formats.records import (ALIGN_LOG2, F_IN_CREATE, F_NOT_POW2, KIND,  # noqa: F401
                                        KINDS, MAGIC, RECORD)

ROWS_CHUNK = 1 << 16  # records turned into Python values at a time by Image.rows
REFUSED = {1: "the program defines malloc itself", 2: "the next malloc is not the C library's"}


class AllocTraceError(Exception):
    """A bad trace: names the file, the record and what was expected (exit 2)."""

    def __init__(self, source: str, record: int, msg: str) -> None:
        super().__init__(f"{source}: record {record}: {msg}")
        self.source, self.record, self.msg = source, record, msg


@dataclass
class Image:
    """One process image of a trace, in call order.

    The records stay in the file (a read-only memory map, `words`); the image keeps their
    order (`order`, 8 bytes a call) and the small columns kind, thread and flags (4 bytes a
    call). The wide fields (a, r, ns) are read from the map when asked, a slice at a time by
    the replay, so a trace of 10 M calls needs about 120 MB beside its file."""

    source: str
    pid: int
    refused: int  # 0, or a key of REFUSED
    first_record: int  # the START record's number in the file
    words: np.ndarray  # this image's records in file order, (n, 4) little-endian u64
    order: np.ndarray  # indices into words, in call order (up to the cut)
    kind: np.ndarray
    thread: np.ndarray
    flags: np.ndarray
    cut: int | None = None  # the first sequence number missing (the rest is not replayed)
    ended: bool = False  # the END record was written: the process exited normally
    execed: bool = False  # the image ended in an exec

    def __len__(self) -> int:
        return len(self.order)

    def column(self, word: int, lo: int = 0, hi: int | None = None) -> np.ndarray:
        return self.words[self.order[lo:hi], word]

    @property
    def seq(self) -> np.ndarray:
        return np.arange(len(self), dtype=np.uint64)  # contiguous up to the cut

    @property
    def recno(self) -> np.ndarray:
        return self.order + self.first_record

    @property
    def a(self) -> np.ndarray:
        return self.column(2)

    @property
    def r(self) -> np.ndarray:
        return self.column(3)

    @property
    def ns(self) -> np.ndarray:
        return self.column(1) & np.uint64((1 << 48) - 1)

    def counts(self) -> dict[str, int]:
        values, n = np.unique(self.kind, return_counts=True)
        return {KINDS[int(k)]: int(c) for k, c in zip(values, n)}

    # -- what the conversion reads (alloc_stream.StreamImage gives the same, streaming) ----

    @property
    def main_thread(self) -> int:
        """The thread of the image's first record (its main thread)."""
        return int(self.thread[0]) if len(self) else 0

    def last_of_threads(self) -> dict[int, int]:
        """Recorded thread -> the index of its last record."""
        n = len(self)
        uniq, first_from_end = np.unique(self.thread[::-1], return_index=True)
        return {int(t): n - 1 - int(j) for t, j in zip(uniq, first_from_end)}

    def rows(self) -> Iterator[tuple]:
        """(index, kind, thread, flags, a, r, record number) of each record in call order, a
        chunk at a time (bounded temporary memory)."""
        for lo in range(0, len(self), ROWS_CHUNK):
            hi = min(lo + ROWS_CHUNK, len(self))
            rows = self.words[self.order[lo:hi]]
            yield from zip(range(lo, hi), self.kind[lo:hi].tolist(),
                           self.thread[lo:hi].tolist(), self.flags[lo:hi].tolist(),
                           rows[:, 2].tolist(), rows[:, 3].tolist(),
                           (self.order[lo:hi] + self.first_record).tolist())

    def next_of_thread(self, i: int, thread: int) -> tuple[int, int, int, int] | None:
        """(kind, a, r, record number) of `thread`'s first record after index i, or None."""
        later = np.flatnonzero(self.thread[i + 1:] == thread)
        if not len(later):
            return None
        j = i + 1 + int(later[0])
        a, r = (int(v) for v in self.words[self.order[j], 2:4])
        return int(self.kind[j]), a, r, int(self.order[j]) + self.first_record

    def has_kind(self, kind: str) -> bool:
        return bool(np.any(self.kind == KIND[kind]))


@dataclass
class Trace:
    source: str
    images: list[Image] = field(default_factory=list)
    records: int = 0  # records in the file (slots never written not counted)


CHECK_SLICE = 1 << 20  # records checked at a time (bounded temporary memory)


def is_record(words: np.ndarray) -> np.ndarray:
    """Which slots of (n, 4) words hold a record: w0 is stored last and never zero (module
    doc); a slot with w0 zero was never written, whatever its other words hold."""
    return words[:, 0] != 0


def _first_bad_check(words: np.ndarray) -> tuple[int, int, int] | None:
    """(record, check byte, expected) of the first record whose check byte is wrong (slots
    never written are not records: not checked)."""
    for lo in range(0, len(words), CHECK_SLICE):
        w = np.ascontiguousarray(words[lo:lo + CHECK_SLICE])
        raw = w.view(np.uint8).reshape(-1, RECORD)
        want = np.bitwise_xor.reduce(np.delete(raw, 15, axis=1), axis=1) ^ np.uint8(0xA5)
        bad = np.flatnonzero((raw[:, 15] != want) & is_record(w))
        if len(bad):
            i = int(bad[0])
            return lo + i, int(raw[i, 15]), int(want[i])
    return None


def read_trace(path: str | Path) -> Trace:
    """Read and check a whole trace file; AllocTraceError names the first bad record."""
    source = str(path)
    size = Path(path).stat().st_size
    n, rest = divmod(size, RECORD)
    if rest:
        raise AllocTraceError(source, n, f"truncated: {rest} of {RECORD} bytes (a trace is "
                                         f"whole {RECORD}-byte records)")
    if n == 0:
        raise AllocTraceError(source, 0, "expected a START record, got an empty file")
    words = np.memmap(path, dtype="<u8", mode="r", shape=(n, 4))
    bad = _first_bad_check(words)
    if bad is not None:
        i, got, want = bad
        raise AllocTraceError(source, i, f"corrupt: check byte {got:#04x}, expected {want:#04x}")
    kind = (words[:, 0] >> np.uint64(56)).astype(np.uint8)
    unknown = np.flatnonzero(((kind < 1) | (kind > max(KINDS))) & is_record(words))
    if len(unknown):
        i = int(unknown[0])
        raise AllocTraceError(source, i, f"unknown record kind {int(kind[i])} (expected "
                                         f"1..{max(KINDS)})")
    starts = np.flatnonzero(kind == KIND["start"])
    if len(starts) == 0 or starts[0] != 0:
        raise AllocTraceError(source, 0, f"expected a START record, got "
                                         f"{KINDS[int(kind[0])]}")
    trace = Trace(source, records=int(np.count_nonzero(is_record(words))))
    bounds = list(starts) + [n]
    for lo, hi in zip(bounds, bounds[1:]):
        trace.images.append(_image(source, words[lo:hi], kind[lo:hi], int(lo)))
    return trace


def _image(source: str, w: np.ndarray, kind: np.ndarray, lo: int) -> Image:
    if int(w[0, 3]) != MAGIC:
        raise AllocTraceError(source, lo, f"a START record without the recorder's magic "
                                          f"({int(w[0, 3]):#x}, expected {MAGIC:#x})")
    live = np.flatnonzero(is_record(w))  # in file order: the slots never written left out
    seq = w[live, 0] & np.uint64((1 << 40) - 1)
    by_seq = np.argsort(seq, kind="stable")
    seq, order = seq[by_seq], live[by_seq]
    del live, by_seq
    dup = np.flatnonzero(seq[1:] == seq[:-1])
    if len(dup):
        i = int(dup[0]) + 1
        raise AllocTraceError(source, int(order[i]) + lo, f"sequence number {int(seq[i])} "
                                                          f"written twice (expected each once)")
    gaps = np.flatnonzero(seq != np.arange(len(seq), dtype=np.uint64))
    del seq
    cut = None
    if len(gaps):
        cut = int(gaps[0])
        order = order[:cut]
    order = order.astype(np.int64)
    thread = ((w[:, 0] >> np.uint64(40)) & np.uint64(0xFFFF)).astype(np.uint16)[order]
    flags = ((w[:, 1] >> np.uint64(48)) & np.uint64(0xFF)).astype(np.uint8)[order]
    kind = kind[order]
    img = Image(source, int(w[0, 2]), int(flags[0]), lo, w, order, kind, thread, flags, cut)
    img.ended = bool(np.any(kind == KIND["end"]))
    img.execed = bool(np.any(kind == KIND["exec"]))
    return img


def encode(seq: int, thread: int, kind: str, a: int = 0, r: int = 0, ns: int = 0,
           flags: int = 0) -> bytes:
    """One record as the recorder writes it (for tests and hand-made traces)."""
    import struct
    w0 = (seq & ((1 << 40) - 1)) | (thread & 0xFFFF) << 40 | KIND[kind] << 56
    w1 = (ns & ((1 << 48) - 1)) | (flags & 0xFF) << 48
    raw = bytearray(struct.pack("<4Q", w0, w1, a & (2**64 - 1), r & (2**64 - 1)))
    check = 0xA5
    for i, b in enumerate(raw):
        if i != 15:
            check ^= b
    raw[15] = check
    return bytes(raw)


def render(img: Image, limit: int | None = None) -> str:
    """The records as text, one a line (for reading a trace, `purgecheck record --show`)."""
    out = []
    for i in range(len(img) if limit is None else min(limit, len(img))):
        out.append(f"{int(img.seq[i])} t{int(img.thread[i])} {int(img.ns[i])}ns "
                   f"{KINDS[int(img.kind[i])]} a={int(img.a[i]):#x} r={int(img.r[i]):#x} "
                   f"flags={int(img.flags[i]):#x}")
    return "\n".join(out)
