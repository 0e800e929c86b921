"""heaptrack recordings (`heaptrack -o FILE CMD`) as a glibc op script (docs/record.md).

A heaptrack file is zstd- or gzip-compressed text, one record a line, after heaptrack's own
interpretation (file format version 1 and later; every number hexadecimal). The lines the
replay reads:

    v VERSION FILE_VERSION   the heaptrack version and the file format's
    a SIZE TRACE             an allocation record: a (size, stack) pair, numbered from 0 in
                             the order of the `a` lines
    + N                      an allocation of allocation record N
    - N                      a deallocation of an allocation of allocation record N
    c MS                     a timestamp (milliseconds since the start)

and the lines that describe the program and its stacks (X, I, s, i, t, R, A, S, #), which the
replay skips; the command line (X) is written as it is, line breaks included, so the replay
skips from it to the system information line (I) that heaptrack writes next.

What heaptrack does not keep, and what the replay does instead:

- a deallocation names an allocation record, not a block: when several blocks of the same
  size from the same stack are live, the replay frees the most recent of them (LIFO);
- no thread: every call is replayed on thread 0 (one arena, the main one);
- the order is the file's; timestamps are sparse (one line now and then), so calls between
  two of them have no order but the file's;
- realloc, calloc and the aligned calls are not told apart: each is an allocation of its
  size (a realloc is a free of the old block and an allocation of the new one).
"""

from __future__ import annotations

import gzip
import io
import re
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

from purgecheck.formats.glibc_ops import GlibcOp
from purgecheck.formats import excerpt

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
HEX = re.compile(r"[0-9a-fA-F]{1,16}")  # heaptrack's numbers: unsigned, at most 64 bits
SKIPPED = set("XIsitRAS#")  # the program, its stacks, its RSS: nothing the heap replays


class HeaptrackError(Exception):
    """A heaptrack file the replay cannot read: names the file, the line, what was expected."""

    def __init__(self, source: str, line: int, msg: str) -> None:
        super().__init__(f"{source}: line {line}: {msg}")
        self.source, self.line, self.msg = source, line, msg


def is_heaptrack(path: str | Path) -> bool:
    """A zstd or gzip file: heaptrack writes its recordings so, the recorder never does. Told
    by the magic alone, so that a damaged heaptrack file is answered as one (its version line
    missing, its stream cut), not as a recorder trace without a START record."""
    with open(path, "rb") as f:
        head = f.read(4)
    return head == ZSTD_MAGIC or head[:2] == GZIP_MAGIC


class _text:
    """The decompressed lines of a heaptrack file, streamed (zstd through `zstdcat`), read to
    the stream's end: a stream cut short or damaged is a HeaptrackError naming the line
    reached and the compressed byte, never a shorter program."""

    def __init__(self, path: Path) -> None:
        self.path, self.proc, self.raw = path, None, None

    def __enter__(self) -> Iterator[str]:
        with open(self.path, "rb") as f:
            zstd = f.read(4) == ZSTD_MAGIC
        if not zstd:
            self.raw = open(self.path, "rb")
            stream = io.TextIOWrapper(gzip.GzipFile(fileobj=self.raw), encoding="utf-8",
                                      errors="replace")
            return self._checked(stream, "gzip")
        try:
            self.proc = subprocess.Popen(["zstdcat", str(self.path)], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True,
                                         errors="replace")
        except FileNotFoundError:
            raise HeaptrackError(str(self.path), 0, "zstd-compressed: needs zstdcat (Debian "
                                                    "package zstd)") from None
        return self._checked(self.proc.stdout, "zstd")

    def _checked(self, stream: IO[str], kind: str) -> Iterator[str]:
        src, size = str(self.path), self.path.stat().st_size
        no = 0
        try:
            for no, line in enumerate(stream, 1):
                yield line
        except (EOFError, OSError, zlib.error) as e:  # gzip: cut (EOFError) or damaged
            at = self.raw.tell() if self.raw is not None else size
            raise HeaptrackError(src, no + 1, f"the gzip stream is cut short or damaged at "
                                              f"compressed byte {at:,} of {size:,} ({e}); "
                                              f"expected it whole") from None
        if self.proc is not None:
            why = self.proc.stderr.read().strip()
            if self.proc.wait() != 0:
                where = f"ends at byte {size:,}, the file's end, inside a frame" \
                    if "premature end" in why else f"is damaged ({excerpt(why, 120)})"
                raise HeaptrackError(src, no + 1, f"the {kind} stream {where}; expected it "
                                                  f"whole")

    def __exit__(self, *exc) -> None:
        if self.raw is not None:
            self.raw.close()
        if self.proc is not None:
            self.proc.stdout.close()
            self.proc.stderr.close()
            self.proc.kill()
            self.proc.wait()


@dataclass
class HeaptrackImage:
    """A heaptrack file, read by `glibc_ops` each time it is replayed (bounded memory: the
    allocation records' sizes and the live blocks)."""

    path: Path
    pid: int = 0
    refused: int = 0
    now_ms: float = 0.0  # the last `c` line read by glibc_ops: the time of the op it yields

    @property
    def source(self) -> str:
        return str(self.path)

    def glibc_ops(self, stats=None) -> Iterator[GlibcOp]:
        """The allocations and deallocations as ops of thread 0; `line` is the file's line.
        `stats` (a fromtrace.Conversion) counts ops, the most blocks live, what was left out."""
        from heapq import heappop, heappush

        src = self.source
        sizes: list[int] = []
        live: dict[int, list[int]] = {}  # allocation record -> its live blocks' ids, oldest first
        free_ids: list[int] = []
        next_id = n_live = 0
        self.now_ms = 0.0
        version_seen = in_command = False
        with _text(self.path) as lines:
            for no, line in enumerate(lines, 1):
                mode = line[:1]
                if in_command and mode != "I":
                    continue  # the command line's own line breaks (python3 -c 'a\nb')
                if mode in SKIPPED or not line.strip():
                    in_command = mode == "X"
                    continue
                words = line.split()
                if not all(HEX.fullmatch(w) for w in words[1:3]):  # int(w, 16) takes -1, 0x1
                    raise HeaptrackError(src, no, f"expected hexadecimal numbers after "
                                                  f"{mode!r}, got {excerpt(line.strip())}")
                values = [int(w, 16) for w in words[1:3]]
                if mode == "v":
                    if len(values) < 2 or values[1] < 1:
                        raise HeaptrackError(src, no, "expected `v VERSION FILE_VERSION` with "
                                                      "file format version 1 or later")
                    version_seen = True
                    continue
                if not version_seen:
                    raise HeaptrackError(src, no, f"expected heaptrack's version line first, "
                                                  f"got {excerpt(line.strip())}")
                if mode == "a":
                    if len(values) != 2:
                        raise HeaptrackError(src, no, "expected `a SIZE TRACE`")
                    sizes.append(values[0])
                elif mode == "+" or mode == "-":
                    if len(values) != 1 or values[0] >= len(sizes):
                        raise HeaptrackError(src, no, f"expected `{mode} N` with N an "
                                                      f"allocation record (0..{len(sizes) - 1})")
                    rec = values[0]
                    if mode == "+":
                        if free_ids:
                            block = heappop(free_ids)
                        else:
                            block, next_id = next_id, next_id + 1
                        live.setdefault(rec, []).append(block)
                        n_live += 1
                        if stats is not None:
                            stats.ops += 1
                            stats.max_live = max(stats.max_live, n_live)
                        yield GlibcOp(0, "malloc", (block, sizes[rec]), no)
                    else:
                        blocks = live.get(rec)
                        if not blocks:  # heaptrack attached late: it saw no such allocation
                            if stats is not None:
                                stats.skip("deallocation with no live allocation of its record")
                            continue
                        block = blocks.pop()  # the most recent block of the record (LIFO)
                        heappush(free_ids, block)
                        n_live -= 1
                        if stats is not None:
                            stats.ops += 1
                        yield GlibcOp(0, "free", (block,), no)
                elif mode == "c":
                    if values:
                        self.now_ms = max(self.now_ms, float(values[0]))
                    continue
                else:
                    raise HeaptrackError(src, no, f"unknown line kind {mode!r} (expected one "
                                                  f"of v a + - c and {''.join(sorted(SKIPPED))})")
        if not version_seen:
            raise HeaptrackError(src, 0, "expected heaptrack's version line, got an empty file")
