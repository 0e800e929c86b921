"""What a black box shows of its memory: /proc readings and the madvise calls under strace.

Seed 000 measured RSS and anonymous memory from smaps_rollup, page faults and instructions
with perf, and discards as madvise calls. Here: `/proc/PID/smaps_rollup` (Rss, Anonymous),
`/proc/PID/stat` (minor faults, user and kernel CPU of the whole process), and the process's
`madvise` calls as `strace -f --seccomp-bpf -e trace=madvise` logs them (only madvise stops the
process; the cost of that is measured by `purgecheck measure --no-strace` and `make bench`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
# The advices by which an allocator gives memory back without unmapping it: mimalloc's
# _mi_os_discard and its arena purge are MADV_DONTNEED on Linux (digest 3, 10); MADV_FREE is
# counted too, should a build use it.
DISCARD_ADVICES = ("MADV_DONTNEED", "MADV_FREE")


@dataclass(frozen=True)
class Stat:
    """The counters of /proc/PID/stat that a measurement reads."""

    minflt: int
    majflt: int
    utime_ms: float
    stime_ms: float


def read_stat(pid: int) -> Stat | None:
    """/proc/PID/stat of the whole process (all threads), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    # fields[0] is field 3 (state): minflt is field 10, majflt 12, utime 14, stime 15
    return Stat(int(fields[7]), int(fields[9]), int(fields[11]) * 1000 / CLK_TCK,
                int(fields[12]) * 1000 / CLK_TCK)


def read_rollup(pid: int) -> dict[str, int] | None:
    """Rss and Anonymous of /proc/PID/smaps_rollup in bytes, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            text = f.read()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Anonymous"):
            out[key.lower()] = int(rest.split()[0]) * 1024
    return out if len(out) == 2 else None


@dataclass(frozen=True)
class Madvise:
    t: float  # the wall clock (time.time()) of the call, as strace -ttt prints it
    length: int
    advice: str
    tid: int = 0  # the thread that made the call (strace -f prints it first)
    addr: int = 0  # the range's start (0 for NULL)


_CALL = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+madvise\((0x[0-9a-f]+|NULL), (\d+), (\w+)")


def strace_argv(strace: str, log: Path | str, argv: list[str], stacks: bool = False) -> list[str]:
    """`argv` run under strace, every thread's madvise calls logged to `log` with their times
    (and with `stacks`, each call's stack: `-k`, for the call sites)."""
    return [strace, "-f", "--seccomp-bpf", "-qq", "-ttt", *(["-k"] if stacks else []),
            "-e", "trace=madvise", "-e", "signal=none", "-o", str(log), *argv]


def parse_call(line: str) -> Madvise | None:
    """The madvise call of one line of a `strace -f -ttt -e trace=madvise` log, or None (another
    line, or a call that failed)."""
    m = _CALL.match(line)
    if m and not line.rstrip().endswith("= -1") and " = -1 " not in line:
        addr = 0 if m.group(3) == "NULL" else int(m.group(3), 16)
        return Madvise(float(m.group(2)), int(m.group(4)), m.group(5), int(m.group(1)), addr)
    return None


def parse_strace(text: str) -> list[Madvise]:
    """The madvise calls of a `strace -f -ttt -e trace=madvise` log (an unfinished call is
    counted where it began: the length and the advice are on that line)."""
    return [c for c in map(parse_call, text.splitlines()) if c is not None]


def discards(calls: list[Madvise], t0: float, t1: float) -> tuple[int, int]:
    """Discard calls and bytes with t0 <= t < t1."""
    sel = [c for c in calls if t0 <= c.t < t1 and c.advice in DISCARD_ADVICES]
    return len(sel), sum(c.length for c in sel)


def task_files(pid: int, name: str) -> dict[int, str]:
    """tid -> the text of /proc/PID/task/TID/`name` for each thread of a process; empty when
    it is gone (a thread that ends while it is read is left out)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/{name}") as f:
                out[int(tid)] = f.read()
        except (OSError, ValueError):
            continue
    return out


def thread_names(pid: int) -> dict[int, str]:
    """The threads of a process, tid -> name (/proc/PID/task/TID/comm); empty when it is gone.
    Bun names its threads: "mi-scavenger" (mimalloc's), "JITWorker", "HeapHelper", "Bun Pool N";
    the main thread's tid is the pid."""
    return {tid: text.strip() for tid, text in task_files(pid, "comm").items()}


def sweeps(calls: list[Madvise], gap_s: float) -> int:
    """Groups of calls, each made by one thread with less than `gap_s` between one call and the
    next: one walk over the pages gives each run of purged units its own call at once, so a
    group is one sweep that discarded something (a sweep that discarded nothing is not seen)."""
    last: dict[int, float] = {}
    count = 0
    for c in sorted(calls, key=lambda c: c.t):
        if c.t - last.get(c.tid, -1e18) >= gap_s:
            count += 1
        last[c.tid] = c.t
    return count
