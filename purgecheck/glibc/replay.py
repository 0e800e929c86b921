"""Replay a recorded program (docs/record.md) on the glibc model and on this machine's glibc.

`predict` runs the image's calls, as ops (purgecheck/glibc/fromtrace.py), on the model of
each version and counts the system calls it predicts per category. `measure` writes the same
ops as a script for reference_c/glibc_driver, which runs them in recorded order, each in its
thread, one at a time, under strace. When the counts differ, `locate` runs both again op by
op (the driver with a getpid(2) mark before each op) and names the first op after which the
model's and the real heap's system calls part, with the model's state there.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from model.glibc.malloc import OutOfMemory
from model.glibc.process import Process, ScriptError
from model.glibc.resident import ResidentLimit
from model.glibc.versions import VERSIONS, Version, version_for_release
from purgecheck.formats.heaptrack import HeaptrackImage, is_heaptrack
from purgecheck.formats.glibc_ops import GlibcOp
from purgecheck.glibc.fromtrace import ConvertError, Conversion, image_to_replay, to_ops
from purgecheck.glibc.modelrun import apply, handlers

if TYPE_CHECKING:  # the readers need numpy, which the PyPy child (run_model) lacks; the real
    # glibc's side (--real: strace, the driver) is imported where it runs, not by the child
    from purgecheck.formats.alloc_stream import StreamImage
    from purgecheck.formats.alloc_trace import Image
    from purgecheck.glibc.trace import TraceResult

# strace stops only at the traced calls (the futexes that serialise the driver's threads go
# through untouched): the real replay's speed is the driver's.
FAST_STRACE = ("--seccomp-bpf",)
OP_MARK = "getpid"


class ReplayError(Exception):
    """The model cannot run a recorded call (out of memory, more arenas than modelled)."""


@dataclass
class Divergence:
    op_index: int  # the op's number in the replay (0-based)
    op: GlibcOp  # its `line` is the record's number in the trace file
    model: list[str]  # the categories of the model's calls for that op
    real: list[str]
    state: list[str]  # the model's state right after the op


@dataclass
class Replay:
    source: str
    image: int
    pid: int
    conversion: Conversion
    predicted: dict[str, dict[str, int]] = field(default_factory=dict)
    model_seconds: dict[str, float] = field(default_factory=dict)
    release: str | None = None
    installed: str | None = None
    measured: TraceResult | None = None
    real_seconds: float = 0.0
    mismatches: list[str] = field(default_factory=list)
    divergence: Divergence | None = None
    addresses_checked: bool = False
    invariant_checks: int = 0
    prefix: str | None = None  # why the figures cover only part of the run (prefix_reason)
    engine: str = "cpython"  # what ran the model's predictions: cpython, or pypy (a child)
    memory: Memory | None = None  # with --real: resident memory, real and model

    @property
    def ok(self) -> bool:
        return not self.mismatches


def load(path: str | Path, image: int | None = None) -> tuple[Image, int]:
    from purgecheck.formats.alloc_trace import read_trace
    trace = read_trace(path)
    n = image_to_replay(trace.images) if image is None else image
    if not 0 <= n < len(trace.images):
        raise ValueError(f"--image: expected 0..{len(trace.images) - 1}, got {n}")
    return trace.images[n], n


def load_stream(path: str | Path, image: int | None = None) -> tuple[StreamImage, int]:
    """`load`, read in call order a chunk at a time (purgecheck/formats/alloc_stream.py):
    what `replay` uses, so that a trace of 10 M calls replays in bounded memory. A heaptrack
    file (purgecheck/formats/heaptrack.py) is recognised and read as one image."""
    from purgecheck.formats.alloc_stream import stream_images
    if is_heaptrack(path):
        if image not in (None, 0):
            raise ValueError(f"--image: a heaptrack file has one image (0), got {image}")
        return HeaptrackImage(Path(path)), 0
    images = stream_images(path)
    n = image_to_replay(images) if image is None else image
    if not 0 <= n < len(images):
        raise ValueError(f"--image: expected 0..{len(images) - 1}, got {n}")
    return images[n], n


def ops_of(img, stats: Conversion | None = None, process: Process | None = None,
           direct: bool = True):
    """The ops of a recorded image (fromtrace.to_ops) or of a heaptrack file. With
    `process`, a recorded image's blocks are named by their address in its dict and, when
    `direct`, its short-path ops are made on it as they are converted (to_ops): the ops
    left to run."""
    if isinstance(img, HeaptrackImage):
        return img.glibc_ops(stats)
    return to_ops(img, stats, process, direct)


def prefix_reason(img, stats: Conversion) -> str | None:
    """Why a replay covers only a prefix of the program's run, or None when it covers all
    of it: the conversion stopped at a call the file cannot explain, the recording has a gap
    (a call number missing: buffers that never reached the file), or it has no exit record
    (killed; docs/record.md). An image that exec'ed ended too. A heaptrack file: None."""
    if stats.stopped is not None:
        return f"stopped before record {stats.stopped[0]}: {stats.stopped[1]}"
    if isinstance(img, HeaptrackImage):
        return None
    if img.cut is not None:
        return f"the recording has a gap at call {img.cut}: the calls from there are left out"
    if not (img.has_kind("end") or img.has_kind("exec")):
        return "the recording has no exit record (the program was killed, or calls were lost)"
    return None


@contextmanager
def collector_paused():
    """Python's cyclic garbage collector off while a replay runs, as it was after.

    A replay makes and drops millions of objects (chunks, ops, the conversion's tuples) and
    keeps up to a million chunks live; while it runs none of them becomes garbage only through
    a cycle (a chunk dropped from its segment is freed by its reference count), so the
    collector finds nothing, but each of its full passes walks every live object: 10 % of the
    CPU at 900,000 live blocks (perl hash, 400,000 keys), a cost that grew with the heap. When
    the replay ends, its model as a whole (the chunks linked to their neighbours) is garbage
    in cycles: 347,741 chunks after the perl hash of 150,000 keys, which the command leaves to
    the process's end (cli.entry: docs/record.md, fifteenth round).

    Under PyPy (the replay's engine, purgecheck/simulate/engine.py) the collector stays on:
    there `gc.disable()` stops its major collections too, and memory grew with the ops
    (2.9 GB on a 10 M-call trace, 114 MB with it on: docs/record.md, ninth round)."""
    if sys.implementation.name == "pypy":
        yield
        return
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run_model(img: Image, version: Version, settings: dict[str, int], overcommit_2: bool,
              stats: Conversion | None = None, after_op=None, direct: bool = True) -> Process:
    """The model after every op of the image; ReplayError / ConvertError name the record.
    `direct`: the conversion makes the short path's ops on the process (to_ops), CPython's
    shortcut; without it, every op is converted and then run, its block named by address
    all the same (faster under PyPy: docs/record.md, ninth and fourteenth rounds)."""
    p = Process(version, dict(settings), overcommit_2)
    do = handlers(p)
    op = None
    try:
        with collector_paused():
            if after_op is None:  # `purgecheck replay`: most of a replay's time
                try:
                    for op in ops_of(img, stats, p, direct):
                        thread, name, args, _ = op  # unpacked: cheaper than three attributes
                        do[name](thread, *args)
                except (ScriptError, OutOfMemory, ResidentLimit):
                    # the failing op may be one the conversion made on `p` (not `op`), and
                    # it names its block by address: the run op by op names it, failing at
                    # the same op (the model is deterministic)
                    return run_model(img, version, settings, overcommit_2, Conversion(),
                                     lambda i, op, p: False)
            else:
                for i, op in enumerate(ops_of(img, stats)):
                    do[op.name](op.thread, *op.args)
                    if after_op(i, op, p):
                        break
    except (ScriptError, OutOfMemory, ResidentLimit) as e:
        raise ReplayError(f"{img.source}: record {op.line}: the model cannot run "
                          f"`{op.render()}`: {e}") from None
    return p


def predict(img: Image, versions: list[str], settings: dict[str, int],
            overcommit_2: bool = False, engine: str = "cpython") -> tuple[dict, dict, Conversion]:
    """Each version's system calls by category, its CPU seconds, the conversion's figures;
    `engine` "pypy": made in a PyPy child (purgecheck/simulate/engine.py), the same."""
    if engine == "pypy":
        from purgecheck.simulate.engine import replay_in_pypy
        return replay_in_pypy(img, versions, settings, overcommit_2)
    counts, seconds, stats = {}, {}, Conversion()
    for name in versions:
        stats = Conversion()
        t0 = time.process_time()
        p = run_model(img, VERSIONS[name], settings, overcommit_2, stats)
        seconds[name] = time.process_time() - t0
        counts[name] = p.count()
    return counts, seconds, stats


def invariant_failures(img: Image, version: Version, limit: int = 5) -> tuple[int, list[str]]:
    """Every glibc-arena invariant (model/glibc/invariants.py) on every arena after every op:
    (checks made, the first failures, each naming its record)."""
    from model.invariants import load_registry
    from purgecheck.engines import load_engines

    load_engines()  # the engines register the invariants only they check
    invs = [i for i in load_registry().values() if i.scope == "glibc-arena" and i.predicate]
    failures: list[str] = []
    checks = 0

    def after(i: int, op: GlibcOp, p: Process) -> bool:
        nonlocal checks
        for av in p.arenas:
            for inv in invs:
                checks += 1
                reason = inv.predicate(av)
                if reason:
                    failures.append(f"record {op.line} ({op.render()}): {inv.id}: {reason}")
        return len(failures) >= limit

    run_model(img, version, {}, False, after_op=after)
    return checks, failures


def write_script(img: Image, path: Path) -> int:
    n = 0
    with open(path, "w") as f:
        f.write(f"# {img.source}, image pid {img.pid}: written by purgecheck replay\n")
        for op in ops_of(img):
            f.write(op.render() + "\n")
            n += 1
    return n


def measure(img: Image, env: dict[str, str]) -> tuple[TraceResult, float]:
    from purgecheck.glibc.trace import run_traced
    with tempfile.TemporaryDirectory(prefix="purgecheck-replay-") as tmp:
        script = Path(tmp) / "replay.ops"
        write_script(img, script)
        t0 = time.perf_counter()
        result = run_traced(script, env, strace_args=FAST_STRACE)
        return result, time.perf_counter() - t0


@dataclass
class Memory:
    """Resident memory and page faults of a replay: the real driver's while it runs the ops
    (reference_c/glibc_driver --memory: its minor faults, its peak resident set less the
    resident set it had when the ops began, its own tables) beside the model's
    (model/glibc/resident.py: its peak of resident pages, pages written while not resident,
    those of them the allocator had given back). The driver writes no block but through
    calloc and realloc's copy; neither does the model's replay but through calloc."""

    real_peak_kb: int
    real_minor_faults: int
    model_peak_kb: int
    model_faults: int
    model_refaults: int

    def as_json(self) -> dict:
        return dict(self.__dict__)


def memory(img: Image, version: Version, settings: dict[str, int], env: dict[str, str],
           overcommit_2: bool) -> Memory:
    """The real driver's faults and peak resident set over the ops (without strace), and the
    model's."""
    import os
    import subprocess
    from purgecheck.glibc.trace import driver_path

    with tempfile.TemporaryDirectory(prefix="purgecheck-replay-") as tmp:
        script = Path(tmp) / "replay.ops"
        write_script(img, script)
        out = subprocess.run([str(driver_path()), "--memory", str(script)],
                             env={**os.environ, **env}, capture_output=True, text=True)
    line = next((ln.split() for ln in out.stdout.splitlines() if ln.startswith("memory ")), None)
    if out.returncode or line is None:
        raise ReplayError(f"the driver failed on the replay's script (exit {out.returncode})")
    minflt, hwm, rss_start = (int(v) for v in line[1:4])
    peak = [0]

    def after(i: int, op: GlibcOp, p: Process) -> bool:
        peak[0] = max(peak[0], p.resident.pages)
        return False
    p = run_model(img, version, settings, overcommit_2, after_op=after)
    return Memory(max(0, hwm - rss_start), minflt, peak[0] * 4, p.resident.faults,
                  p.resident.refaults)


def real_per_op(img: Image, env: dict[str, str]) -> list[list[str]]:
    """The real calls' categories op by op (the driver's --op-marks run)."""
    from purgecheck.glibc.trace import Classifier, run_traced
    with tempfile.TemporaryDirectory(prefix="purgecheck-replay-") as tmp:
        script = Path(tmp) / "replay.ops"
        write_script(img, script)
        calls = run_traced(script, env, driver_args=("--op-marks",),
                           traced="brk,mmap,munmap,mremap,mprotect,madvise,getppid,"
                                  + OP_MARK, strace_args=FAST_STRACE, raw=True)
    per_op: list[list[str]] = []
    cl, marks = Classifier(), 0
    for c in calls:
        if c.name == "getppid":
            marks += 1
            continue
        if c.name == OP_MARK:
            if marks == 1:
                per_op.append([])
            continue
        category = cl.classify(c)
        if marks == 1 and per_op and category:
            per_op[-1].append(category)
        elif marks == 1 and per_op and category is None:
            per_op[-1].append(f"unclassified:{c.name}")
    return per_op


@dataclass
class AddressDifference:
    op_index: int
    op: GlibcOp
    where: str  # "main" (offset from the main arena's first block), "heap" (within 64 MiB)
    real: int
    model: int


def driver_addresses(script: Path) -> dict[int, int]:
    """The address each allocating op of a script got from the real glibc, by script line
    (reference_c/glibc_driver --addresses; no strace)."""
    import subprocess
    from purgecheck.glibc.trace import driver_path

    out = subprocess.run([str(driver_path()), "--addresses", str(script)],
                         capture_output=True, text=True, check=True).stdout
    real = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit():
            real[int(parts[0])] = 0 if parts[2] == "(nil)" else int(parts[2], 16)
    return real


def address_difference(ops, real: dict[int, int], version: Version, line_of,
                       settings: dict[str, int] | None = None) -> AddressDifference | None:
    """The first op whose block the model puts elsewhere than glibc did (`real`, by script
    line; `line_of(i, op)` is op i's line): a block in the main arena is compared by its
    offset from the main arena's first block, one in a thread heap by its offset in its
    64 MiB heap, an mmapped one by its offset in its page. No difference means the model
    chose the same chunk as glibc for every call, which is more than equal system calls."""
    from model.glibc.constants import HEAP_MAX_SIZE, PAGESIZE
    from model.glibc.heap import MMAPPED

    p = Process(version, dict(settings or {}), False)
    base: tuple[int, int] | None = None
    for i, op in enumerate(ops):
        if op.name in ("repeat", "end"):
            continue
        apply(p, op)
        got = real.get(line_of(i, op))
        if got is None or op.name in ("free", "trim", "mallopt", "start", "join"):
            continue
        c = p.blocks.get(op.args[0])
        if c is None:
            continue
        model = c.addr + 16
        if c.state == MMAPPED:
            where, model, got = "mmapped", model % PAGESIZE, got % PAGESIZE
        elif c.segment.arena.is_main:
            where = "main"
            base = base or (got, model)
            model, got = model - base[1], got - base[0]
        else:
            where, model, got = "heap", model % HEAP_MAX_SIZE, got % HEAP_MAX_SIZE
        if model != got:
            return AddressDifference(i, op, where, got, model)
    return None


def first_address_difference(img: Image, version: Version) -> AddressDifference | None:
    """address_difference of a recorded image (its script has a comment line first)."""
    with tempfile.TemporaryDirectory(prefix="purgecheck-replay-") as tmp:
        script = Path(tmp) / "replay.ops"
        write_script(img, script)
        real = driver_addresses(script)
    return address_difference(ops_of(img), real, version, lambda i, op: i + 2)


def script_address_difference(text: str, version: Version) -> AddressDifference | None:
    """address_difference of a glibc op script without repeat blocks (the driver reports
    an address by script line, so each op must have a line of its own)."""
    from purgecheck.formats.glibc_ops import expand, parse_script

    if any(op.name == "repeat" for op in parse_script(text)):
        raise ValueError("addresses are compared line by line: unroll the repeat blocks")
    with tempfile.TemporaryDirectory(prefix="purgecheck-replay-") as tmp:
        script = Path(tmp) / "script.ops"
        script.write_text(text)
        real = driver_addresses(script)
    return address_difference(expand(parse_script(text)), real, version,
                              lambda i, op: op.line)


def describe(p: Process) -> list[str]:
    """The model's state, arena by arena: the top, the bins, the last trim decision."""
    out = []
    for av in p.arenas:
        sizes = sorted(c.size for c in av.bins.chunks())
        fast = sum(len(v) for v in av.fastbins.values())
        line = (f"{av.name}: top {av.top_size} bytes"
                + (f" at {av.top.addr:#x}" if av.top else "")
                + f", system_mem {av.system_mem}, {len(sizes)} free chunks in bins"
                + (f" ({sum(sizes)} bytes, largest {sizes[-1]})" if sizes else "")
                + f", {fast} in fastbins")
        out.append(line)
        if av.trims:
            r = av.trims[-1]
            out.append(f"  last trim ({r.where}): top {r.top_size}, pad {r.pad}, "
                       f"trim_threshold {r.trim_threshold}, extra {r.extra}, "
                       f"{'shrank' if r.shrunk else 'kept'}")
    mp = p.mp
    out.append(f"mp_: mmap_threshold {mp.mmap_threshold}, trim_threshold {mp.trim_threshold}, "
               f"top_pad {mp.top_pad}, {mp.n_mmaps} mmapped chunks")
    return out


def locate(img: Image, version: Version, settings: dict[str, int], env: dict[str, str],
           overcommit_2: bool) -> Divergence | None:
    """The first op whose calls differ between the model and the real glibc."""
    real = real_per_op(img, env)
    found: list[Divergence] = []
    seen = [0]

    def after(i: int, op: GlibcOp, p: Process) -> bool:
        model = [c.category for c in p.calls[seen[0]:]]
        seen[0] = len(p.calls)
        got = real[i] if i < len(real) else []
        if Counter(model) != Counter(got):
            found.append(Divergence(i, op, model, got, describe(p)))
            return True
        return False

    run_model(img, version, settings, overcommit_2, after_op=after)
    return found[0] if found else None


def choose_engine(engine: str, img, versions: int) -> str:
    """cpython or pypy: `auto` is pypy when the image's records times the `versions` to
    replay reach REPLAY_AUTO_FROM and pypy3 is on PATH."""
    if engine != "auto":
        return engine
    from purgecheck.simulate.engine import REPLAY_AUTO_FROM, pypy_path
    large = not isinstance(img, HeaptrackImage) and len(img) * versions >= REPLAY_AUTO_FROM
    return "pypy" if large and pypy_path() is not None else "cpython"


def replay(path: str | Path, versions: list[str] | None, settings: dict[str, int],
           env: dict[str, str], real: bool, image: int | None = None,
           engine: str = "cpython") -> Replay:
    """The image's predictions on each version's model (run by `engine`: cpython, pypy or
    auto), and with `real` the real glibc's, compared (in CPython)."""
    from purgecheck.glibc.compare import mismatches
    from purgecheck.glibc.trace import installed_release, may_shrink_heap

    img, n = load_stream(path, image)
    if img.refused:
        raise ValueError(f"{path}: the recording was refused (the program replaces malloc)")
    overcommit_2 = may_shrink_heap() if real else False
    names = list(VERSIONS) if versions is None else versions
    if real:
        release = installed_release()
        installed = version_for_release(release).name
        names = names if installed in names else names + [installed]
    engine = choose_engine(engine, img, len(names))
    counts, seconds, stats = predict(img, names, settings, overcommit_2, engine)
    rep = Replay(str(path), n, img.pid, stats, counts, seconds, engine=engine)
    rep.prefix = prefix_reason(img, stats)
    if not real:
        return rep
    rep.release, rep.installed = release, installed
    rep.measured, rep.real_seconds = measure(img, env)
    rep.memory = memory(img, VERSIONS[installed], settings, env, overcommit_2)
    rep.mismatches = mismatches(counts[installed], rep.measured, release)
    if rep.mismatches:
        rep.divergence = locate(img, VERSIONS[installed], settings, env, overcommit_2)
    return rep


__all__ = ["ConvertError", "Replay", "ReplayError", "replay", "describe"]
