"""Run a glibc op script on the model of one version (deterministic, no I/O)."""

from __future__ import annotations

from typing import Callable

from model.glibc.malloc import OutOfMemory
from model.glibc.process import Process, ScriptError
from model.glibc.versions import Version
from purgecheck.formats.glibc_ops import GlibcOp, expand
from purgecheck.formats.ops import OpScriptError

AfterStep = Callable[[GlibcOp, Process], None]


# Every op but repeat/end is the Process method of its name, called (thread, *args).
OPS = ("malloc", "free", "calloc", "realloc", "valloc", "pvalloc", "memalign", "trim",
       "mallopt", "start", "join")


def handlers(p: Process) -> dict[str, Callable]:
    """The process's method for each op name: a replay calls `handlers[op.name](op.thread,
    *op.args)` for each of its ops, one dict lookup instead of a chain of comparisons."""
    return {name: getattr(p, name) for name in OPS}


def apply(p: Process, op: GlibcOp) -> None:
    if op.name in OPS:
        getattr(p, op.name)(op.thread, *op.args)


def run_model(ops: list[GlibcOp], version: Version, settings: dict[str, int] | None = None,
              may_shrink_heap: bool = False, after_step: AfterStep | None = None,
              source: str = "<script>") -> Process:
    """The process after the whole script; `after_step(op, process)` after every op.

    A script the process cannot run (a thread used before `start`, left running at the
    end) raises OpScriptError naming the line."""
    p = Process(version, dict(settings or {}), may_shrink_heap)
    last = 0
    for op in expand(ops):
        last = op.line
        if op.name in ("repeat", "end"):
            continue
        try:
            apply(p, op)
        except (ScriptError, OutOfMemory) as e:
            raise OpScriptError(source, op.line, f"{op.render()}: {e}") from None
        if after_step is not None:
            after_step(op, p)
    running = sorted(t for t in p.threads if t)
    if running:
        raise OpScriptError(source, last, f"thread {running[0]} is still running at the end: "
                                          f"join it")
    return p
