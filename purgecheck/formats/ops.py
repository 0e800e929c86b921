"""Op scripts: what a program does, one operation per line, for the model and the C driver.

A line is `THREAD OP ARGS...` (THREAD a small integer), or a global op without a thread
(`clock`, `fail_discard`). `#` starts a comment. The grammar is in docs/op-script.md; both the
model runner and reference_c's driver read exactly this format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable


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


@dataclass(frozen=True)
class OpSpec:
    name: str
    threaded: bool
    arg_types: tuple[Callable, ...]  # int or str per argument
    arg_names: tuple[str, ...]
    help: str
    nonnegative: tuple[bool, ...] = ()  # per argument: sizes, counts and durations are >= 0


SPECS: dict[str, OpSpec] = {}


def op_spec(name: str, args: str = "", threaded: bool = True, help: str = "") -> None:
    """Declare an op: `args` like "name:str size:count" (int: signed, count: an int >= 0)."""
    names, types, counts = [], [], []
    for a in args.split():
        n, t = a.split(":")
        names.append(n)
        types.append(str if t == "str" else int)
        counts.append(t == "count")
    SPECS[name] = OpSpec(name, threaded, tuple(types), tuple(names), help, tuple(counts))


# The page-level ops (seed 000 change (1)); the epoch and driver ops are declared beside them.
op_spec("malloc", "name:str size:count", help="allocate SIZE bytes, write the whole block")
op_spec("zalloc", "name:str size:count", help="allocate SIZE zeroed bytes")
op_spec("free", "name:str", help="free NAME (owner: local_free; other thread: xthread_free)")
op_spec("realloc", "name:str new:str size:count", help="realloc NAME to SIZE, result named NEW")
op_spec("collect", help="collect the thread's pages without unpurge")
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
op_spec("scavenger", "ms:count", threaded=False,
        help="the scavenger loop for MS ms: sweep the due parks, sleep until the next is due")
op_spec("abandon", help="the thread exits: its pages go to the abandoned map")
op_spec("reclaim", "name:str", help="the thread takes the abandoned page holding NAME")
op_spec("fork", help="fork: the child records a new epoch start if MOVING was held")
op_spec("epoch_skip", "count:count", threaded=False,
        help="COUNT epochs pass untouched (for the 2^32 wraparound scenario)")


def _convert(t: Callable, v: str) -> object:
    if t is int:
        return int(v, 0)
    return v


def parse_line(text: str, line: int = 0, source: str = "<script>") -> Op | None:
    words = text.split("#", 1)[0].split()
    if not words:
        return None
    thread: int | None = None
    if words[0].startswith("-") and words[0][1:].isdigit():
        raise OpScriptError(source, line, f"thread {words[0]}: thread numbers are 0 or more")
    if words[0].isdigit():
        thread = int(words[0])
        words = words[1:]
        if not words:
            raise OpScriptError(source, line, "expected an operation after the thread number")
    name, raw = words[0], words[1:]
    spec = SPECS.get(name)
    if spec is None:
        raise OpScriptError(source, line, f"unknown operation {name!r}; expected one of "
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
    for n, v, nonneg in zip(spec.arg_names, args, spec.nonnegative):
        if nonneg and v < 0:
            raise OpScriptError(source, line, f"{name}: {n} must be 0 or more, got {v}")
    return Op(thread, name, args, line)


def parse_script(text: str, source: str = "<script>") -> list[Op]:
    ops = []
    for n, line in enumerate(text.splitlines(), 1):
        op = parse_line(line, n, source)
        if op is not None:
            ops.append(op)
    return ops


def render_script(ops: Iterable[Op]) -> str:
    return "".join(op.render() + "\n" for op in ops)
