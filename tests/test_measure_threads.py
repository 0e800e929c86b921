"""purgecheck/measure/threads.py: the discard calls and the page faults of a real run told
apart by thread (strace's thread ids, /proc/PID/task/TID/{stat,comm})."""

import os

from purgecheck.measure.probe import Madvise, parse_call
from purgecheck.measure.threads import by_thread, large_calls, thread_faults

PID = 100
NAMES = {100: "bun", 101: "mi-scavenger", 102: "HeapHelper"}
CALLS = [Madvise(1.0, 2048 * 1024, "MADV_DONTNEED", 101),  # under load, the scavenger
         Madvise(2.5, 4096, "MADV_DONTNEED", 100),  # in the idle, the main thread
         Madvise(2.6, 1536 * 1024, "MADV_DONTNEED", 101),
         Madvise(2.7, 1 << 30, "MADV_DONTFORK", 101),  # not a discard
         Madvise(2.8, 8192, "MADV_DONTNEED", 103)]  # a thread gone before it was named


def test_calls_by_thread_and_phase():
    """Each discard call counts once, in its phase, under its thread's name (the main thread
    as "main"), a thread not named "?"; other advices do not count. Fails if the advice were
    not checked (the idle's scavenger would have 2 calls, one of 1 GiB), or if the main thread
    kept Bun's name for it ("bun")."""
    load = by_thread(CALLS, 0.0, 2.0, PID, NAMES)
    idle = by_thread(CALLS, 2.0, 3.0, PID, NAMES)
    assert load == {"mi-scavenger": {"calls": 1, "mb": 2.0, "kib": [2048]}}
    assert idle == {"main": {"calls": 1, "mb": 4096 / (1 << 20), "kib": [4]},
                    "mi-scavenger": {"calls": 1, "mb": 1.5, "kib": [1536]},
                    "?": {"calls": 1, "mb": 8192 / (1 << 20), "kib": [8]}}


def test_thread_faults_of_this_process():
    """The kernel's per-thread minor faults of a live process: its main thread has some (this
    interpreter faulted to start); a process that is gone gives nothing. Fails if the field
    were read before the command name (field 10 of /proc/PID/task/TID/stat)."""
    faults = thread_faults(os.getpid())
    assert faults[os.getpid()] > 0
    assert thread_faults(1 << 30) == {}


def test_large_calls_by_address():
    """The load's discard calls of 1 MiB or more, by address relative to the lowest of them:
    a 4 MiB page purged twice shows at one address twice. Fails if the address were not read
    from strace's line (every call at 0), if the phase's window were not applied (the idle's
    1.5 MiB call would show), or if a call that is not a discard counted (the 1 GiB one)."""
    calls = [parse_call(f"101 {t} madvise({a}, {n}, {adv}) = 0") for t, a, n, adv in (
        (1.0, "0x7f0000400000", 4 << 20, "MADV_DONTNEED"),
        (1.1, "0x7f0000000000", 1 << 30, "MADV_DONTFORK"),
        (1.2, "0x7f0000c00000", 64 << 10, "MADV_DONTNEED"),
        (1.5, "0x7f0000400000", 4 << 20, "MADV_DONTNEED"),
        (1.6, "0x7f0000800000", 2 << 20, "MADV_DONTNEED"),
        (2.6, "0x7f0000000000", 1536 << 10, "MADV_DONTNEED"))]
    assert large_calls(calls, 0.5, 2.0) == [[0.5, 0, 4096], [1.0, 0, 4096], [1.1, 4096, 2048]]
    assert parse_call("101 1.0 madvise(NULL, 4096, MADV_DONTNEED) = 0").addr == 0
