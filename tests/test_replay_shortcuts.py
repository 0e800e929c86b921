"""Process.free's shortcuts (issue 29, eighth round): a free that ends in a tcache bin with
room, or that bin full in a fastbin, is made by Process.free itself (tcache_put,
push_fastbin) instead of through free_chunk and int_free. A process with the shortcuts and
one without (`Process.shortcuts = False`: every free through free_chunk) run the same ops
in lockstep, and their whole state must be equal after every op."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.glibc import process as process_module
from model.glibc.process import Process
from model.glibc.versions import VERSIONS
from purgecheck.formats.glibc_ops import parse_script
from purgecheck.glibc.fromtrace import to_ops
from purgecheck.glibc.modelrun import OPS, handlers
from purgecheck.glibc.replay import load_stream
from purgecheck.glibc.workloads import WORKLOADS

DATA = Path(__file__).parent / "data"


class Plain(Process):
    shortcuts = False  # every free through free_chunk and int_free


def state(p: Process) -> tuple:
    """Every part of the process a free can change: each block's chunk, each arena's chunks
    in address order, bins in order, fastbins and tcaches in order, the system calls, the
    resident pages and their counters."""
    def chunk(c):
        return c.addr, c.size, c.state, c.bin

    arenas = tuple((tuple(chunk(c) for seg in av.segments for c in seg.in_order()),
                    tuple(chunk(c) for c in av.bins.chunks()),
                    tuple((size, tuple(c.addr for c in cs)) for size, cs in av.fastbins.items()),
                    av.top and chunk(av.top), av.last_remainder, len(av.trims))
                   for av in p.arenas)
    tcaches = tuple((tid, t.tcache and tuple(tuple(c.addr for c in b) for b in t.tcache))
                    for tid, t in p.threads.items())
    r = p.resident
    return (tuple((b, chunk(c)) for b, c in p.blocks.items()), arenas, tcaches,
            tuple(p.calls), r.pages, r.faults, r.refaults, r.dropped, tuple(r.runs()))


def lockstep(ops, version: str) -> int:
    """Run `ops` (thread, name, args) on both processes, comparing after each; the frees
    that took a shortcut."""
    fast, plain = Process(VERSIONS[version]), Plain(VERSIONS[version])
    do_fast, do_plain = handlers(fast), handlers(plain)
    for n, (thread, name, args) in enumerate(ops):
        do_fast[name](thread, *args)
        do_plain[name](thread, *args)
        assert state(fast) == state(plain), f"op {n}: {name} {thread} {args}"
    return sum(name == "free" for _, name, _ in ops)


def script_ops(text: str) -> list:
    return [(op.thread, op.name, op.args) for op in parse_script(text) if op.name in OPS]


# tcache bins filled, then fastbins behind them (40 bytes), and chunks too large for a
# fastbin (600 bytes) behind a full tcache bin, kept apart by small blocks still live
FILL_THEN_FASTBIN = "".join(f"0 malloc {i} 40\n0 malloc {i + 100} 600\n0 malloc {i + 200} 24\n"
                            for i in range(12)) + \
    "".join(f"0 free {i}\n0 free {i + 100}\n" for i in range(12))


@pytest.mark.parametrize("version", ["2.21", "2.23+"])  # no tcache, and tcache first
def test_the_free_shortcuts_give_what_free_chunk_gives(version):
    """On the mixed workload, tcache bins filled then fastbins, and xz -T2's recording
    (threads, reallocs), the two processes agree after every op. Fails on a shortcut that
    pushes chunks larger than a fastbin's to a fastbin, or that puts a chunk in the tcache
    bin below its own (below)."""
    frees = 0
    for text in (WORKLOADS["mixed"].script(quick=True), FILL_THEN_FASTBIN):
        frees += lockstep(script_ops(text), version)
    img, _ = load_stream(DATA / "xz-T2.rec")
    frees += lockstep([(op.thread, op.name, op.args) for op in to_ops(img)], version)
    assert frees > 200


@pytest.mark.parametrize("where, name, broken", [
    ("MAX_FAST_CHUNK", "a fastbin shortcut for chunks up to 1 KiB", 1024),
    ("MINSIZE", "a shortcut that puts a chunk in the tcache bin below its own", 48),
])
def test_a_shortcut_that_differs_is_caught(monkeypatch, where, name, broken):
    monkeypatch.setattr(process_module, where, broken)
    with pytest.raises(AssertionError, match="op "):
        lockstep(script_ops(FILL_THEN_FASTBIN), "2.23+")
