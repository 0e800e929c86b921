"""An allocation trace (alloc_trace.py) read in call order with bounded memory.

`alloc_trace.read_trace` maps the whole file and sorts each image in memory (about 12 bytes a
call, and the sort's temporaries: some 250 MB at 10 M calls). This reader never holds more
than a chunk of records:

- the file is checked a chunk at a time (whole records, check bytes, known kinds, a START
  first), with the same one-line errors as read_trace; slots never written (alloc_trace's
  `is_record`) are skipped everywhere;
- an image whose records are already in call order in the file (one thread, or windows
  filled in order) is read as it is;
- otherwise its records are put in call order by an external sort: each chunk of RUN records
  is sorted by call number into a temporary file (a sorted run), and the runs are merged
  (a block of each run in memory, merged in numpy: `_merge`), FAN_IN at a time, in rounds,
  until one temporary file holds the image in call order;
- one pass over the records in call order finds what the conversion needs first: the cut at
  the first missing call number, a number written twice, each thread's last record.

The conversion (purgecheck/glibc/fromtrace.py) reads a StreamImage as it reads an Image:
`rows`, `last_of_threads`, `main_thread`, `next_of_thread`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np

from purgecheck.formats.alloc_trace import AllocTraceError, _first_bad_check, is_record
from purgecheck.formats.records import KIND, KINDS, MAGIC, RECORD, OrderedImage

CHUNK = 1 << 16  # records read from a file at a time
RUN = 1 << 18  # records sorted in memory at a time (one sorted run of the external sort)
# records of each run held during a merge: 64 x 4,096 x 40 bytes, 10 MB (a merge step is
# a few numpy calls a run, so a block of 512 made the steps' own cost show)
MERGE_BLOCK = 1 << 12
# runs merged at once (more are merged in rounds): a trace of up to 16 M calls in one round,
# each record merged once (a round reads and writes every record); held in memory, a block
# of each: 64 x MERGE_BLOCK records
FAN_IN = 64
SEQ_MASK = (1 << 40) - 1


def _blocks(path: Path, lo: int, hi: int, words: int, chunk: int) -> Iterator[np.ndarray]:
    """Records lo..hi-1 of a file of `words` u64 words a record, `chunk` records at a time."""
    with open(path, "rb") as f:
        f.seek(lo * words * 8)
        while lo < hi:
            n = min(chunk, hi - lo)
            yield np.fromfile(f, dtype="<u8", count=words * n).reshape(n, words)
            lo += n


def image_spans(path: str | Path, chunk: int = CHUNK) -> list[tuple[int, int]]:
    """The record ranges [lo, hi) of the file's images, the whole file checked on the way;
    AllocTraceError names the first bad record, as read_trace does."""
    source = str(path)
    n, rest = divmod(Path(path).stat().st_size, RECORD)
    if rest:
        raise AllocTraceError(source, n, f"truncated: {rest} of {RECORD} bytes (a trace is "
                                         f"whole {RECORD}-byte records)")
    if n == 0:
        raise AllocTraceError(source, 0, "expected a START record, got an empty file")
    starts: list[int] = []
    unknown: tuple[int, int] | None = None
    first_kind = 0
    lo = 0
    for w in _blocks(Path(path), 0, n, 4, chunk):
        bad = _first_bad_check(w)
        if bad is not None:
            i, got, want = bad
            raise AllocTraceError(source, lo + i, f"corrupt: check byte {got:#04x}, expected "
                                                  f"{want:#04x}")
        kind = (w[:, 0] >> np.uint64(56)).astype(np.uint8)
        if lo == 0:
            first_kind = int(kind[0])
        if unknown is None:
            bad_kind = np.flatnonzero(((kind < 1) | (kind > max(KINDS))) & is_record(w))
            if len(bad_kind):
                unknown = (lo + int(bad_kind[0]), int(kind[bad_kind[0]]))
        starts += (np.flatnonzero(kind == KIND["start"]) + lo).tolist()
        lo += len(w)
    if unknown is not None:
        raise AllocTraceError(source, unknown[0], f"unknown record kind {unknown[1]} (expected "
                                                  f"1..{max(KINDS)})")
    if not starts or starts[0] != 0:
        raise AllocTraceError(source, 0, f"expected a START record, got {KINDS[first_kind]}")
    return list(zip(starts, starts[1:] + [n]))


def merge_runs(runs: list[tuple[Path, int]], out: Path, block: int = MERGE_BLOCK) -> None:
    """Sorted runs of 5-word records (call number in word 0's low 40 bits, record number in
    word 4), each in key order (call number, then record number), merged into `out` in key
    order, `block` rows of each run at a time and in numpy, never a Python step per record
    (a heapq.merge of the rows took 1.7 us a record: 17 s of a 10 M-call replay).

    Each step finds the bound: the lowest key any run's unread blocks can still hold, the
    least of the last held keys of the runs with more to read (a run is in key order). Every
    held row up to the bound is written, sorted; the run that set the bound is left with
    none and reads its next block, so every step reads at least one block.
    tests/test_replay_stream.py checks the order against a sort of all the rows."""
    runs = [(p, n) for p, n in runs if n]
    readers = [_blocks(p, 0, n, 5, block) for p, n in runs]
    held = [next(r) for r in readers]  # a run's rows read and not yet written
    left = [n - len(h) for (_, n), h in zip(runs, held)]  # a run's rows not yet read
    mask = np.uint64(SEQ_MASK)
    with open(out, "wb") as f:
        while held:
            ends = [(int(h[-1, 0] & mask), int(h[-1, 4]))
                    for h, rest in zip(held, left) if rest]
            bseq, brec = min(ends) if ends else (SEQ_MASK + 1, 0)  # none: write all
            parts = []
            for j, h in enumerate(held):
                # a run is in key order: its rows up to the bound are a prefix
                seq = h[:, 0] & mask
                k = int(np.count_nonzero((seq < bseq) | ((seq == bseq) & (h[:, 4] <= brec))))
                parts.append(h[:k])
                held[j] = h[k:]
            rows = np.concatenate(parts)
            rows[np.lexsort((rows[:, 4], rows[:, 0] & mask))].tofile(f)
            for j in range(len(held) - 1, -1, -1):
                if len(held[j]):
                    continue
                if left[j]:
                    held[j] = next(readers[j])
                    left[j] -= len(held[j])
                else:
                    del held[j], readers[j], left[j]


class StreamImage(OrderedImage):
    """One process image of a trace, read in call order a chunk at a time (module doc)."""

    def __init__(self, path: str | Path, lo: int, hi: int, chunk: int = CHUNK,
                 run: int = RUN, merge_block: int = MERGE_BLOCK, fan_in: int = FAN_IN) -> None:
        self.path, self.source = Path(path), str(path)
        self.first_record, self.chunk, self.merge_block = lo, chunk, merge_block
        self.fan_in = fan_in
        self._tmp: tempfile.TemporaryDirectory | None = None
        with open(self.path, "rb") as f:
            f.seek(lo * RECORD)
            head = np.fromfile(f, dtype="<u8", count=4)
        if int(head[3]) != MAGIC:
            raise AllocTraceError(self.source, lo, f"a START record without the recorder's "
                                                   f"magic ({int(head[3]):#x}, expected "
                                                   f"{MAGIC:#x})")
        self.pid = int(head[2])
        if self._in_call_order(lo, hi):
            self._sorted, self._words, self._span = self.path, 4, (lo, hi)
        else:  # a file of 5-word records (the fifth: the record number), in call order
            self._sorted, records = self._external_sort(lo, hi, run)
            self._words, self._span = 5, (0, records)
        self._index()

    # -- putting the records in call order -------------------------------------------------

    def _in_call_order(self, lo: int, hi: int) -> bool:
        last = -1
        for w in _blocks(self.path, lo, hi, 4, self.chunk):
            w = w[is_record(w)]
            if not len(w):
                continue
            seq = (w[:, 0] & np.uint64(SEQ_MASK)).astype(np.int64)
            if seq[0] <= last or (len(seq) > 1 and not np.all(seq[1:] > seq[:-1])):
                return False
            last = int(seq[-1])
        return True

    def _external_sort(self, lo: int, hi: int, run: int) -> tuple[Path, int]:
        """Sorted runs of `run` slots' records (each record with its record number as a fifth
        word), merged into one file in call order, and its number of records; a number written
        twice keeps file order."""
        self._tmp = tempfile.TemporaryDirectory(prefix="purgecheck-sort-")
        tmp = Path(self._tmp.name)
        runs: list[tuple[Path, int]] = []
        start = lo
        for w in _blocks(self.path, lo, hi, 4, run):
            live = np.flatnonzero(is_record(w))
            seq = w[live, 0] & np.uint64(SEQ_MASK)
            order = live[np.argsort(seq, kind="stable")]
            out = np.empty((len(order), 5), dtype="<u8")
            out[:, :4] = w[order]
            out[:, 4] = order.astype(np.uint64) + np.uint64(start)
            name = tmp / f"run{len(runs)}"
            out.tofile(name)
            runs.append((name, len(order)))
            start += len(w)
        fan_in = self.fan_in
        while len(runs) > 1:  # at most fan_in runs merged at once: bounded memory
            runs = [self._merge(runs[k:k + fan_in], tmp / f"run{len(runs)}-{k}")
                    for k in range(0, len(runs), fan_in)]
        return runs[0]

    def _merge(self, runs: list[tuple[Path, int]], out: Path) -> tuple[Path, int]:
        """Sorted runs merged into one (by call number, then record number)."""
        if len(runs) == 1:
            return runs[0]
        merge_runs(runs, out, self.merge_block)
        for p, _ in runs:
            p.unlink()
        return out, sum(n for _, n in runs)

    def _blocks_in_order(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(index of the first, its records (n, 4), their record numbers) in call order."""
        lo, hi = self._span
        i = 0
        at = lo  # the file's record number of w[0] (in the file's own order)
        for w in _blocks(self._sorted, lo, hi, self._words, self.chunk):
            if self._words == 5:
                recno = w[:, 4]
            else:  # the file itself: the slots never written are left out here
                live = is_record(w)
                recno = np.arange(at, at + len(w), dtype=np.uint64)[live]
                at += len(w)
                w = w[live]
            if len(w):
                yield i, w[:, :4], recno
                i += len(w)

    # -- the pass that finds the cut and each thread's last record ---------------------------

    def _index(self) -> None:
        """The cut (the first call number missing), each thread's last record before it, and
        a number written twice anywhere in the image (an error, as read_trace says)."""
        self.cut: int | None = None
        self.ended = self.execed = self.has_malloc = False
        self.last: dict[int, int] = {}
        self.refused = self.main_thread = 0
        prev = -1
        records = 0
        for i, w, recno in self._blocks_in_order():
            records = i + len(w)
            seq = (w[:, 0] & np.uint64(SEQ_MASK)).astype(np.int64)
            if i == 0:
                self.refused = int((w[0, 1] >> np.uint64(48)) & np.uint64(0xFF))
                self.main_thread = int((w[0, 0] >> np.uint64(40)) & np.uint64(0xFFFF))
            dup = np.flatnonzero(seq == np.concatenate(([prev], seq[:-1])))
            if len(dup):
                j = int(dup[0])
                raise AllocTraceError(self.source, int(recno[j]), f"sequence number "
                                                                  f"{int(seq[j])} written twice "
                                                                  f"(expected each once)")
            prev = int(seq[-1])
            if self.cut is not None:
                continue  # past the cut: only looking for a number written twice
            gaps = np.flatnonzero(seq != np.arange(i, i + len(w), dtype=np.int64))
            stop = int(gaps[0]) if len(gaps) else len(w)
            kind = (w[:stop, 0] >> np.uint64(56)).astype(np.uint8)
            thread = ((w[:stop, 0] >> np.uint64(40)) & np.uint64(0xFFFF)).astype(np.int64)
            uniq, from_end = np.unique(thread[::-1], return_index=True)
            for t, j in zip(uniq.tolist(), from_end.tolist()):
                self.last[t] = i + stop - 1 - j
            self.ended |= bool(np.any(kind == KIND["end"]))
            self.execed |= bool(np.any(kind == KIND["exec"]))
            self.has_malloc |= bool(np.any(kind == KIND["malloc"]))
            if len(gaps):
                self.cut = i + stop
        self.n = self.cut if self.cut is not None else records

    # -- what the conversion reads -----------------------------------------------------------

    @property
    def sorted_in_file(self) -> bool:
        """Whether the file had the image in call order (no external sort was needed)."""
        return self._words == 4

    def in_order(self) -> tuple[str, int, int, int]:
        """(path, words a record, lo, hi) of the file that holds the image in call order
        (records.RecordImage reads it without numpy; the sorted file lives as long as this
        image)."""
        return (str(self._sorted), self._words, *self._span)

    def rows(self, start: int = 0) -> Iterator[tuple]:
        """(index, kind, thread, flags, a, r, record number) in call order, up to the cut."""
        for i, w, recno in self._blocks_in_order():
            if i + len(w) <= start:
                continue
            if i >= self.n:
                return
            hi = min(len(w), self.n - i)
            w0, w1 = w[:hi, 0], w[:hi, 1]
            yield from zip(range(i, i + hi), (w0 >> np.uint64(56)).tolist(),
                           ((w0 >> np.uint64(40)) & np.uint64(0xFFFF)).tolist(),
                           ((w1 >> np.uint64(48)) & np.uint64(0xFF)).tolist(),
                           w[:hi, 2].tolist(), w[:hi, 3].tolist(), recno[:hi].tolist())


def stream_images(path: str | Path, chunk: int = CHUNK, run: int = RUN) -> list[StreamImage]:
    return [StreamImage(path, lo, hi, chunk, run) for lo, hi in image_spans(path, chunk)]
