"""Allocation traces for `purgecheck simulate`: what a program called, and when.

One call per line, `T_MS THREAD OP [NAME [SIZE]]` (docs/simulate.md), `#` to the end of the
line a comment:

    0.00 1 malloc 7 262144     at 0 ms thread 1 allocates 256 KiB, names it 7
    0.36 1 free 7              and frees it 0.36 ms later
    0.36 1 loop                its loop has nothing to do (a request ended)
    1.50 2 realloc 9 4096      thread 2 resizes allocation 9

Times are milliseconds from the start (a decimal number, never going back), threads and
names are integers, sizes bytes; a name is live from its malloc to its free. Every error
names the file, the line and what was expected.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple


class Call(NamedTuple):
    """One call of the program at `t_ms` on `thread`. `op` is malloc (name, size), free
    (name), realloc (name, size: the block keeps its name), or `loop`: the thread's loop has
    nothing to do until its next call (a request ended; where an event loop parks or sweeps
    inline). `request` is True on the call that ends a request (counted per request), or the
    number of requests it ends (a loop turn that serves several)."""

    t_ms: float
    thread: int
    op: str
    name: int = 0
    size: int = 0
    request: bool | int = False


MAX_THREAD = 1 << 16
MAX_NAME = (1 << 63) - 1
MAX_SIZE = 1 << 30  # 1 GiB: residency is per OS page, so a block costs its size / 4 KiB
ARITY = {"malloc": 2, "realloc": 2, "free": 1, "loop": 0}


class CallTraceError(ValueError):
    """A line the reader cannot take: `file:line: what was expected`."""


def _int(word: str, what: str, lo: int, hi: int, where: str) -> int:
    try:
        v = int(word)
    except ValueError:
        raise CallTraceError(f"{where}: {what}: expected an integer, found {word[:40]!r}")
    if not lo <= v <= hi:
        raise CallTraceError(f"{where}: {what}: {v} is outside {lo}..{hi}")
    return v


def read_calls(lines, source: str = "<trace>") -> Iterator[Call]:
    """The calls of a trace, checked line by line as they are read (a trace may be long)."""
    last_t = 0.0
    live: set[int] = set()
    for n, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{n}"
        words = line.split()
        if len(words) < 3:
            raise CallTraceError(f"{where}: expected `T_MS THREAD OP [NAME [SIZE]]`, found "
                                 f"{line[:60]!r}")
        try:
            t = float(words[0])
        except ValueError:
            raise CallTraceError(f"{where}: T_MS: expected a time in ms, found {words[0][:40]!r}")
        if not (t >= last_t) or t > 1e12:  # also refuses nan
            raise CallTraceError(f"{where}: T_MS: {words[0]} goes back from {last_t:g} ms (or "
                                 f"is not a finite time)")
        last_t = t
        thread = _int(words[1], "THREAD", 0, MAX_THREAD, where)
        op = words[2]
        if op not in ARITY:
            raise CallTraceError(f"{where}: OP: expected one of {', '.join(ARITY)}, found "
                                 f"{op[:40]!r}")
        args = words[3:]
        if len(args) != ARITY[op]:
            raise CallTraceError(f"{where}: {op} takes {ARITY[op]} argument(s), found "
                                 f"{len(args)}")
        name = _int(args[0], "NAME", 0, MAX_NAME, where) if args else 0
        size = _int(args[1], "SIZE", 1, MAX_SIZE, where) if len(args) > 1 else 0
        if op == "malloc":
            if name in live:
                raise CallTraceError(f"{where}: malloc: {name} is live already (freed first?)")
            live.add(name)
        elif op in ("free", "realloc") and name not in live:
            raise CallTraceError(f"{where}: {op}: no live allocation named {name}")
        if op == "free":
            live.discard(name)
        yield Call(t, thread, op, name, size, request=(op == "loop"))


def write_calls(calls, out) -> None:
    """The calls as trace lines (what `read_calls` reads)."""
    for c in calls:
        args = {"malloc": f" {c.name} {c.size}", "realloc": f" {c.name} {c.size}",
                "free": f" {c.name}", "loop": ""}[c.op]
        out.write(f"{c.t_ms:.3f} {c.thread} {c.op}{args}\n")
