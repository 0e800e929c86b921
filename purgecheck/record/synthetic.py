"""A synthetic program's allocation trace, written as the recorder writes one (docs/record.md).

For the replay's benchmark and tests at sizes no recording here reaches quickly (10 M calls):
`threads` threads take turns, one call each; each keeps `live` blocks, freeing its oldest
and allocating a new one (sizes 16..4,000 bytes, and a 200 KB block now and then, which
glibc maps). Each thread's records go through a buffer of `buffer` records, written to the
file when it is full, a layout like the recorder's windows of the file (a thread's records
together, the threads' blocks in turn; the recorder's slots never written aside): the file
is not in call order, so a reader must sort. Addresses are reused (a block takes the slot of one freed
before), as a heap's are. Written a chunk at a time: memory does not grow with `calls`.

    .venv/bin/python -m purgecheck.record.synthetic OUT CALLS [--threads N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from purgecheck.formats.alloc_trace import KIND, MAGIC, RECORD, encode

PERIODS = 64  # buffers of every thread generated at a time
BASE = 0x5555_6000_0000
THREAD_SPAN = 1 << 32


def _with_checks(w: np.ndarray) -> bytes:
    """Records (n, 4) as bytes, each with its check byte (0xA5 xor the 31 others)."""
    raw = np.ascontiguousarray(w, dtype="<u8").view(np.uint8).reshape(-1, RECORD)
    raw[:, 15] = 0
    raw[:, 15] = np.bitwise_xor.reduce(raw, axis=1) ^ np.uint8(0xA5)
    return raw.tobytes()


def _body(j: np.ndarray, t: np.ndarray, threads: int, live: int) -> np.ndarray:
    """The records of thread t's call number j (local to the thread), as (n, 4) words."""
    d = j - live
    is_free = (d >= 0) & (d % 2 == 0)
    block = np.where(d < 0, j, np.where(is_free, d // 2, live + d // 2))
    addr = (np.uint64(BASE) + t.astype(np.uint64) * np.uint64(THREAD_SPAN)
            + (block % (2 * live)).astype(np.uint64) * np.uint64(64))
    size = 16 + (block * 2654435761 + t * 40503) % 4000
    size = np.where(block % 997 == 0, 200_000, size).astype(np.uint64)
    seq = (threads + j * threads + t).astype(np.uint64)
    kind = np.where(is_free, KIND["free"], KIND["malloc"]).astype(np.uint64)
    w = np.empty((len(j), 4), dtype=np.uint64)
    w[:, 0] = seq | t.astype(np.uint64) << np.uint64(40) | kind << np.uint64(56)
    w[:, 1] = seq * np.uint64(100)  # ns: 100 a call
    w[:, 2] = np.where(is_free, addr, size)
    w[:, 3] = np.where(is_free, np.uint64(0), addr)
    return w


def write_synthetic(path: str | Path, calls: int, threads: int = 4, buffer: int = 256,
                    live: int = 64, pid: int = 4242) -> int:
    """Write about `calls` malloc/free records (a multiple of `threads`) and the thread and
    process records around them; returns the number of records written."""
    per_thread = max(live, calls // threads)
    n = 0
    with open(path, "wb") as f:
        head = [encode(0, 0, "start", a=pid, r=MAGIC)]
        head += [encode(k, 0, "thread_new", a=k) for k in range(1, threads)]
        f.write(b"".join(head))
        n += len(head)
        step = buffer * PERIODS
        for lo in range(0, per_thread, step):
            hi = min(lo + step, per_thread)
            # file order: buffer after buffer, and within one flush round thread 0 first
            # (its buffer fills first: the threads take turns)
            j = np.arange(lo, hi)
            group = j // buffer
            jj = np.tile(j, threads)
            tt = np.repeat(np.arange(threads), len(j))
            order = np.lexsort((jj, tt, np.tile(group, threads)))
            f.write(_with_checks(_body(jj[order], tt[order], threads, live)))
            n += len(order)
        seq = threads + per_thread * threads
        tail = [encode(seq + k - 1, k, "thread_exit") for k in range(1, threads)]
        tail.append(encode(seq + threads - 1, 0, "end"))
        f.write(b"".join(tail))
        n += len(tail)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("calls", type=int)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args(argv)
    print(write_synthetic(args.out, args.calls, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
