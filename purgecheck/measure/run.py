"""One measured run of a workload on the real Bun under one design: the seed's figures, read
from outside (purgecheck/measure/probe.py), with the load and the idle told apart by time.

A run starts the program (under strace unless `count_madvise` is off), waits for it to say
that its load begins (`ready PID PORT` of a server, `load-start PID` of a single program),
reads /proc/PID/stat there, samples smaps_rollup every `sample_ms` on a thread of its own,
counts the loop's turns and the scavenger's passes with perf (purgecheck/measure/turns.py)
unless `count_turns` is off (under load, and again in a window of its own from the end of the
load to the end of the idle), and notes the end of the load (the load generator exits, or the
program says `load-end`); a workload of js/ then says how many collections freed its objects
(js/collections.js). After `idle_s` of idle it tells the program to quit. Everything is bounded in time: a program
that does not answer is killed with its process group, and a RunError says what happened.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from purgecheck.measure import probe
from purgecheck.measure.designs import design_env
from purgecheck.measure.turns import TurnCounter
from purgecheck.measure.workloads import JS, MeasuredWorkload

START_TIMEOUT_S = 30.0  # a program that has not said it is ready by then is killed


class RunError(Exception):
    """A run that could not be measured (the program died, did not start, the load failed)."""


@dataclass
class RunResult:
    workload: str
    design: str
    options: dict[str, str]
    params: dict
    repeat: int
    figures: dict[str, float] = field(default_factory=dict)
    # (ms from the start of the load, rss bytes, anonymous bytes)
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    load_end_ms: float = 0.0

    def as_json(self) -> dict:
        return asdict(self)


# The figures of a run, with what each means (the table's legend, the JSON's keys, the docs).
FIGURES = {
    "requests": "requests served under load (typed-arrays: allocations; buffer-loop: rounds)",
    "load_s": "seconds of load (wall clock)",
    "requests_per_s": "requests per second of load",
    "faults_load": "minor page faults of the process under load (/proc/PID/stat)",
    "faults_per_request": "minor page faults per request under load",
    "user_us_per_request": "user CPU per request under load, microseconds",
    "sys_us_per_request": "kernel CPU per request under load, microseconds",
    "discards_load": "madvise(MADV_DONTNEED or MADV_FREE) calls under load",
    "discarded_mb_load": "MB those calls covered",
    "discards_load_small": "of those calls, the ones below 64 KiB: holes of small and medium "
                           "pages only (a hole of a large page is a whole block of 96 KiB or "
                           "more, an arena purge whole 64 KiB slices)",
    "discards_load_large": "the others, of 64 KiB or more: large pages' holes and the arena's "
                           "purges, what the model holds (and medium pages' longest runs)",
    "discard_kib_per_call_load": "the mean length of the calls of 64 KiB or more under load, "
                                 "KiB: a run of adjacent free blocks that one call discards",
    "discarding_sweeps_load": "the sweeps that discarded under load: groups of calls of 64 KiB "
                              "or more by one thread, less than 1 ms apart (probe.sweeps)",
    "scavenger_sweeps_load": "the scavenger's sweeps that discarded something under load (its "
                             "calls of any length, grouped as discarding_sweeps_load)",
    "discards_load_scavenger": "of the calls of 64 KiB or more under load, the ones the "
                               "thread mi-scavenger made (it sweeps the parked threads)",
    "discards_load_loop": "the ones the main thread made (the event loop's own idle work)",
    "discards_load_others": "the ones other threads made (Bun's JIT workers, thread pool and "
                            "collector helpers: their own idle sweeps, which reach the abandoned "
                            "pages of every thread)",
    "discards_idle": "the same calls in the idle after the load",
    "discarded_mb_idle": "MB those calls covered",
    "rss_mb_load_end": "RSS at the end of the load (smaps_rollup), MB",
    "anon_mb_load_end": "anonymous memory at the end of the load, MB",
    "rss_mb_idle_end": "RSS at the end of the idle, MB",
    "anon_mb_idle_end": "anonymous memory at the end of the idle, MB",
    "anon_mb_peak": "the highest anonymous memory sampled, MB",
    "anon_mb_s": "anonymous memory integrated over load and idle, MB x s",
    "ms_to_floor": "ms from the end of the load until anonymous memory is within 1 % (at least "
                   "256 KiB) of its lowest in the idle",
    "loop_turns": "turns of the event loop under load: the main thread's epoll waits, each a "
                  "park (perf's syscall tracepoints; absent without a usable perf)",
    "requests_per_turn": "requests per turn of the event loop under load",
    "scavenger_passes": "the scavenger's sleeps under load (its futex calls): its passes",
    "loop_turns_idle": "turns of the event loop in the idle after the load: its epoll waits "
                       "begun from the end of the load to the end of the idle (a second perf "
                       "window), each a park beyond the one it was in when the load ended",
    "scavenger_passes_idle": "the scavenger's passes in the idle (the same window)",
    "collections": "the garbage collector's collections under load that freed the "
                   "program's objects (js/collections.js: a FinalizationRegistry)",
    "requests_per_collection": "requests (allocations, rounds) per collection under load",
    "survivors_per_collection": "objects a collection passed over, that a later one freed, per "
                                "collection under load (js/collections.js)",
    "requests_per_late_collection": "requests per collection that freed such survivors",
}
SMALL_DISCARD = 64 * 1024  # below: a hole of a small or medium page (FIGURES, discards_load_small)
SWEEP_GAP_S = 0.001  # calls of one thread closer than this are one sweep (probe.sweeps)
SCAVENGER = "mi-scavenger"  # the thread name mimalloc gives its scavenger
MB = 1 << 20


class _Lines:
    """The program's stdout, line by line, read on a thread (so a read can time out)."""

    def __init__(self, stream) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def expect(self, word: str, timeout: float) -> tuple[float, list[str]]:
        """Wait for a line starting with `word`: (time.time() when read, its fields)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunError(f"no {word!r} line from the program within {timeout:.0f} s")
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RunError(f"the program ended before it printed {word!r}")
            if line.startswith(word + " ") or line == word:
                return time.time(), line.split()[1:]


class _Sampler(threading.Thread):
    """smaps_rollup every `every_s` until stopped."""

    def __init__(self, pid: int, every_s: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[float, int, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            r = probe.read_rollup(self.pid)
            if r is None:
                return
            self.samples.append((time.time(), r["rss"], r["anonymous"]))
            self.done.wait(self.every_s)


def _stop(proc: subprocess.Popen) -> None:
    """Ask the program to quit (the workloads of js/ do), then SIGTERM its process group (a
    program of the user's need not read stdin), then SIGKILL it."""
    try:
        if proc.stdin:
            proc.stdin.write("quit\n")
            proc.stdin.flush()
            proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    for sig, wait_s in ((None, 2), (signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        if sig is not None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def measure_once(bun: Path, w: MeasuredWorkload, params: dict, design: str,
                 options: dict[str, str] | None = None, repeat: int = 0,
                 count_madvise: bool = True, sample_ms: float = 50.0,
                 count_turns: bool = True, strace_stacks: bool = False,
                 on_strace=None) -> RunResult:
    """One run of `w` under `design` (plus `options`); see the module's docstring.
    `count_turns` off: no perf (what counting the loop's turns costs). `strace_stacks`: strace
    also prints each call's stack (`-k`; purgecheck/measure/callsites.py), and `on_strace` is
    given the log's text and the load's end before the log goes."""
    options = options or {}
    idle_s = float(params["idle_s"])
    lifetime_ms = int(1000 * (params.get("load_s", params.get("seconds", 60)) + idle_s + 120))
    env = design_env(design, options)
    env.update(w.env_of(params), LIFETIME_MS=str(lifetime_ms))
    strace = shutil.which("strace") if count_madvise else None
    if count_madvise and not strace:
        raise RunError("strace is not installed (make setup installs it; --no-strace measures "
                       "without counting madvise calls)")
    with tempfile.TemporaryDirectory(prefix="purgecheck-measure-") as tmp:
        log = Path(tmp) / "madvise.log"
        argv = [str(bun), str(JS / w.script)]
        if strace:
            argv = probe.strace_argv(strace, log, argv, strace_stacks)
        err = open(Path(tmp) / "stderr", "w+")
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
        try:
            lines = _Lines(proc.stdout)
            result = _run_phases(bun, w, params, proc, lines, idle_s, sample_ms,
                                 Path(tmp) if count_turns else None)
        except RunError as e:
            err.seek(0)
            tail = err.read().strip().splitlines()[-1:] or [""]
            raise RunError(f"{w.name} under {design}: {e}" +
                           (f" (stderr: {tail[0][:200]})" if tail[0] else "")) from None
        finally:
            if proc.poll() is None:
                _stop(proc)
            err.close()
        t_start, t_end, t_idle_end, s0, s1, samples, requests, extra, threads = result
        calls = probe.parse_strace(log.read_text()) if strace else []
        if strace and on_strace is not None:
            on_strace(log.read_text(), t_end)
    run = _figures(w, design, options, params, repeat, t_start, t_end, t_idle_end, s0, s1,
                   samples, requests, calls, bool(strace))
    if strace:
        run.figures.update(_discards_by_thread(calls, t_end, *threads))
    run.figures.update(extra)
    return run


def _run_phases(bun, w, params, proc, lines, idle_s, sample_ms, tmp: Path | None):
    word = "ready" if w.kind == "serve" else "load-start"
    _, fields = lines.expect(word, START_TIMEOUT_S)
    pid = int(fields[0]) if fields and fields[0].isdigit() else _bun_pid(proc)
    sampler = _Sampler(pid, sample_ms / 1000)
    counter = TurnCounter(pid, tmp / "perf.txt") if tmp is not None else None
    if counter is not None:
        counter.start()
    t_start = time.time()
    s0 = probe.read_stat(pid)
    sampler.start()
    if w.kind == "serve":
        requests = _load(bun, int(fields[1]), params)
        t_end = time.time()
    else:
        t_end, fields = lines.expect("load-end", float(params.get("max_load_s", 600)))
        requests = int(fields[0]) if fields and fields[0].isdigit() else 1
    # the idle's own window, attached before the load's window stops and before the harness
    # asks the program anything: the idle's parks are few (the runtime's timers), so it must
    # not miss the first of them
    idle_counter = TurnCounter(pid, tmp / "perf-idle.txt") if tmp is not None else None
    if idle_counter is not None:
        idle_counter.start()
    s1 = probe.read_stat(pid)
    names = probe.thread_names(pid)  # the threads as they are at the end of the load
    if idle_counter is not None:
        idle_counter.wait_attached()
    turns = counter.stop() if counter is not None else None
    if s0 is None or s1 is None:
        raise RunError("the program ended during its load")
    extra = {}
    if turns is not None and turns.loop_turns:
        extra.update(loop_turns=turns.loop_turns, scavenger_passes=turns.scavenger_passes,
                     requests_per_turn=requests / turns.loop_turns)
    if not Path(w.script).is_absolute():  # the workloads of js/ count the collections
        extra.update(_collections(proc, lines, requests))
    time.sleep(idle_s)
    t_idle_end = time.time()
    idle_turns = idle_counter.stop() if idle_counter is not None else None
    if idle_turns is not None:  # 0 is a count: a loop that stayed in one park
        extra.update(loop_turns_idle=idle_turns.loop_turns,
                     scavenger_passes_idle=idle_turns.scavenger_passes)
    last = probe.read_rollup(pid)
    sampler.done.set()
    sampler.join()
    if last is None:
        raise RunError("the program ended during its idle")
    samples = [*sampler.samples, (t_idle_end, last["rss"], last["anonymous"])]
    return t_start, t_end, t_idle_end, s0, s1, samples, requests, extra, (pid, names)


def _collections(proc: subprocess.Popen, lines: _Lines, requests: int) -> dict[str, float]:
    """The program's count of the collector's collections under load (js/collections.js),
    asked for after the load: how many requests' garbage one collection frees."""
    try:
        proc.stdin.write("stats\n")
        proc.stdin.flush()
        _, fields = lines.expect("gc", 10.0)
    except (BrokenPipeError, OSError, RunError):
        return {}
    collections = int(fields[1])
    if not collections:
        return {}
    out = {"collections": collections, "requests_per_collection": requests / collections}
    if len(fields) >= 4:  # the bodies a collection passed over, and the collections that freed them
        survivors, late = int(fields[2]), int(fields[3])
        out["survivors_per_collection"] = survivors / collections
        if late:
            out["requests_per_late_collection"] = requests / late
    return out


def _discards_by_thread(calls: list[probe.Madvise], t_end: float, pid: int,
                        names: dict[int, str]) -> dict[str, float]:
    """The discard calls of 64 KiB or more under load: their mean length, the sweeps they came
    in, and who made them (the scavenger, the main thread, the others), from strace's thread
    ids and the threads' names."""
    big = [c for c in calls if c.t < t_end and c.length >= SMALL_DISCARD
           and c.advice in probe.DISCARD_ADVICES]
    scavenger = sum(1 for c in big if names.get(c.tid) == SCAVENGER)
    loop = sum(1 for c in big if c.tid == pid)
    by_scavenger = [c for c in calls if c.t < t_end and names.get(c.tid) == SCAVENGER
                    and c.advice in probe.DISCARD_ADVICES]
    return {"discard_kib_per_call_load": sum(c.length for c in big) / len(big) / 1024
            if big else 0.0,
            "discarding_sweeps_load": probe.sweeps(big, SWEEP_GAP_S),
            "scavenger_sweeps_load": probe.sweeps(by_scavenger, SWEEP_GAP_S),
            "discards_load_scavenger": scavenger, "discards_load_loop": loop,
            "discards_load_others": len(big) - scavenger - loop}


def _bun_pid(proc: subprocess.Popen) -> int:
    """The bun process: `proc` itself, or its child when `proc` is strace."""
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            children = f.read().split()
    except OSError:
        children = []
    if Path(f"/proc/{proc.pid}/exe").resolve().name == "strace" and children:
        return int(children[0])
    return proc.pid


def _load(bun: Path, port: int, params: dict) -> int:
    """The load generator, a Bun of its own with Bun's default options: the requests it got
    answered. Any error of a request fails the run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    argv = [str(bun), str(JS / "load.js"), str(port), str(params["connections"]),
            str(params["load_s"]), str(params["body"])]
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True,
                             timeout=params["load_s"] + 60)
    except subprocess.TimeoutExpired:
        raise RunError("the load generator did not finish in time") from None
    fields = out.stdout.split()
    if out.returncode != 0 or len(fields) != 4 or fields[0] != "requests":
        raise RunError(f"the load generator failed: {(out.stderr or out.stdout).strip()[:200]}")
    if int(fields[3]):
        raise RunError(f"{fields[3]} requests of the load failed")
    return int(fields[1])


def _figures(w, design, options, params, repeat, t_start, t_end, t_idle_end, s0, s1, samples,
             requests, calls, counted) -> RunResult:
    load_s = t_end - t_start
    per = max(requests, 1)
    idle = [s for s in samples if s[0] >= t_end]
    at_end = idle[0] if idle else samples[-1]
    floor = min(s[2] for s in idle)
    near = floor + max(0.01 * floor, 256 * 1024)
    reached = next(s[0] for s in idle if s[2] <= near)
    area = sum((b[0] - a[0]) * a[2] for a, b in zip(samples, samples[1:]))
    f = {
        "requests": requests, "load_s": load_s, "requests_per_s": requests / load_s,
        "faults_load": s1.minflt - s0.minflt,
        "faults_per_request": (s1.minflt - s0.minflt) / per,
        "user_us_per_request": 1000 * (s1.utime_ms - s0.utime_ms) / per,
        "sys_us_per_request": 1000 * (s1.stime_ms - s0.stime_ms) / per,
        "rss_mb_load_end": at_end[1] / MB, "anon_mb_load_end": at_end[2] / MB,
        "rss_mb_idle_end": samples[-1][1] / MB, "anon_mb_idle_end": samples[-1][2] / MB,
        "anon_mb_peak": max(s[2] for s in samples) / MB, "anon_mb_s": area / MB,
        "ms_to_floor": 1000 * max(0.0, reached - t_end),
    }
    if counted:
        n_load, b_load = probe.discards(calls, 0, t_end)
        small = [c for c in calls if c.t < t_end and c.length < SMALL_DISCARD]
        n_small, _ = probe.discards(small, 0, t_end)
        n_idle, b_idle = probe.discards(calls, t_end, t_idle_end + 1e9)
        f.update(discards_load=n_load, discarded_mb_load=b_load / MB,
                 discards_load_small=n_small, discards_load_large=n_load - n_small,
                 discards_idle=n_idle,
                 discarded_mb_idle=b_idle / MB)
    series = [(1000 * (t - t_start), rss, anon) for t, rss, anon in samples]
    return RunResult(w.name, design, dict(options), dict(params), repeat, f, series,
                     1000 * load_s)
