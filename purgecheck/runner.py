"""Run an op script on the model: each op becomes the model transitions it stands for.

`run_ops` calls `after_step(op, world)` after every op, which is where the engines check the
invariant registry. Double frees are reported in the log (the model never absorbs them).
"""

from __future__ import annotations

from typing import Callable, Iterable

from model.alloc import DoubleFree, mi_page_free_collect
from model.clock import ClockError
from model.heap import Ptr, mi_free, mi_heap_delete, mi_heap_destroy, mi_heap_malloc, mi_realloc
from model.holes import mi_page_purge_holes_walk
from model.drivers import mi_on_thread_idle, mi_on_thread_idle_pending
from model.epoch import MOVING, fork_child_epoch
from model.heap import mi_heap_abandon, mi_page_reclaim
from model.park import (mi_on_thread_idle_end, mi_on_thread_idle_start, mi_theap_sweep_parked,
                        run_scavenger)
from model.world import Options, World
from purgecheck.formats.ops import Op, OpScriptError

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


@handles("malloc_aligned")
def _malloc_aligned(run: Run, op: Op) -> None:
    """mi_malloc_aligned (the real test's 16 KiB at 16 KiB, JSC's MarkedBlock): when every
    block of the size class lies at a multiple of the alignment (the block size and the offset
    of the first block are multiples of it; pages are 4 MiB-aligned regions) a plain
    allocation; otherwise SIZE + ALIGN - 1 bytes and the first aligned address in the block (an
    interior pointer; the real code takes an aligned free block as it comes as well)."""
    from model.geometry import compute_block_size
    name, size, align = op.args
    a = mi_alignment(align)
    opts = run.world.options
    whole = (compute_block_size(size, opts.arch) % a == 0 and opts.first_block_offset % a == 0)
    ptr = mi_heap_malloc(run.world, run.world.heap(op.thread), size if whole else size + a - 1)
    page = run.world.pages[ptr.page]
    run.log("aligned", page=ptr.page, block=ptr.block, offset=aligned_offset(page, ptr.block, a))
    run.names[name] = ptr
    run.freed.pop(name, None)


def aligned_offset(page, block: int, a: int) -> int:
    """How far into the block the first address at a multiple of `a` lies."""
    return -page.geom.block_addr(block) % a


MI_ALIGN_MAX = 4 << 20  # the regions' alignment: the largest the reference can give


def mi_alignment(align: int) -> int:
    """The op's ALIGN as the alignment used: the next power of two, 4 MiB at most (the real
    mi_malloc_aligned refuses an alignment that is not a power of two)."""
    return min(1 << max(0, align - 1).bit_length(), MI_ALIGN_MAX)


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


@handles("collect_force")
def _collect_force(run: Run, op: Op) -> None:
    """mi_collect(true) (the real tests' forced collect): the frees of other threads are
    folded in, and a page whose blocks are then all free goes back to the arena."""
    from model.heap import mi_page_retire
    for page in run.heap_pages(op.thread):
        mi_page_free_collect(page)
        if page.is_all_free():
            mi_page_retire(run.world, page)


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


@handles("clock")
def _clock(run: Run, op: Op) -> None:
    clock_step(run.world, op.args[0], run.source, op.line)


@handles("idle")
def _idle(run: Run, op: Op) -> None:
    mi_on_thread_idle(run.world, op.thread)


@handles("pending")
def _pending(run: Run, op: Op) -> None:
    run.log("pending", thread=op.thread, value=mi_on_thread_idle_pending(run.world, op.thread))


@handles("park")
def _park(run: Run, op: Op) -> None:
    mi_on_thread_idle_start(run.world, op.thread)


@handles("unpark")
def _unpark(run: Run, op: Op) -> None:
    mi_on_thread_idle_end(run.world, op.thread)


@handles("scavenge")
def _scavenge(run: Run, op: Op) -> None:
    run.log("scavenge", due=mi_theap_sweep_parked(run.world))


@handles("scavenger")
def _scavenger(run: Run, op: Op) -> None:
    run_scavenger(run.world, op.args[0])


@handles("abandon")
def _abandon(run: Run, op: Op) -> None:
    mi_heap_abandon(run.world, run.world.heap(op.thread))


@handles("reclaim")
def _reclaim(run: Run, op: Op) -> None:
    page = run.world.pages[run.ptr(op, op.args[0]).page]
    if not page.abandoned or page.retired:  # a retired page is back in the arena
        raise OpScriptError(run.source, op.line, f"reclaim: the page of {op.args[0]!r} is "
                                                 f"not abandoned")
    if page.id not in run.world.abandoned:  # abandoned full (model.full_pages): not mapped
        raise OpScriptError(run.source, op.line, f"reclaim: the page of {op.args[0]!r} was "
                                                 f"abandoned full and is not in the abandoned "
                                                 f"map, where a reclaim finds its pages")
    mi_page_reclaim(run.world, page, run.world.heap(op.thread))


def fork_now(world: World, thread: int) -> None:
    """A fork by `thread`: the child applies the forked-child rule to its copy of the epoch
    (_mi_page_purge_holes_forked_child) and the `fork` event reports what it holds then; the
    script goes on in the parent, whose advance (if one is in the middle) carries on."""
    moving = world.epoch.start == MOVING
    child = fork_child_epoch(world.epoch, world.clock.read())
    world.fork_children.append(child)  # ghost: judged by EP-MOVING-HELD
    world.log.append({"ev": "fork", "thread": thread, "moving": moving, "epoch": child.epoch,
                      "start": child.start})


def clock_step(world: World, ms: int, source: str, line: int) -> None:
    """The virtual clock moves by `ms` (back only when it is not monotone); a `clock` event."""
    try:
        world.clock.advance(ms)
    except ClockError as e:  # a step back on a monotone clock: the script is wrong there
        raise OpScriptError(source, line, f"clock: {e}")
    world.log.append({"ev": "clock", "now": world.clock.read()})


@handles("fork")
def _fork(run: Run, op: Op) -> None:
    fork_now(run.world, op.thread)


@handles("fork_at")
def _fork_at(run: Run, op: Op) -> None:
    thread = op.thread
    run.world.interleavings.append((op.args[0], lambda world: fork_now(world, thread)))


@handles("clock_at")
def _clock_at(run: Run, op: Op) -> None:
    step, ms = op.args
    if ms < 0 and run.world.clock.monotone:  # refused where it is written, not where it fires
        raise OpScriptError(run.source, op.line, f"clock_at: a monotone clock cannot go back "
                                                 f"{-ms} ms")
    source, line = run.source, op.line
    run.world.interleavings.append((step, lambda world: clock_step(world, ms, source, line)))


@handles("epoch_skip")
def _epoch_skip(run: Run, op: Op) -> None:
    st = run.world.epoch
    st.epoch += op.args[0]
    st.start = run.world.clock.read()
    run.log("epoch_skip", epoch=st.epoch)


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
