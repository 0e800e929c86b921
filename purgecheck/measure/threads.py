"""Who faults and who discards, thread by thread: a black box's view of which of Bun's threads
(the JavaScript main thread, the collector's HeapHelper, JITWorker, mimalloc's scavenger)
takes the page faults of a load and makes the madvise calls of its load and its idle.

The per-thread counters are the kernel's: field 10 (minflt) of /proc/PID/task/TID/stat, read
at the load's start and at its end (a thread born in between counts from 0), and the thread's
name from /proc/PID/task/TID/comm; the calls are strace's (`-f` prints the thread of each).

    python -m purgecheck.measure.threads typed-arrays --design before --design epoch --runs 9

runs the designs interleaved (run i of every design before run i+1 of any) and prints per run,
per thread name, the faults under load and the discard calls and MB under load and in the
idle, with the calls' lengths in KiB (docs/measure.md, "Thread by thread").
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from purgecheck.measure import probe
from purgecheck.measure.designs import design_env
from purgecheck.measure.probe import DISCARD_ADVICES
from purgecheck.measure.run import START_TIMEOUT_S, RunError, _Lines, _stop
from purgecheck.measure.workloads import JS, WORKLOADS, workload_params

KiB, MB = 1024, 1 << 20


def thread_faults(pid: int) -> dict[int, int]:
    """tid -> minor faults so far (/proc/PID/task/TID/stat field 10); empty when it is gone."""
    return {tid: int(text[text.rindex(")") + 2:].split()[7])
            for tid, text in probe.task_files(pid, "stat").items()}


def name_of(tid: int, pid: int, names: dict[int, str]) -> str:
    """The thread's name, the main thread "main" (Bun names it "bun"); a thread gone by the time
    of reading is "?"."""
    return "main" if tid == pid else names.get(tid, "?")


def by_thread(calls: list[probe.Madvise], t0: float, t1: float, pid: int,
              names: dict[int, str]) -> dict[str, dict]:
    """Discard calls with t0 <= t < t1 per thread name: count, MB, lengths in KiB (sorted)."""
    out: dict[str, dict] = {}
    for c in calls:
        if not (t0 <= c.t < t1) or c.advice not in DISCARD_ADVICES:
            continue
        row = out.setdefault(name_of(c.tid, pid, names), {"calls": 0, "mb": 0.0, "kib": []})
        row["calls"] += 1
        row["mb"] += c.length / MB
        row["kib"].append(c.length // KiB)
    for row in out.values():
        row["kib"].sort()
    return out


def large_calls(calls: list[probe.Madvise], t0: float, t1: float,
                least: int = MB) -> list[list]:
    """The discard calls of `least` bytes or more with t0 <= t < t1 by address, in order: [time
    since t0 in s, start less the lowest start among them in KiB, length in KiB]. Whether the
    arena purges the same few large pages again and again (taken back between) or ever new
    ones, and how many pages reach it at all with `purge_delay=0` (every page it gets is purged
    at once, each a call of its own length)."""
    sel = [c for c in calls if t0 <= c.t < t1 and c.advice in DISCARD_ADVICES and c.length >= least]
    base = min((c.addr for c in sel), default=0)
    return [[round(c.t - t0, 4), (c.addr - base) // KiB, c.length // KiB] for c in sel]


def run_once(bun: Path, workload: str, params: dict, design: str,
             options: dict[str, str]) -> dict:
    """One run under strace: faults per thread under load, calls per thread under load and in
    the idle, and anonymous memory at the load's end and the idle's end."""
    w = WORKLOADS[workload]
    if w.kind == "serve":
        raise RunError("a server's load comes from another process: not measured thread by thread")
    idle_s = float(params["idle_s"])
    env = design_env(design, options)
    env.update(w.env_of(params), LIFETIME_MS=str(int(1000 * (idle_s + 180))))
    strace = shutil.which("strace")
    if not strace:
        raise RunError("strace is not installed (make setup installs it)")
    with tempfile.TemporaryDirectory(prefix="purgecheck-threads-") as tmp:
        log = Path(tmp) / "madvise.log"
        argv = probe.strace_argv(strace, log, [str(bun), str(JS / w.script)])
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            lines = _Lines(proc.stdout)
            _, fields = lines.expect("load-start", START_TIMEOUT_S)
            pid = int(fields[0])
            t0, f0 = time.time(), thread_faults(pid)
            t1, fields = lines.expect("load-end", float(params.get("max_load_s", 600)))
            f1, names = thread_faults(pid), probe.thread_names(pid)
            anon_load_end = (probe.read_rollup(pid) or {}).get("anonymous", 0)
            time.sleep(idle_s)
            t2 = time.time()
            anon_idle_end = (probe.read_rollup(pid) or {}).get("anonymous", 0)
            names = {**probe.thread_names(pid), **names}
        finally:
            if proc.poll() is None:
                _stop(proc)
        calls = probe.parse_strace(log.read_text())
    faults: Counter[str] = Counter()
    for tid, n in f1.items():
        faults[name_of(tid, pid, names)] += n - f0.get(tid, 0)
    requests = int(fields[0]) if fields and fields[0].isdigit() else 1
    return {"design": design, "requests": requests, "load_s": t1 - t0,
            "faults_load": dict(faults), "calls_load": by_thread(calls, t0, t1, pid, names),
            "calls_idle": by_thread(calls, t1, t2, pid, names),
            "large_load": large_calls(calls, t0, t1),
            "anon_mb_load_end": anon_load_end / MB, "anon_mb_idle_end": anon_idle_end / MB}


def _print(run: dict) -> None:
    print(f"{run['design']:>8}  {run['requests']} requests in {run['load_s']:.2f} s; anon MB "
          f"{run['anon_mb_load_end']:.2f} at the load's end, {run['anon_mb_idle_end']:.2f} at the "
          f"idle's end")
    per_request = {k: round(v / run["requests"], 3) for k, v in
                   sorted(run["faults_load"].items(), key=lambda kv: -kv[1])}
    print(f"          faults a request by thread: {per_request}")
    large = run["large_load"]
    print(f"          load's calls of 1 MiB or more: {len(large)} at {len({c[1] for c in large})} "
          f"addresses, {sum(c[2] == 4096 for c in large)} of 4 MiB")
    for phase in ("calls_load", "calls_idle"):
        for name, row in sorted(run[phase].items()):
            print(f"          {phase[6:]:>4} {name:>14}: {row['calls']:4d} calls "
                  f"{row['mb']:7.2f} MB  KiB {row['kib'] if len(row['kib']) <= 24 else Counter(row['kib']).most_common(12)}")


def main(argv: list[str] | None = None) -> int:
    from purgecheck.measure.bun import find_bun
    p = argparse.ArgumentParser(prog="python -m purgecheck.measure.threads",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=[n for n, w in WORKLOADS.items() if w.kind != "serve"])
    p.add_argument("--design", action="append", default=[])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a mimalloc option for every run (DESIGN:NAME=VALUE: for one design)")
    p.add_argument("--bun")
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args(argv)
    _, params = workload_params(a.workload, dict(s.partition("=")[::2] for s in a.set))
    bun = find_bun(a.bun)
    designs = a.design or ["before", "epoch"]
    runs = []
    for i in range(a.runs):
        for d in designs:
            label, _, design = d.partition("@")  # LABEL@DESIGN: the same design, other options
            design = design or label
            opts = {}
            for o in a.option:
                scope, _, kv = o.rpartition(":")
                if scope in ("", label):
                    k, _, v = kv.partition("=")
                    opts[k] = v
            run = run_once(bun, a.workload, params, design, opts)
            run["design"] = label
            _print(run)
            runs.append(run)
            sys.stdout.flush()
    if a.json:
        Path(a.json).write_text(json.dumps({"workload": a.workload, "params": params,
                                            "options": a.option, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
