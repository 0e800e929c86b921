"""Op scripts: what a program does, one operation per line, for the model and the C driver.

A line is `THREAD OP ARGS...` (THREAD a small integer), or a global op without a thread
(`clock`, `fail_discard`). `#` starts a comment. The grammar is in docs/op-script.md; both the
model runner and reference_c's driver read exactly this format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from model.epoch import ADVANCE_PCS
from purgecheck.formats import excerpt


class OpScriptError(Exception):
    """Bad op script: names the source, the line and what was expected."""

    def __init__(self, source: str, line: int, msg: str) -> None:
        super().__init__(f"{source}:{line}: {msg}")
        self.source, self.line, self.msg = source, line, msg


@dataclass(frozen=True)
class Op:
    thread: int | None  # None for a global op
    name: str
    args: tuple
    line: int = 0

    def render(self) -> str:
        head = [] if self.thread is None else [str(self.thread)]
        return " ".join(head + [self.name] + [str(a) for a in self.args])


MiB = 1 << 20
MAX_THREAD = 1023  # the C reference's MI_MAX_THREADS is 1024
MAX_NAME = 64  # characters of a name
# The range of each kind of integer argument (docs/op-script.md, "Ranges"): a block up to
# 256 MiB (both sides write every OS page of it), a count up to 2^32 (epoch_skip crosses the
# 32-bit wraparound once), a scavenger loop up to 10^7 ms, a clock step up to 2^40 ms either
# way (a year is 2^35 ms): every value and every sum of them fits the C side's 64 bits.
RANGES = {"size": (0, 256 * MiB), "count": (0, 1 << 32), "ms": (0, 10_000_000),
          "int": (-(1 << 40), 1 << 40)}
# C's strtok separators (reference_c/driver.c); any other byte below 0x21, 0x7f or a byte
# above it in an op is refused by both sides, so that they read a line the same way
SEPARATORS = " \t\r\v\f"
# The steps of the epoch advance an interleaved op (fork_at, clock_at) can be placed before:
# model/epoch.py's program counters of one call, in order (not the wait, not done).
ADVANCE_STEPS = ADVANCE_PCS


@dataclass(frozen=True)
class OpSpec:
    name: str
    threaded: bool
    arg_types: tuple[Callable, ...]  # int or str per argument
    arg_names: tuple[str, ...]
    help: str
    nonnegative: tuple[bool, ...] = ()  # per argument: sizes, counts and durations are >= 0
    kinds: tuple[str, ...] = ()  # per argument: str, or a key of RANGES


SPECS: dict[str, OpSpec] = {}


def op_spec(name: str, args: str = "", threaded: bool = True, help: str = "") -> None:
    """Declare an op: `args` like "name:str size:size" (int: signed; size, count, ms: an
    int >= 0 with the range RANGES gives)."""
    names, types, counts, kinds = [], [], [], []
    for a in args.split():
        n, t = a.split(":")
        names.append(n)
        types.append(str if t in ("str", "step") else int)
        counts.append(t not in ("str", "step", "int"))
        kinds.append(t)
    SPECS[name] = OpSpec(name, threaded, tuple(types), tuple(names), help, tuple(counts),
                         tuple(kinds))


# The page-level ops (seed 000 change (1)); the epoch and driver ops are declared beside them.
op_spec("malloc", "name:str size:size", help="allocate SIZE bytes, write the whole block")
op_spec("zalloc", "name:str size:size", help="allocate SIZE zeroed bytes")
op_spec("malloc_aligned", "name:str size:size align:size",
        help="mi_malloc_aligned: SIZE bytes at a multiple of ALIGN (rounded up to a power of two, "
             "4 MiB at most), written")
op_spec("free", "name:str", help="free NAME (owner: local_free; other thread: xthread_free)")
op_spec("realloc", "name:str new:str size:size", help="realloc NAME to SIZE, result named NEW")
op_spec("collect", help="collect the thread's pages without unpurge")
op_spec("collect_force", help="mi_collect(true): collect the thread's pages without unpurge; "
                               "a page left with no live block goes back to the arena")
op_spec("walk", help="collect and run the holes walk on every page of the thread's heap")
op_spec("heap_destroy", help="mi_heap_destroy of the thread's heap")
op_spec("heap_delete", help="mi_heap_delete of the thread's heap into heap 0's thread")
op_spec("fail_discard", "count:count", threaded=False, help="the next COUNT discards fail")
# The epoch, the drivers and the park handoff (seed 000 change (2)).
op_spec("clock", "ms:int", threaded=False, help="advance the virtual clock by MS milliseconds")
op_spec("idle", help="mi_on_thread_idle: advance the epoch, collect, sweep the thread's heaps "
                     "and the abandoned pages")
op_spec("pending", help="mi_on_thread_idle_pending: log whether the last sweep left blocks")
op_spec("park", help="mi_on_thread_idle_start: park, handing the sweeps to the scavenger")
op_spec("unpark", help="mi_on_thread_idle_end: leave the park")
op_spec("scavenge", threaded=False, help="one pass of the scavenger over the parked threads")
op_spec("scavenger", "ms:ms", threaded=False,
        help="the scavenger loop for MS ms: sweep the due parks, sleep until the next is due")
op_spec("abandon", help="the thread exits: its pages go to the abandoned map")
op_spec("reclaim", "name:str", help="the thread takes the abandoned page holding NAME")
op_spec("fork", help="fork: the child records a new epoch start if MOVING was held")
op_spec("fork_at", "step:step", help="arm a fork by this thread at STEP of the next epoch advance")
op_spec("clock_at", "step:step ms:int", threaded=False,
        help="arm a clock step of MS ms (may be negative) at STEP of the next epoch advance")
op_spec("epoch_skip", "count:count", threaded=False,
        help="COUNT epochs pass untouched (for the 2^32 wraparound scenario)")


def _convert(t: Callable, v: str) -> object:
    if t is int:
        return int(v, 0)
    return v


def _words(text: str, line: int, source: str) -> list[str]:
    """The words of a line as the C driver splits them; a byte it would read otherwise is an
    error naming it."""
    body = text.split("#", 1)[0]
    for ch in body:
        if (ord(ch) < 0x21 or ord(ch) > 0x7e) and ch not in SEPARATORS:
            raise OpScriptError(source, line, f"character {ord(ch):#04x} is not allowed in an "
                                              f"op (words are printable ASCII, separated by "
                                              f"spaces or tabs)")
    for sep in SEPARATORS[1:]:
        body = body.replace(sep, " ")
    return body.split()


def parse_line(text: str, line: int = 0, source: str = "<script>") -> Op | None:
    words = _words(text, line, source)
    if not words:
        return None
    thread: int | None = None
    if words[0].startswith("-") and words[0][1:].isdigit():
        raise OpScriptError(source, line, f"thread {words[0]}: thread numbers are 0 or more")
    if words[0].isdigit():
        thread = int(words[0])
        if thread > MAX_THREAD:
            raise OpScriptError(source, line, f"thread {words[0][:24]}: thread numbers are "
                                              f"0..{MAX_THREAD}")
        words = words[1:]
        if not words:
            raise OpScriptError(source, line, "expected an operation after the thread number")
    name, raw = words[0], words[1:]
    spec = SPECS.get(name)
    if spec is None:
        raise OpScriptError(source, line, f"unknown operation {excerpt(name)}; expected one of "
                                          f"{', '.join(sorted(SPECS))}")
    if spec.threaded and thread is None:
        raise OpScriptError(source, line, f"{name} needs a thread number first: "
                                          f"'1 {name} {' '.join(spec.arg_names)}'")
    if not spec.threaded and thread is not None:
        raise OpScriptError(source, line, f"{name} is global: write it without a thread")
    if len(raw) != len(spec.arg_types):
        want = " ".join(spec.arg_names) or "no arguments"
        raise OpScriptError(source, line, f"{name} takes {want}, got {len(raw)} argument(s)")
    try:
        args = tuple(_convert(t, v) for t, v in zip(spec.arg_types, raw))
    except ValueError:
        raise OpScriptError(source, line, f"{name}: expected integers for "
                                          f"{[n for n, t in zip(spec.arg_names, spec.arg_types) if t is int]}")
    for n, v, nonneg, kind in zip(spec.arg_names, args, spec.nonnegative, spec.kinds):
        if nonneg and v < 0:
            raise OpScriptError(source, line, f"{name}: {n} must be 0 or more, got {v}")
        if kind == "step" and v not in ADVANCE_STEPS:
            raise OpScriptError(source, line, f"{name}: {n} {v[:24]!r} is not a step of the "
                                              f"advance; expected one of "
                                              f"{', '.join(ADVANCE_STEPS)}")
        if kind == "str" and len(v) > MAX_NAME:
            raise OpScriptError(source, line, f"{name}: {n} is {len(v)} characters long; a "
                                              f"name has at most {MAX_NAME}")
        if kind in RANGES and not RANGES[kind][0] <= v <= RANGES[kind][1]:
            lo, hi = RANGES[kind]
            shown = str(v) if len(str(v)) <= 24 else f"{str(v)[:20]}... ({len(str(v))} digits)"
            raise OpScriptError(source, line, f"{name}: {n} is {shown}, outside {lo}..{hi}")
    return Op(thread, name, args, line)


# the ops that look a name up, and those that give one (docs/op-script.md: a freed name
# stays known)
NAME_USERS = {"free": 0, "realloc": 0, "reclaim": 0}
NAME_GIVERS = {"malloc": 0, "zalloc": 0, "realloc": 1, "malloc_aligned": 0}


def parse_script(text: str, source: str = "<script>") -> list[Op]:
    """Every op of the script, checked before anything runs: the grammar, the ranges, and
    that each name an op looks up was given by an op before it."""
    ops = []
    known: set[str] = set()
    for n, line in enumerate(text.split("\n"), 1):
        op = parse_line(line, n, source)
        if op is None:
            continue
        if op.name in NAME_USERS and op.args[NAME_USERS[op.name]] not in known:
            raise OpScriptError(source, n, f"{op.name}: no allocation named "
                                           f"{op.args[NAME_USERS[op.name]]!r} before this line")
        if op.name in NAME_GIVERS:
            known.add(op.args[NAME_GIVERS[op.name]])
        ops.append(op)
    return ops


def render_script(ops: Iterable[Op]) -> str:
    return "".join(op.render() + "\n" for op in ops)
