"""A program's allocation trace as timed calls for the simulator, whatever wrote it.

`purgecheck simulate TRACE` reads what `purgecheck replay` reads (a recorder's trace,
docs/record.md, with the image `--image` names; a heaptrack file) and the call format of
docs/simulate-guide.md, and turns each into one stream: (ms, GlibcOp). A recording goes
through the replay's own conversion (purgecheck/glibc/fromtrace.py, heaptrack.py), so the
glibc side of `simulate` runs the very ops `replay` runs, realloc, calloc and the aligned
calls included; each op carries its record's timestamp. A call trace becomes ops of the
same kinds, and its `loop` calls stay as `loop` ops (nothing to glibc). The mimalloc side
reads the same stream as calls (`purgecheck.simulate.mimalloc.calls_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from purgecheck.formats.alloc_trace import MAGIC, RECORD
from purgecheck.formats.calls import Call
from purgecheck.formats.glibc_ops import MAX_THREADS, GlibcOp
from purgecheck.glibc.fromtrace import Conversion
# the mimalloc side's reading lives beside the simulator (the PyPy engine imports no numpy);
# named here too because the benchmarks take it from here, and bench.compare runs this
# tree's benchmarks on older trees, where it was defined here
from purgecheck.simulate.mimalloc import calls_of  # noqa: F401

NS_MASK = (1 << 48) - 1
TIME_CHUNK = 4096  # ops whose record timestamps are read from the file at once
KEEP_OPS = 1_000_000  # a trace of up to this many ops is converted once, not once a pass

TimedOp = tuple[float, GlibcOp]


@dataclass
class Program:
    """A trace ready to simulate: `timed_ops()` gives a fresh stream each time."""

    name: str
    source: str
    kind: str  # "recording", "heaptrack" or "calls"
    make: Callable[[Conversion], Iterator[TimedOp]]
    image: int | None = None
    img: object = None  # the recording's image or heaptrack file (None: a call trace)
    conversion: Conversion = field(default_factory=Conversion)
    # the stream of a whole pass, kept when it has at most KEEP_OPS ops: the later passes
    # (each glibc version, each design) read it again instead of converting the trace again
    kept: list[TimedOp] | None = None

    def timed_ops(self) -> Iterator[TimedOp]:
        if self.kept is not None:
            return iter(self.kept)
        self.conversion = Conversion()
        return self._keeping(self.make(self.conversion))

    def _keeping(self, ops: Iterator[TimedOp]) -> Iterator[TimedOp]:
        """`ops` as they come, kept for the next pass once the pass ends (its conversion's
        figures, `conversion`, are then those of every pass: the conversion is
        deterministic)."""
        kept: list[TimedOp] | None = []
        for x in ops:
            if kept is not None:
                kept.append(x)
                if len(kept) > KEEP_OPS:
                    kept = None  # a long trace is read again each pass: memory stays bounded
            yield x
        self.kept = kept

    @property
    def prefix(self) -> str | None:
        """Why the figures cover only a prefix of the program's run, or None (as replay)."""
        from purgecheck.glibc.replay import prefix_reason
        return None if self.img is None else prefix_reason(self.img, self.conversion)


def is_recording(path: Path) -> bool:
    """A file that starts with the recorder's START record."""
    with open(path, "rb") as f:
        head = f.read(RECORD)
    return len(head) == RECORD and int.from_bytes(head[24:32], "little") == MAGIC


def load_program(path: Path, image: int | None = None) -> Program:
    """The trace at `path`, recognised by its content; errors are the readers' own
    (AllocTraceError, HeaptrackError, CallTraceError: one line naming the record)."""
    from purgecheck.formats.heaptrack import is_heaptrack
    from purgecheck.glibc.replay import load_stream, ops_of

    if is_heaptrack(path) or is_recording(path):
        img, n = load_stream(path, image)
        if img.refused:
            raise ValueError(f"{path}: the recording was refused (the program replaces malloc)")
        if hasattr(img, "glibc_ops"):  # heaptrack: its `c` lines' times
            def heaptrack_ops(stats: Conversion) -> Iterator[TimedOp]:
                for op in img.glibc_ops(stats):
                    yield img.now_ms, op
            return Program(path.name, str(path), "heaptrack", heaptrack_ops, 0, img)

        def recorded_ops(stats: Conversion) -> Iterator[TimedOp]:
            return _with_record_times(img, ops_of(img, stats))
        return Program(path.name, str(path), "recording", recorded_ops, n, img)
    if image is not None:
        raise ValueError("--image: a call trace has one image")
    calls = _read_calls(path)
    return Program(path.stem, str(path), "calls", lambda stats: ops_of_calls(calls, stats))


def _with_record_times(img, ops: Iterator[GlibcOp]) -> Iterator[TimedOp]:
    """Each op with its record's timestamp (ms since the image started), read from the file
    a chunk of ops at a time. The recorder's clocks never go back within a thread; across
    threads the call order rules, so a time never goes back here either."""
    words = np.memmap(img.path, dtype="<u8", mode="r").reshape(-1, 4)
    last = 0.0
    batch: list[GlibcOp] = []

    def flush() -> Iterator[TimedOp]:
        nonlocal last
        ns = (words[[op.line for op in batch], 1] & np.uint64(NS_MASK)).tolist()
        for op, t in zip(batch, ns):
            last = max(last, t / 1e6)
            yield last, op
        batch.clear()
    for op in ops:
        batch.append(op)
        if len(batch) == TIME_CHUNK:
            yield from flush()
    if batch:
        yield from flush()


def _read_calls(path: Path) -> list[Call]:
    from purgecheck.formats.calls import CallTraceError, read_calls
    try:
        with open(path, encoding="utf-8") as f:
            return list(read_calls(f, str(path)))
    except UnicodeDecodeError:
        raise CallTraceError(f"{path}: expected a call trace in UTF-8 text, a recording of "
                             f"`purgecheck record` or a heaptrack file") from None


def ops_of_calls(calls: list[Call], stats: Conversion | None = None) -> Iterator[TimedOp]:
    """A call trace as glibc ops at its times: its first thread is glibc's main thread,
    every other one is started at its first call and joined after its last (a script
    thread, the lowest of 1..63 free); a name is a block; `loop` stays (glibc ignores it)."""
    st = stats if stats is not None else Conversion()
    last = {c.thread: i for i, c in enumerate(calls)}
    slots: dict[int, int] = {}
    free_slots = list(range(MAX_THREADS - 1, 0, -1))
    live = 0
    for i, c in enumerate(calls):
        s = slots.get(c.thread)
        if s is None:
            if not slots:
                s = 0
            elif not free_slots:
                raise ValueError(f"{c.thread}: more than {MAX_THREADS - 1} threads at once")
            else:
                s = free_slots.pop()
                st.ops += 1
                yield c.t_ms, GlibcOp(s, "start", (), i)
            slots[c.thread] = s
        if c.op == "loop":
            yield c.t_ms, GlibcOp(s, "loop", (int(c.request),), i)
        else:
            st.ops += 1
            args = (c.name,) if c.op == "free" else (c.name, c.size)
            live += {"malloc": 1, "free": -1}.get(c.op, 0)
            st.max_live = max(st.max_live, live)
            yield c.t_ms, GlibcOp(s, c.op, args, i)
        if last[c.thread] == i and s:
            st.ops += 1
            del slots[c.thread]
            free_slots.append(s)
            free_slots.sort(reverse=True)
            yield c.t_ms, GlibcOp(s, "join", (), i)
