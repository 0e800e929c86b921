"""The chunk addresses of a segment in address order, with O(log n) insert and delete.

A thread heap or the main arena's break can hold hundreds of thousands of chunks (a recorded
perl hash workload: 900,000 live blocks). A plain sorted list pays a copy of its whole tail
for every chunk split or merged in the middle of the heap; this keeps the addresses as a
list of short sorted blocks (at most 2 x BLOCK each) and the last address of each block, so
an insert, a delete or a predecessor costs two bisections and a copy of one short block.
It stands for a sorted list and nothing more: tests/test_replay_speed.py checks it against
one after every operation, and the segments' addresses against their chunks after every op
of a replay.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Iterator

BLOCK = 512  # a block is split in two when it reaches 2 x BLOCK addresses


class SortedAddrs:
    """A sorted set of ints: add, remove, `before` (the greatest below x), `[0]`, `[-1]`,
    iteration in order, len."""

    __slots__ = ("blocks", "maxes", "n", "block")

    def __init__(self, block: int = BLOCK) -> None:
        self.blocks: list[list[int]] = []  # each sorted; all of block k below block k + 1
        self.maxes: list[int] = []  # the last address of each block
        self.n = 0
        self.block = block

    def __len__(self) -> int:
        return self.n

    def __bool__(self) -> bool:
        return self.n > 0

    def __iter__(self) -> Iterator[int]:
        for b in self.blocks:
            yield from b

    def __getitem__(self, i: int) -> int:
        if not -self.n <= i < self.n:
            raise IndexError("address index out of range")
        if i == -1:
            return self.maxes[-1]
        if i < 0:
            i += self.n
        for b in self.blocks:
            if i < len(b):
                return b[i]
            i -= len(b)
        raise IndexError("address index out of range")  # not reached

    def add(self, x: int) -> None:
        maxes = self.maxes
        self.n += 1
        if maxes and x > maxes[-1]:  # above every address (the top chunk moving up): append
            k = len(maxes) - 1
            b = self.blocks[k]
            b.append(x)
            maxes[k] = x
        elif not maxes:
            self.blocks.append([x])
            maxes.append(x)
            return
        else:
            k = bisect_left(maxes, x)
            b = self.blocks[k]
            insort(b, x)
        if len(b) >= 2 * self.block:
            half = b[self.block:]
            del b[self.block:]
            self.blocks.insert(k + 1, half)
            maxes[k] = b[-1]
            maxes.insert(k + 1, half[-1])

    def remove(self, x: int) -> None:
        """x must be present (a KeyError otherwise: a chunk the segment never held)."""
        maxes = self.maxes
        k = bisect_left(maxes, x)
        b = self.blocks[k] if k < len(maxes) else None
        i = bisect_left(b, x) if b is not None else 0
        if b is None or i == len(b) or b[i] != x:
            raise KeyError(x)
        del b[i]
        self.n -= 1
        if not b:
            del self.blocks[k]
            del maxes[k]
        elif i == len(b):
            maxes[k] = b[-1]

    def before(self, x: int) -> int | None:
        """The greatest address below x, None if there is none."""
        maxes = self.maxes
        k = bisect_left(maxes, x)
        if k < len(maxes):
            b = self.blocks[k]
            i = bisect_left(b, x)
            if i:
                return b[i - 1]
        return maxes[k - 1] if k else None
