"""Run an op script on the model: each op becomes the model transitions it stands for.

`run_ops` calls `after_step(op, world)` after every op, which is where the engines check the
invariant registry. Double frees are reported in the log (the model never absorbs them).
"""

from __future__ import annotations

from typing import Callable, Iterable

from model.alloc import DoubleFree, mi_page_free_collect
from model.heap import Ptr, mi_free, mi_heap_delete, mi_heap_destroy, mi_heap_malloc, mi_realloc
from model.holes import mi_page_purge_holes_walk
from model.world import Options, World
from purgecheck.ops import Op, OpScriptError

Handler = Callable[["Run", Op], None]
HANDLERS: dict[str, Handler] = {}


def handles(name: str):
    def wrap(fn: Handler) -> Handler:
        HANDLERS[name] = fn
        return fn
    return wrap


class Run:
    """A world plus the names the script gave to its allocations."""

    def __init__(self, world: World | None = None, source: str = "<script>") -> None:
        self.world = world or World()
        self.names: dict[str, Ptr] = {}
        self.freed: dict[str, Ptr] = {}
        self.source = source

    def ptr(self, op: Op, name: str) -> Ptr:
        if name in self.names:
            return self.names[name]
        if name in self.freed:
            return self.freed[name]
        raise OpScriptError(self.source, op.line, f"{op.name}: no allocation named {name!r}")

    def heap_pages(self, thread: int):
        heap = self.world.heap(thread)
        return [self.world.pages[pid] for q in heap.queues.values() for pid in q]

    def log(self, ev: str, **fields) -> None:
        self.world.log.append({"ev": ev, **fields})


@handles("malloc")
def _malloc(run: Run, op: Op) -> None:
    name, size = op.args
    ptr = mi_heap_malloc(run.world, run.world.heap(op.thread), size)
    run.names[name] = ptr
    run.freed.pop(name, None)


@handles("zalloc")
def _zalloc(run: Run, op: Op) -> None:
    name, size = op.args
    ptr = mi_heap_malloc(run.world, run.world.heap(op.thread), size, zero=True, write=False)
    run.names[name] = ptr
    run.freed.pop(name, None)


@handles("free")
def _free(run: Run, op: Op) -> None:
    (name,) = op.args
    ptr = run.ptr(op, name)
    try:
        mi_free(run.world, ptr, op.thread)
    except DoubleFree:
        return  # reported in the log by the page
    if name in run.names:
        run.freed[name] = run.names.pop(name)


@handles("realloc")
def _realloc(run: Run, op: Op) -> None:
    name, new, size = op.args
    ptr = run.ptr(op, name)
    try:
        moved = mi_realloc(run.world, run.world.heap(op.thread), ptr, size)
    except DoubleFree:
        return  # reported in the log by the page
    run.names.pop(name, None)
    run.names[new] = moved


@handles("collect")
def _collect(run: Run, op: Op) -> None:
    for page in run.heap_pages(op.thread):
        mi_page_free_collect(page)


@handles("walk")
def _walk(run: Run, op: Op) -> None:
    from model.geometry import mi_page_can_purge_holes
    for page in run.heap_pages(op.thread):
        mi_page_free_collect(page)
        if mi_page_can_purge_holes(page.geom):
            mi_page_purge_holes_walk(page)


@handles("heap_destroy")
def _heap_destroy(run: Run, op: Op) -> None:
    mi_heap_destroy(run.world, run.world.heap(op.thread))
    run.names = {n: p for n, p in run.names.items() if not run.world.pages[p.page].retired}


@handles("heap_delete")
def _heap_delete(run: Run, op: Op) -> None:
    mi_heap_delete(run.world, run.world.heap(op.thread), run.world.heap(0))


@handles("fail_discard")
def _fail_discard(run: Run, op: Op) -> None:
    run.world.mem.fail_next_discards += op.args[0]


def run_ops(ops: Iterable[Op], options: Options | None = None,
            after_step: Callable[[Op, World], None] | None = None,
            source: str = "<script>") -> Run:
    run = Run(World(options or Options()), source)
    for op in ops:
        handler = HANDLERS.get(op.name)
        if handler is None:
            raise OpScriptError(source, op.line, f"the model has no handler for {op.name!r}")
        handler(run, op)
        if after_step is not None:
            after_step(op, run.world)
    return run
