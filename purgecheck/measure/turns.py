"""How often the real event loop parks and the scavenger runs, counted by the kernel's syscall
tracepoints (`perf stat`), which stop nothing: a count, not a trace.

Bun 1.4.4's event loop (usockets, `us_loop_run_bun_tick`) calls `mi_on_thread_idle_start`,
the park of seed 000 (2), on every tick, right before its `epoll_pwait2`, and
`mi_on_thread_idle_end` after it: so the main thread's `epoll_pwait*` calls are its parks.
The scavenger ("mi-scavenger", seed 000 (2): "the scavenger for the parked ones") sleeps on a
futex between passes: its `futex` calls are its passes, each a wake by a park or by its own
due time. Both are counted per thread over the load.

The model takes the loop's turns as an input (requests per park, the workload's
`per_turn`): the park rate is a property of the machine and the program under load (a
slower server serves more requests per turn), not of the purge rule. Counting by `strace`
would stop the process at every turn and change what it counts (16 requests per turn under
strace against 2 to 11 without, 2026-12-03).

Without a usable `perf` (not installed, or not allowed to attach: perf_event_paranoid, no
tracefs), nothing is counted and the figures are absent; the model then parks after every
request, as it did before the count existed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

LOOP_EVENTS = ("syscalls:sys_enter_epoll_pwait2", "syscalls:sys_enter_epoll_pwait",
               "syscalls:sys_enter_epoll_wait")
SCAVENGER_EVENT = "syscalls:sys_enter_futex"
SCAVENGER_COMM = "mi-scavenger"  # the thread name mimalloc gives its scavenger


@dataclass(frozen=True)
class Turns:
    loop_turns: int  # the main thread's epoll waits: its parks
    scavenger_passes: int  # the scavenger's futex calls: its sleeps between passes


def parse_perf_per_thread(text: str, pid: int) -> Turns | None:
    """`perf stat --per-thread -x,` output: the main thread's (TID == PID) epoll waits and the
    scavenger's futex calls; None when the main thread is not in it (perf counted nothing)."""
    loop = scav = 0
    seen = False
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 4 or line.startswith("#"):
            continue
        who, count, event = fields[0], fields[1], fields[3]
        name, _, tid = who.rpartition("-")
        if not tid.isdigit() or not count.isdigit():
            continue
        if int(tid) == pid and event in LOOP_EVENTS:
            loop += int(count)
            seen = True
        elif name == SCAVENGER_COMM and event == SCAVENGER_EVENT:
            scav += int(count)
    return Turns(loop, scav) if seen else None


def _perf_fds(pid: int) -> int:
    """How many perf_event file descriptors process `pid` holds."""
    n = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            n += "perf_event" in os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
    return n


class TurnCounter:
    """`perf stat` attached to a running process from start() to stop(). A perf that is not
    there or cannot attach gives None at stop(); the measurement goes on without it."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        perf = shutil.which("perf")
        if perf is None:
            return
        events = ",".join((*LOOP_EVENTS, SCAVENGER_EVENT))
        try:
            self.proc = subprocess.Popen(
                [perf, "stat", "--per-thread", "-x,", "-e", events, "-p", str(self.pid),
                 "-o", str(self.out)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
        except OSError:
            self.proc = None

    def wait_attached(self, timeout_s: float = 2.0) -> bool:
        """Wait until perf has opened its counters on the process (its perf_event file
        descriptors, one per event and thread): 14 to 25 ms after start() on this machine
        (2026-12-04; 9 to 14 ms of waiting when the harness reads /proc meanwhile). A window that must not miss the turns right after its start (the idle's)
        waits for it before the harness speaks to the program again."""
        if self.proc is None:
            return False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if _perf_fds(self.proc.pid) >= len(LOOP_EVENTS) + 1:
                return True
            time.sleep(0.002)
        return False

    def stop(self) -> Turns | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        try:
            return parse_perf_per_thread(self.out.read_text(), self.pid)
        except OSError:
            return None
