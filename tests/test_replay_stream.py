"""A trace replays in bounded memory (issue 16): the streaming reader
(purgecheck/formats/alloc_stream.py) gives the in-memory reader's ops, including where the
file is out of call order (external sort in several merge rounds) and where it is cut, and
the memory it needs does not grow with the trace's length (tracemalloc, in-process)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from purgecheck.formats.alloc_stream import SEQ_MASK, StreamImage, image_spans, merge_runs
from purgecheck.formats.alloc_trace import RECORD, read_trace
from purgecheck.glibc.fromtrace import Conversion, to_ops
from purgecheck.glibc.replay import load_stream, replay
from purgecheck.record.synthetic import write_synthetic


def stream(path, chunk=1024, **kw) -> StreamImage:
    (lo, hi), = image_spans(path, chunk)
    return StreamImage(path, lo, hi, chunk, **kw)


def test_streaming_gives_the_ops_of_the_in_memory_reader(tmp_path):
    path = tmp_path / "t.rec"
    write_synthetic(path, 12_000, threads=5, buffer=64)
    img = read_trace(path).images[0]
    s = stream(path, chunk=500, run=200, fan_in=16)  # 60 runs: two merge rounds of 16
    assert not s.sorted_in_file  # the buffers reached the file out of call order
    a, b = Conversion(), Conversion()
    assert list(to_ops(img, a)) == list(to_ops(s, b)) and a == b and a.ops > 12_000
    assert s.cut is None and img.cut is None and s.ended


def test_a_cut_trace_is_cut_where_the_in_memory_reader_cuts_it(tmp_path):
    path = tmp_path / "t.rec"
    write_synthetic(path, 6_000, threads=3, buffer=50)
    data = path.read_bytes()
    keep = len(data) // RECORD // 2 + 7  # killed: thread 0's buffer written, the others' not
    path.write_bytes(data[:keep * RECORD])
    img = read_trace(path).images[0]
    s = stream(path, chunk=300, run=700)
    assert img.cut is not None and s.cut == img.cut and not s.ended
    assert list(to_ops(img)) == list(to_ops(s))


def with_unwritten_slots(data: bytes, every: int) -> bytes:
    """The records of `data` with a slot never written after every `every`-th: 32 zero bytes,
    or a record in flight at a kill (words 1..3 stored, word 0 not yet), as the recorder's
    mapped file holds them (docs/record.md, "Whole records")."""
    in_flight = bytes(8) + b"\xff" * 24
    out = bytearray()
    for i in range(0, len(data), RECORD):
        out += data[i:i + RECORD]
        if (i // RECORD) % every == every - 1:
            out += bytes(RECORD) if (i // RECORD) % 2 else in_flight
    return bytes(out + bytes(RECORD) * 40)  # and the room extended ahead, at the end


def calls(ops) -> list[tuple]:
    """The ops without their record numbers (the slots never written move them)."""
    return [(op.thread, op.name, op.args) for op in ops]


@pytest.mark.parametrize("threads", [1, 4])  # in call order in the file, and sorted
def test_both_readers_skip_the_slots_never_written(tmp_path, threads):
    path = tmp_path / "t.rec"
    write_synthetic(path, 3_000, threads=threads, buffer=64)
    want = calls(to_ops(read_trace(path).images[0]))
    records = path.stat().st_size // RECORD
    path.write_bytes(with_unwritten_slots(path.read_bytes(), 7))
    trace = read_trace(path)
    assert trace.records == records  # the slots never written not counted
    s = stream(path, chunk=300, run=700)
    assert s.sorted_in_file == (threads == 1)
    ops = list(to_ops(trace.images[0]))
    assert calls(ops) == want and ops == list(to_ops(s))  # the same record numbers too
    assert s.cut is None and trace.images[0].cut is None and s.ended


def test_replay_reads_the_stream_and_predicts_what_the_in_memory_image_predicts(tmp_path):
    path = tmp_path / "t.rec"
    write_synthetic(path, 4_000)
    img, _ = load_stream(path)
    assert isinstance(img, StreamImage)
    rep = replay(path, ["2.23+"], {}, {}, real=False)
    from purgecheck.glibc.replay import predict
    counts, _, _ = predict(read_trace(path).images[0], ["2.23+"], {})
    assert rep.predicted == counts and counts["2.23+"]["chunk_mmap"] >= 1


def peak_bytes(run) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def streamed(path):
    # sizes small enough that both traces reach the bound: more than fan_in runs, each run at
    # least a merge block (the bound is fan_in merge blocks, a chunk and a run)
    for _ in to_ops(stream(path, chunk=256, run=128, merge_block=64, fan_in=16)):
        pass


def in_memory(path):
    for _ in to_ops(read_trace(path).images[0]):
        pass


@pytest.fixture(scope="module")
def short_and_long(tmp_path_factory):
    d = tmp_path_factory.mktemp("sizes")
    write_synthetic(d / "short.rec", 3_000)
    write_synthetic(d / "long.rec", 30_000)
    return d / "short.rec", d / "long.rec"


def test_memory_does_not_grow_with_the_trace(short_and_long):
    short, long_ = short_and_long
    a, b = peak_bytes(lambda: streamed(short)), peak_bytes(lambda: streamed(long_))
    print(f"streaming peak: {a:,} bytes for 3k calls, {b:,} for 30k")
    assert b < 1.5 * a


def test_the_in_memory_reader_fails_the_same_bound(short_and_long):
    """The broken variant: a reader that holds the whole image grows with it."""
    short, long_ = short_and_long
    a, b = peak_bytes(lambda: in_memory(short)), peak_bytes(lambda: in_memory(long_))
    print(f"in-memory peak: {a:,} bytes for 3k calls, {b:,} for 30k")
    assert not b < 1.5 * a


PEAK_OF_A_CHILD = ("import resource, sys; from purgecheck.bench import own_peak_kb; "
                   "print(own_peak_kb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")


def test_the_long_replays_peak_is_its_own_not_its_parents():
    """The benchmark's long replay runs in a child and reports its peak RSS: the child's own
    VmHWM. The broken variant, ru_maxrss, reports the parent's peak when subprocess starts
    the child with vfork+exec (Linux): a parent holding 160 MB makes a small child look big."""
    import subprocess
    import sys
    held = bytearray(160 << 20)
    held[::4096] = b"\1" * len(held[::4096])  # resident, page by page
    out = subprocess.run([sys.executable, "-c", PEAK_OF_A_CHILD], capture_output=True,
                         text=True, check=True).stdout.split()
    own, maxrss = int(out[0]), int(out[1])
    del held
    assert own < 100 << 10  # a bare interpreter: some 10 to 30 MB
    if maxrss >= 160 << 10:  # the parent's peak leaked into ru_maxrss (vfork on Linux)
        assert own < maxrss


def sorted_runs(tmp_path, rng, runs: int, rows: int) -> tuple[list, np.ndarray]:
    """Runs of 5-word records as the external sort writes them (each in key order: call
    number, then record number), many call numbers written more than once across runs and
    within one, some runs empty; and every row, for the reference sort."""
    out, every = [], []
    for k in range(runs):
        n = 0 if k % 5 == 3 else int(rng.integers(1, rows))
        w = np.zeros((n, 5), dtype="<u8")
        w[:, 0] = rng.integers(0, rows // 3, n).astype(np.uint64) | (np.uint64(7) << np.uint64(56))
        w[:, 1:4] = rng.integers(0, 1 << 60, (n, 3)).astype(np.uint64)
        w[:, 4] = rng.choice(1 << 20, n, replace=False).astype(np.uint64)
        w = w[np.lexsort((w[:, 4], w[:, 0] & np.uint64(SEQ_MASK)))]
        w.tofile(tmp_path / f"r{k}")
        out.append((tmp_path / f"r{k}", n))
        every.append(w)
    return out, np.concatenate(every)


def in_key_order(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort((rows[:, 4], rows[:, 0] & np.uint64(SEQ_MASK)))]


@pytest.mark.parametrize("block", [1, 3, 64, 10_000])
def test_the_merge_writes_every_row_in_key_order(tmp_path, block):
    rng = np.random.default_rng(block)
    runs, every = sorted_runs(tmp_path, rng, 9, 300)
    merge_runs(runs, tmp_path / "out", block)
    got = np.fromfile(tmp_path / "out", dtype="<u8").reshape(-1, 5)
    assert np.array_equal(got, in_key_order(every)) and len(got) > 600


def test_a_merge_without_the_bound_is_caught(tmp_path):
    """The broken variant: each step sorts the blocks held and writes them all, with no
    bound; a run's next block can then hold a lower key than one already written."""
    runs, every = sorted_runs(tmp_path, np.random.default_rng(1), 9, 300)
    readers = [np.fromfile(p, dtype="<u8").reshape(-1, 5) for p, _ in runs]
    got = np.concatenate([in_key_order(np.concatenate([r[k:k + 64] for r in readers]))
                          for k in range(0, 300, 64)])
    assert len(got) == len(every) and not np.array_equal(got, in_key_order(every))
