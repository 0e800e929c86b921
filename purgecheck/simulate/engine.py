"""The simulator's engine for large inputs: the same model run by PyPy in a child process.

`purgecheck simulate --engine pypy` (or `auto` on a large input) reads and converts its
input in CPython as always (purgecheck/simulate/program.py: a recording's timed ops; a named
workload's calls), writes them to a file, and runs each glibc version and mimalloc design
on them in a `pypy3` child (Debian's PyPy 7.3.11: Python 3.9, no numpy), which writes each
run back. The child runs the very code CPython would (purgecheck/simulate/mimalloc.py and
glibc.py on model/), so every figure is the same under both (tests/test_simulate_engine.py
hashes each run's `as_json`); the JIT takes seconds to warm up and then runs the model 2 to
5 times faster on a program of a million calls (docs/simulate-guide.md, issue 29's ninth
and twelfth rounds).

The files, in a plain format both interpreters read (pickle, protocol 4, of tuples,
dicts and numbers only: no class of the project's): the input, in chunks of plain tuples,
(ms, thread, op name, args, record) for timed ops, the fields of `Call` for calls; a
header, a dict of what to run (the jobs: ("glibc", version) or ("mimalloc", design)) and
how (the workload's idle, the sampling step, the park after silence). The child reads the
input once into a list when it is at most KEEP_OPS long (as program.py keeps a pass) and
again for each run when it is longer, so its memory stays bounded (a kept input of timed
ops for the mimalloc designs alone is converted to their calls once, as it is read), and
writes back a list:
for each run, its `as_json` and its CPU seconds (or, when the model refused the input, the
error CPython would have raised, as a ValueError's words).

`purgecheck replay --engine pypy` (or `auto` on a large trace) runs in the same child
(`replay_in_pypy`, the header's task "replay"): CPython reads the trace (its order and index,
numpy), the child reads its records from the file that holds them in call order
(purgecheck/formats/records.py), converts them and runs each version's glibc model
(docs/record.md, issue 29's thirteenth round).

    pypy3 -m purgecheck.simulate.engine HEADER OUTPUT      (the child; PYTHONPATH the tree)
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Iterator

PYPY = "pypy3"
ENGINES = ("auto", "cpython", "pypy")
PROTOCOL = 4  # what Python 3.9's pickle and 3.12's both read and write
CHUNK = 65_536  # ops or calls per pickled chunk
KEEP_OPS = 1_000_000  # the child keeps an input of up to this many in memory
# `auto` runs on PyPy from this many ops or calls: below it the JIT's warm-up takes the
# gain (docs/simulate-guide.md, twelfth round)
AUTO_FROM = 200_000
# `replay --engine auto` runs the model in PyPy from this many records of a recorder's trace
# times the versions replayed (a heaptrack file, whose length is not known before it is read,
# on CPython): below it the child's start and the JIT's warm-up take the gain. Measured
# (docs/record.md, fourteenth round), one version: the perl hash of 141,797 records 0.63x,
# of 282,009 records 1.11x, of 1.05 M records 1.77x.
REPLAY_AUTO_FROM = 250_000
ROOT = Path(__file__).resolve().parents[2]
# PyPy's young generation (its default here: 1 MB): the models make short-lived tuples and
# chunks at every op; 16 MB took 8 % off the replay of the perl hash of 1 M calls, with
# the same peak RSS (docs/record.md, thirteenth round). A PYPY_GC_NURSERY of the caller's wins.
NURSERY = "16MB"
MISSING = f"--engine pypy: {PYPY} is not on PATH (make setup installs it)"


class EngineError(RuntimeError):
    """The PyPy child could not run (not found, or it failed)."""


def pypy_path() -> str | None:
    return shutil.which(PYPY)


# -- the parent's side ------------------------------------------------------------------------

def write_rows(f, rows: Iterable[tuple], timed_ops: bool) -> int:
    """`rows` (timed ops, or calls) as chunks of plain tuples; how many."""
    n = 0
    chunk: list[tuple] = []
    for row in rows:
        chunk.append((row[0], *row[1]) if timed_ops else tuple(row))
        if len(chunk) == CHUNK:
            pickle.dump(chunk, f, protocol=PROTOCOL)
            n += len(chunk)
            chunk = []
    if chunk:
        pickle.dump(chunk, f, protocol=PROTOCOL)
        n += len(chunk)
    return n


def run_child(folder: Path, header: dict, quiet: bool):
    """The child run on `header` (its task: a dict the child reads) in `folder`: what it
    wrote back. Its progress lines go to stderr unless `quiet` (then kept for an error)."""
    pypy = pypy_path()
    if pypy is None:
        raise EngineError(MISSING)
    head, out = folder / "header.pickle", folder / "output.pickle"
    with open(head, "wb") as f:
        pickle.dump(header, f, protocol=PROTOCOL)
    env = {"PYPY_GC_NURSERY": NURSERY, **os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([pypy, "-m", "purgecheck.simulate.engine", str(head), str(out)],
                          env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE if quiet else None)
    if done.returncode != 0:
        tail = (done.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
        raise EngineError(f"the {PYPY} child failed (exit {done.returncode})"
                          + (f": {tail[0]}" if tail else ""))
    with open(out, "rb") as f:
        return pickle.load(f)


class Input:
    """An input written to a temporary folder for the child: `size` timed ops or calls."""

    def __init__(self, rows: Iterable[tuple], timed_ops: bool) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="purgecheck-engine-")
        self.timed_ops = timed_ops
        self.path = Path(self.dir.name) / "input.pickle"
        with open(self.path, "wb") as f:
            self.size = write_rows(f, rows, timed_ops)

    def run(self, jobs: list[tuple[str, str]], workload, sample_ms: float,
            park_after_ms: float | None, quiet: bool) -> list[tuple[dict, float]]:
        """Each job, ("glibc", version) or ("mimalloc", design), run in the child on
        `workload`'s idle: each run's `as_json` and the child's CPU seconds for it. Its
        progress lines go to stderr unless `quiet`."""
        header = {"task": "simulate", "rows": str(self.path), "size": self.size,
                  "keep": KEEP_OPS, "timed_ops": self.timed_ops,
                  "jobs": jobs, "quiet": quiet, "name": workload.name,
                  "idle": workload.idle, "idle_ms": workload.idle_ms,
                  "collect_at_end": workload.collect_at_end,
                  "idle_turns": workload.idle_turns, "sample_ms": sample_ms,
                  "park_after_ms": park_after_ms}
        result = run_child(Path(self.dir.name), header, quiet)
        if isinstance(result, dict):  # the model refused the input: as CPython would say it
            raise ValueError(result["error"])
        return result

    def close(self) -> None:
        self.dir.cleanup()


def design_run(doc: dict):
    """A DesignRun back from its `as_json`."""
    from purgecheck.simulate.result import DesignRun, Sample
    return DesignRun(**{**doc, "samples": [Sample(**s) for s in doc["samples"]]})


def simulate_in_pypy(rows: Iterable[tuple], timed_ops: bool, jobs: list[tuple[str, str]],
                     workload, sample_ms: float, park_after_ms: float | None,
                     quiet: bool) -> list:
    """`jobs` on `rows` in a PyPy child: the DesignRuns, as CPython would have made them."""
    inp = Input(rows, timed_ops)
    try:
        return [design_run(doc) for doc, _ in inp.run(jobs, workload, sample_ms,
                                                      park_after_ms, quiet)]
    finally:
        inp.close()


def replay_in_pypy(img, versions: list[str], settings: dict[str, int], overcommit_2: bool,
                   quiet: bool = True) -> tuple[dict, dict, object]:
    """`purgecheck replay`'s predictions (glibc/replay.predict) made in a PyPy child: the
    system calls of each version's model by category, the child's CPU seconds for each
    version, and the conversion's figures. CPython has read the image (its order and its
    index: alloc_stream.StreamImage); the child reads the records from the file that holds
    them in call order (formats/records.RecordImage, no numpy) and converts and runs them
    op by op, its collector on (memory that does not grow with the ops). A heaptrack file
    the child reads itself.
    A record the model or the conversion refuses: ReplayError with CPython's words."""
    from purgecheck.formats.heaptrack import HeaptrackImage
    from purgecheck.glibc.fromtrace import Conversion
    from purgecheck.glibc.replay import ReplayError
    image = (("heaptrack", img.source) if isinstance(img, HeaptrackImage)
             else ("records", *img.in_order(), img.index()))
    header = {"task": "replay", "image": image, "versions": versions,
              "settings": settings, "overcommit_2": overcommit_2}
    with tempfile.TemporaryDirectory(prefix="purgecheck-engine-") as folder:
        result = run_child(Path(folder), header, quiet)
    if "error" in result:
        raise ReplayError(result["error"])
    counts = {name: c for name, c, _ in result["runs"]}
    seconds = {name: cpu for name, _, cpu in result["runs"]}
    return counts, seconds, Conversion(**result["conversion"])


# -- the child's side -------------------------------------------------------------------------

def read_rows(path: str, timed_ops: bool) -> Iterator[tuple]:
    """The rows of the input, as the simulator takes them: (ms, GlibcOp), or Call."""
    from purgecheck.formats.calls import Call
    from purgecheck.formats.glibc_ops import GlibcOp
    new = tuple.__new__
    with open(path, "rb") as f:
        while True:
            try:
                chunk = pickle.load(f)
            except EOFError:
                return
            if timed_ops:
                for t, *op in chunk:
                    yield t, new(GlibcOp, op)
            else:
                for c in chunk:
                    yield new(Call, c)


def run_job(job: tuple[str, str], stream, timed_ops: bool, workload, sample_ms: float,
            park_after_ms: float | None):
    """One job, ("glibc", version) or ("mimalloc", design), on the rows `stream()` gives
    (timed ops, or calls): its DesignRun. The child's runs and the benchmark's CPython side
    (purgecheck/bench/pypy.py) are this one call."""
    from purgecheck.simulate.glibc import simulate_ops
    from purgecheck.simulate.mimalloc import calls_of, simulate
    side, which = job
    if side == "glibc":
        (run,) = simulate_ops(workload.name, stream, [which], idle_ms=workload.idle_ms,
                              sample_ms=sample_ms)
        return run
    calls = calls_of(stream()) if timed_ops else stream()
    return simulate(workload, which, sample_ms=sample_ms, park_after_ms=park_after_ms,
                    calls=calls)


def replay_child(h: dict) -> dict:
    """The child's side of replay_in_pypy: each version's counts and CPU seconds."""
    from model.glibc.versions import VERSIONS
    from purgecheck.formats.heaptrack import HeaptrackImage
    from purgecheck.formats.records import RecordImage
    from purgecheck.glibc.fromtrace import Conversion, ConvertError
    from purgecheck.glibc.replay import ReplayError, run_model
    kind, *where = h["image"]
    img = HeaptrackImage(Path(where[0])) if kind == "heaptrack" else RecordImage(*where)
    runs = []
    stats = Conversion()
    try:
        for name in h["versions"]:
            stats = Conversion()
            c0 = time.process_time()
            p = run_model(img, VERSIONS[name], h["settings"], h["overcommit_2"], stats,
                          direct=False)
            runs.append((name, p.count(), time.process_time() - c0))
    except (ConvertError, ReplayError) as e:
        return {"error": str(e)}
    return {"runs": runs, "conversion": dict(stats.__dict__)}


def child(header_path: str, out: str) -> int:
    with open(header_path, "rb") as f:
        h = pickle.load(f)
    if h["task"] == "replay":
        with open(out, "wb") as f:
            pickle.dump(replay_child(h), f, protocol=PROTOCOL)
        return 0
    from purgecheck.simulate.workloads import Workload  # the simulator's task only
    kept = calls = None
    if h["size"] <= h["keep"]:
        if h["timed_ops"] and all(side == "mimalloc" for side, _ in h["jobs"]):
            # designs alone: the calls made once as the ops are read, for every design
            # (calls_of on a million ops was a sixth of each design's run: fifteenth round);
            # beside glibc versions the ops are kept and converted at each design's run, as
            # keeping the calls too took a third more memory (1.2 GB against 0.88 GB)
            from purgecheck.simulate.mimalloc import calls_of
            calls = list(calls_of(read_rows(h["rows"], True)))
        else:
            kept = list(read_rows(h["rows"], h["timed_ops"]))

    def stream() -> Iterator[tuple]:
        return iter(kept) if kept is not None else read_rows(h["rows"], h["timed_ops"])
    w = Workload(h["name"], "", lambda: iter(()), h["idle"], h["idle_ms"],
                 collect_at_end=h["collect_at_end"], idle_turns=h["idle_turns"])
    results: list | dict = []
    try:
        for side, which in h["jobs"]:
            if not h["quiet"]:
                on = f"on glibc {which}" if side == "glibc" else f"under {which}"
                print(f"simulating {w.name} {on} (pypy) ...", file=sys.stderr, flush=True)
            c0 = time.process_time()
            if side == "mimalloc" and calls is not None:
                run = run_job((side, which), lambda: iter(calls), False, w, h["sample_ms"],
                              h["park_after_ms"])
            else:
                run = run_job((side, which), stream, h["timed_ops"], w, h["sample_ms"],
                              h["park_after_ms"])
            results.append((run.as_json(), time.process_time() - c0))
    except ValueError as e:
        results = {"error": str(e)}
    with open(out, "wb") as f:
        pickle.dump(results, f, protocol=PROTOCOL)
    return 0


if __name__ == "__main__":
    raise SystemExit(child(*sys.argv[1:]))
