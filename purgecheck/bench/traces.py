"""Benchmark: `purgecheck validate` and `purgecheck diff --traces` on a generated trace of ten
million events (purgecheck/formats/tracegen.py): events per second and peak memory of each.

Figures are printed, never asserted (DESIGN.md: speed goes in benchmarks). Each command runs
in a child process of its own, so that its peak resident memory is its own. Events per second
is given by the wall clock and by the process's CPU time (on a machine others load, the CPU
figure is the steadier one). `diff` runs twice: on the trace and itself (every line equal in
bytes, as the model's and the C reference's are: checked once), and on a one-million-event
trace and its twin, whose keys come in another order (no line equal in bytes: both sides
decoded, checked and compared as dicts, the slow way). `--profile` adds the top functions of
each on the one-million-event trace; `--reader` compares ways of decoding its lines.

    python -m purgecheck.bench.traces                 # 10 M events, trace kept in /tmp
    python -m purgecheck.bench.traces --events 2000000 --profile
    python -m purgecheck.bench.traces --reader        # one msgspec call per line or per batch
    python -m purgecheck.bench.traces --floor         # the reader, then the loop, then validate

`make bench` (python -m purgecheck.bench) runs the three commands with the other benchmarks,
on a trace of a million events (the one this benchmark keeps beside its ten million).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from purgecheck.bench import Figure

# The peak resident memory is the child's own VmHWM: on Linux, ru_maxrss of a process started
# by vfork+exec (as subprocess does) includes its parent's peak, which in `python -m
# purgecheck.bench` is the other benchmarks' memory.
CHILD = r"""
import re, resource, sys, time, orjson
from purgecheck.cli import main
argv = sys.argv[1:]
t0, c0 = time.perf_counter(), time.process_time()
rc = main(argv)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
try:
    rss = int(re.search(r"VmHWM:\s*(\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
except (OSError, AttributeError):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
sys.stderr.write(orjson.dumps({"rc": rc, "wall": wall, "cpu": cpu, "rss": rss}).decode() + "\n")
"""

PROFILE = r"""
import cProfile, pstats, sys
from purgecheck.cli import main
cProfile.run("main(sys.argv[1:])", "/tmp/purgecheck-bench.prof")
pstats.Stats("/tmp/purgecheck-bench.prof").sort_stats("tottime").print_stats(12)
"""


def ensure_trace(path: Path, events: int, seed: int, say=print) -> int:
    """Generate the trace unless a file of that many events is there already (`say` tells
    where it went)."""
    from purgecheck.formats.tracegen import GENERATION, generate
    stamp = path.with_suffix(".count")
    made = f"{events} {seed} {GENERATION}"
    if path.exists() and stamp.exists() and stamp.read_text() == made:
        return sum(1 for _ in open(path, "rb")) - 2
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        n = generate(f, events, seed)
    stamp.write_text(made)
    say(f"generated {n:,} events in {time.perf_counter() - t0:.1f} s "
        f"({path.stat().st_size / 1e6:.0f} MB): {path}")
    return n


def measure(argv: list[str]) -> dict:
    """`purgecheck ARGV` in a child process: its exit status ("rc"), wall and CPU seconds
    and peak resident memory in bytes ("rss"). RuntimeError when the child did not say."""
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    try:
        return orjson.loads(lines[-1])
    except (IndexError, orjson.JSONDecodeError):
        raise RuntimeError(f"purgecheck {' '.join(argv)} exited {proc.returncode} without "
                           f"its figures: {proc.stderr.strip()[-300:]!r}") from None


def profile(argv: list[str]) -> str:
    proc = subprocess.run([sys.executable, "-c", PROFILE, *argv], capture_output=True,
                          text=True)
    return proc.stdout


def ensure_twin(path: Path) -> Path:
    """The same trace with the keys of every event in reverse order: equal to it in
    canonical form, but not one event line equal in bytes (diff's slow path throughout)."""
    twin = path.with_name(path.stem + "-twin.jsonl")
    if twin.exists() and twin.stat().st_mtime >= path.stat().st_mtime:
        return twin
    with open(path, "rb") as f, open(twin, "wb") as out:
        out.write(f.readline())
        for line in f:
            out.write(orjson.dumps(dict(reversed(orjson.loads(line).items()))) + b"\n")
    return twin


def bench_reader(path: Path) -> None:
    """The decoding of the reader three ways, by CPU time on the trace (its lines split into
    the reader's batches first, not timed): one msgspec call per line (the reader); one per
    batch of lines joined as a JSON array (not as strict on its own: a line holding two
    events and an event split over two lines decode alike); one per chunk of lines, each
    wrapped in brackets and decoded as a one-element tuple by decode_lines (as strict: `]\\n[`
    can only stand between two top-level values, so each line holds exactly one event); and
    the decoding of the same events handed over as msgpack, one blob per batch (what a
    replay fed by a reader in a second process would still pay)."""
    import operator

    import msgspec

    from purgecheck.formats.trace import _ANY_EVENT, _BATCH, _decode_event

    with open(path, "rb") as f:
        f.readline()
        body = f.read()
    body = body[:body.rfind(b"\n", 0, len(body) - 1) + 1]  # without the end event
    lines = body.split(b"\n")[:-1]
    batches = [lines[i:i + _BATCH] for i in range(0, len(lines), _BATCH)]
    chunks = [b"\n".join(b) + b"\n" for b in batches]
    as_array = msgspec.json.Decoder(list[_ANY_EVENT]).decode
    as_tuples = msgspec.json.Decoder(tuple[_ANY_EVENT]).decode_lines
    head = operator.itemgetter(0)

    def per_line() -> int:
        return sum(len(list(map(_decode_event, b))) for b in batches)

    def per_batch() -> int:
        return sum(len(as_array(b"[" + b",".join(b) + b"]")) for b in batches)

    handed = msgspec.msgpack.Encoder().encode
    blobs = [handed(list(map(_decode_event, b))) for b in batches]
    from_msgpack = msgspec.msgpack.Decoder(list[_ANY_EVENT]).decode

    def handed_over() -> int:  # what a replay fed by a reader process would still decode
        return sum(len(from_msgpack(b)) for b in blobs)

    def per_chunk_strict() -> int:
        n = 0
        for c in chunks:
            wrapped = b"[" + c.replace(b"\n", b"]\n[")[:-1]
            evs = list(map(head, as_tuples(wrapped)))
            assert len(evs) == (len(wrapped) - len(c)) // 2  # one event per line
            n += len(evs)
        return n

    print(f"\n-- the reader's decoding, {len(lines):,} lines of {path} --")
    for fn in (per_line, per_batch, per_chunk_strict, handed_over):
        best = min(_cpu(fn) for _ in range(3))
        print(f"{fn.__name__:<20} {best:6.3f} s CPU  {len(lines) / best:>11,.0f} lines/s")


def bench_floor(path: Path) -> None:
    """What `validate` costs in layers, by CPU time on the trace (best of three): the reader
    alone (read, split, decode, check); the reader and the replay's loop in `lin` order with
    every handler a no-op; the same with every handler one call that reads a field of the
    event and one of the model's state (the least a handler that checks anything does); the
    whole replay. The gap between the second and the last is what the handlers cost; the
    second bounds from above what any replay in this process can reach."""
    from purgecheck.formats.trace import read_trace
    from purgecheck.validate import Validator

    def nothing(ev, tid) -> None:
        pass

    def run(layer: str) -> tuple[int, float]:
        with open(path, "rb") as f:
            c0 = time.process_time()
            trace = read_trace(f, str(path))
            if layer == "reader":
                n = sum(len(evs) for _, _, evs in trace.batches())
                return n, time.process_time() - c0
            v = Validator(trace.header, str(path))
            if layer == "loop":
                v.handlers = dict.fromkeys(v.handlers, nothing)
            elif layer == "one call":
                st = v.st

                def one(ev, tid) -> bool:
                    return _read_one(ev, st)
                v.handlers = dict.fromkeys(v.handlers, one)
            v.replay(trace.batches())
            return v.replayed, time.process_time() - c0

    print(f"\n-- validate in layers, {path} --")
    for layer in ("reader", "loop", "one call", "validate"):
        n, best = min((run(layer) for _ in range(3)), key=lambda r: r[1])
        print(f"{layer:<10} {best:6.3f} s CPU  {n / best:>11,.0f} events/s  "
              f"{best / n * 1e6:.3f} us/event")


def _read_one(ev, st) -> bool:
    return ev.lin == st.epoch


def _cpu(fn) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def row(name: str, n: int, argv: list[str]) -> None:
    print_row(name, n, measure(argv))


def print_row(name: str, n: int, r: dict) -> None:
    status = "" if r["rc"] == 0 else f"  (exit {r['rc']})"
    print(f"{name:<44} {n:>12,} {r['wall']:>8.1f} {n / r['wall']:>11,.0f} "
          f"{n / r['cpu']:>11,.0f} {r['rss'] / 1e6:>8.0f}{status}")


def commands(path: Path, n: int, small: Path, n_small: int, twin: Path,
             size: str = "") -> list[tuple[str, int, list[str]]]:
    """The rows: (name, events, purgecheck's argv); `size` names the twin's size."""
    return [("validate", n, ["validate", str(path), "--quiet"]),
            ("diff --traces (the same file twice)", n, ["diff", "--traces", str(path), str(path)]),
            (f"diff --traces ({size + ', ' if size else ''}against its twin)", n_small,
             ["diff", "--traces", str(small), str(twin)])]


BENCH = "traces"
BENCH_EVENTS = 1_000_000  # in `python -m purgecheck.bench`: main()'s 10 M take minutes
TINY_EVENTS = 20_000


_EV_KIND = re.compile(rb'^\{"ev":"(\w+)"', re.M)


def trace_shape(path: Path) -> str:
    """What a throughput figure was measured on, in words: the trace's events, their kinds
    (the most frequent with their share), its pages and threads."""
    with open(path, "rb") as f:
        header = orjson.loads(f.readline())
        kinds = collections.Counter(_EV_KIND.findall(f.read()))
    kinds.pop(b"end", None)
    n = sum(kinds.values())
    top = ", ".join(f"{k.decode()} {c / n:.0%}" for k, c in kinds.most_common(5))
    producer = header.get("producer", {})
    threads = producer.get("threads", [])
    return (f"{n:,} events of {len(kinds)} kinds ({top}), {kinds[b'page_new']} pages, "
            f"{len(threads)} threads, from {producer.get('name', '?')} seed "
            f"{producer.get('seed', '?')}")


def figures(tiny: bool = False) -> list[Figure]:
    """Events per second (wall, CPU) and peak memory of each command: on a generated trace
    of a million events (kept in the temporary directory: the one main() makes beside its
    ten million), or with `tiny` of 20,000 (generated in a directory removed afterwards).
    The environment variable PURGECHECK_BENCH_TRACE names a trace to use instead (the one
    `python -m purgecheck.bench.compare` generates once for both sides)."""
    events = TINY_EVENTS if tiny else BENCH_EVENTS
    given = os.environ.get("PURGECHECK_BENCH_TRACE")
    with (tempfile.TemporaryDirectory() if tiny and not given else
          contextlib.nullcontext(tempfile.gettempdir())) as where:
        if given:
            path = Path(given)
            n = sum(1 for _ in open(path, "rb")) - 2
        else:
            path = Path(where) / f"purgecheck-bench-trace-{'tiny' if tiny else '1m'}.jsonl"
            n = ensure_trace(path, events, 0, say=lambda s: print(s, file=sys.stderr))
        rows = [(name, k, measure(argv)) for name, k, argv in
                commands(path, n, path, n, ensure_twin(path))]
        size = f"a generated trace: {trace_shape(path)}"
    if not tiny and not given:
        size += " (python -m purgecheck.bench.traces: 10 M)"
    out = []
    for name, k, r in rows:
        note = size if r["rc"] == 0 else f"{size}; purgecheck exited {r['rc']}"
        out += [Figure(BENCH, f"{name}: events per second", k / r["wall"], "events/s",
                       note + ", wall clock"),
                Figure(BENCH, f"{name}: events per second by CPU time", k / r["cpu"],
                       "events/s", note),
                Figure(BENCH, f"{name}: peak memory", r["rss"] / 1e6, "MB",
                       note + ", the child process's peak resident set")]
    return out


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench.traces",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", default="/tmp/purgecheck-bench-trace.jsonl",
                   help="where the generated trace is kept (reused when it matches)")
    p.add_argument("--profile", action="store_true",
                   help="also print the top functions of each on a 1 M-event trace")
    p.add_argument("--reader", action="store_true",
                   help="only compare ways of decoding the lines of the 1 M-event trace")
    p.add_argument("--floor", action="store_true",
                   help="only time validate in layers on the 1 M-event trace: the reader, "
                        "the loop with no-op handlers, validate")
    a = p.parse_args(args)
    path = Path(a.trace)
    n = ensure_trace(path, a.events, a.seed)
    small = path.with_name(path.stem + "-1m.jsonl")
    n_small = ensure_trace(small, min(a.events, 1_000_000), a.seed)
    if a.reader:
        bench_reader(small)
        return 0
    if a.floor:
        bench_floor(small)
        return 0
    twin = ensure_twin(small)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<44} {'events':>12} {'wall s':>8} {'ev/s wall':>11} {'ev/s cpu':>11} "
          f"{'peak MB':>8}")
    size = "1 M" if n_small >= 1_000_000 else f"{n_small:,}"
    for name, k, argv in commands(path, n, small, n_small, twin, size):
        row(name, k, argv)
    if a.profile:
        for name, argv in (("validate", ["validate", str(small), "--quiet"]),
                           ("diff", ["diff", "--traces", str(small), str(twin)])):
            print(f"\n-- profile of {name} on {small} --")
            print(profile(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
