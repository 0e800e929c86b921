"""An allocation trace (purgecheck/formats/alloc_trace.py) as a glibc op script.

The recorded calls become the ops of docs/glibc.md in call order, each in its thread:

- a pointer becomes a block id (the lowest id free, so the ids needed are the most blocks
  live at once; on the replay's direct path, the block's address: to_ops); a recorded
  thread becomes a script thread (the lowest of 1..63 free; the first thread of the image
  is thread 0);
- `thread_new` starts the thread; the thread is joined right after its last record (its
  exit record, or a free a TSD destructor made after it);
- calls pthread_create made itself (the new thread's dtv, flag F_IN_CREATE) are left out,
  and so are the frees of those blocks: the replay's own `start` makes them;
- aligned_alloc and posix_memalign are `memalign`: in glibc 2.36 aligned_alloc is an alias
  of memalign (an alignment that is not a power of two is rounded up, as memalign does), and
  posix_memalign goes to _mid_memalign once its argument is accepted; a call that failed
  (NULL, EINVAL) changes no block and is left out.

A trace the heap cannot have produced is bad input: ConvertError names the record (a free
of a pointer never allocated or already freed, a realloc of a freed pointer, a pointer
returned while still live).

An image that did not end (killed, or cut where an exec lost the other threads' buffers) can
hold a call that saw a realloc's effect whose result record is not in the file: another
thread got the realloc's old address back. Everything from that call on depends on a call the
file does not have, so the ops stop before it (`Conversion.stopped` says where and why).
"""

from __future__ import annotations

from heapq import heappop, heappush
from itertools import count
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, NoReturn

from purgecheck.formats.records import ALIGN_LOG2, F_IN_CREATE, F_NOT_POW2, KIND, KINDS
from purgecheck.formats.glibc_ops import MAX_THREADS, GlibcOp

if TYPE_CHECKING:
    from model.glibc.process import Process
    from purgecheck.formats.alloc_trace import Image
    from purgecheck.formats.alloc_stream import StreamImage

MALLOPT_PARAMS = {-1: "trim_threshold", -2: "top_pad", -3: "mmap_threshold", -4: "mmap_max"}


class ConvertError(Exception):
    """A record the heap cannot have made: names the trace, the record, what was expected."""

    def __init__(self, source: str, record: int, msg: str) -> None:
        super().__init__(f"{source}: record {record}: {msg}")
        self.source, self.record, self.msg = source, record, msg


class _PrefixEnds(Exception):
    """The rest of an unfinished image depends on a call whose record the file lacks."""


class _NeedsRecords(Exception):
    """Bad input met by the conversion that keeps no record numbers: the run that keeps them
    names the records (to_ops)."""


@dataclass
class _Records:
    """The record numbers a bad-input message names: where each live address was returned,
    and where each address not live was last freed (or moved from by a realloc)."""

    made: dict[int, int] = field(default_factory=dict)
    gone: dict[int, int] = field(default_factory=dict)


@dataclass
class Conversion:
    """What the conversion saw, for the report."""

    ops: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many records
    max_live: int = 0
    max_threads: int = 0
    stopped: tuple[int, str] | None = None  # (first record not replayed, why): see the docstring

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def to_ops(img: "Image | StreamImage", stats: Conversion | None = None,
           process: "Process | None" = None, direct: bool = True) -> Iterator[GlibcOp]:
    """The image's calls as glibc ops; `line` of each op is its record's number.

    The ops come from a run that keeps, per live address, its block id only. Bad input that
    a message must name with the records of its address ("made at record", "freed at
    record") is named by a second run over the image that keeps them (`records`) and takes
    only the general path: the ops are the same (tests/test_replay.py checks the two runs
    op for op), so it stops at the same record. The record numbers cost a tuple per
    live block and an entry per address ever freed: memory that grew with the heap.

    With `process`, the ops of the short path (most mallocs, frees and reallocs of a running
    thread) are made on the process here, not yielded: the replay's loop then runs only the
    others (`replay.run_model`). A generator's resume, the op's tuple, its unpacking and the
    handler's lookup were a fifth of a replay's time (docs/record.md, seventh round). The
    ops then name a block by its address, not by the lowest free id: the process's own
    dict of blocks is the conversion's dict of live addresses (one lookup in one dict of up
    to 900,000 entries where there were two, and no heap of free ids), and a realloc that
    moves a block re-keys it there. Nothing but the process sees those ops; it gets the same
    calls in the same order as from the ops one by one (tests/test_replay_direct.py).

    With `process` and not `direct`, every op is yielded, its block named by its address
    as above: the caller runs each op before it takes the next (the block enters the
    process's dict, which is the conversion's `live`, when its malloc runs). The PyPy
    engine's way: its JIT runs the loop that yields faster than the one that calls
    (docs/record.md, ninth round), and the ids' heap and second dict are left out."""
    return _ops(img, stats if stats is not None else Conversion(), None, process, direct)


def _name_the_records(img: "Image | StreamImage") -> NoReturn:
    """Raise the ConvertError of the first bad record, from the run that keeps the records."""
    try:
        for _ in _ops(img, Conversion(), _Records()):
            pass
    except ConvertError as e:
        raise e from None  # not "during the handling of" the run without the records
    raise AssertionError(f"{img.source}: the conversion that keeps the records did not stop "
                         f"where the one without them did")


def _ops(img: "Image | StreamImage", st: Conversion, records: _Records | None,
         process: "Process | None" = None, direct: bool = True) -> Iterator[GlibcOp]:
    """to_ops: without `records`, most records take the short path, and bad input is named
    by the run with them (_name_the_records); with them, every record takes the general
    path, which keeps them."""
    src = img.source
    last = img.last_of_threads()  # recorded thread -> the index of its last record
    main = img.main_thread
    # address -> block id; with `process`, its blocks by address (to_ops), and a block's
    # id is its address
    keyed = process is not None
    direct = keyed and direct
    live: dict = process.blocks if keyed else {}
    free_ids: list[int] = []  # a heap: the lowest is reused first
    fresh_id = count().__next__  # when none is free: the next never used
    max_live = 0
    pthread_own: set[int] = set()
    slots: dict[int, int] = {main: 0}
    free_slots = list(range(1, MAX_THREADS))
    pending_old: dict[int, tuple[int, int, int]] = {}  # thread -> (old pointer, record, index)
    settled: set[int] = set()  # record numbers of reallocs already replayed (by settle)

    def new_id(addr: int, rec: int) -> int:
        nonlocal max_live
        if addr in live:
            raise still_live(src, addr, rec, records)
        if keyed:  # the op that names it puts the block in `live` (the process's blocks)
            max_live = max(max_live, len(live) + 1)
            return addr
        i = heappop(free_ids) if free_ids else fresh_id()
        live[addr] = i
        if records is not None:
            records.made[addr] = rec
        if len(live) > max_live:
            max_live = len(live)
        return i

    def drop(addr: int, rec: int, what: str) -> int:
        if addr not in live:
            raise not_live(src, addr, rec, what, records)
        if keyed:  # the op that names it takes the block out of the process's blocks
            return addr
        i = live.pop(addr)
        if records is not None:
            records.gone[addr] = rec
        heappush(free_ids, i)
        return i

    def slot(t: int, rec: int) -> tuple[int, list[GlibcOp]]:
        if t in slots:
            return slots[t], []
        if not free_slots:
            raise ConvertError(src, rec, f"more than {MAX_THREADS - 1} threads alive at once "
                                         f"(the replay driver has {MAX_THREADS - 1} workers)")
        s = heappop(free_slots)
        slots[t] = s
        st.max_threads = max(st.max_threads, len(slots))
        return s, [GlibcOp(s, "start", (), rec)]

    K_MALLOC, K_CALLOC, K_FREE = KIND["malloc"], KIND["calloc"], KIND["free"]
    K_OLD, K_REALLOC, K_NEW = KIND["realloc_old"], KIND["realloc"], KIND["thread_new"]

    def settle(addr: int, t: int, rec: int) -> list[GlibcOp]:
        """A block returned at `addr` while `addr` is the old block of another thread's
        realloc still in flight: that realloc moved the block and freed `addr` before this
        call returned it (glibc's _int_realloc takes the new chunk, copies, then frees the
        old one), so it is replayed here, before this call, with the result its own record
        gives (the thread's next record). The realloc's new block was free by then: it was
        taken before the old one was freed."""
        owner = next((u for u, (old, _, _) in pending_old.items() if old == addr and u != t),
                     None)
        if owner is None or addr not in live:
            return []
        old, old_rec, i = pending_old.pop(owner)
        after = img.next_of_thread(i, owner)
        if after is None and not img.ended:
            st.stopped = (rec, f"the realloc of {old:#x} (record {old_rec}) has no "
                               f"result record, and another thread got {addr:#x} back")
            raise _PrefixEnds
        if after is None or after[0] != K_REALLOC:
            raise ConvertError(src, old_rec, f"the realloc of {old:#x} has no result record "
                                             f"before {addr:#x} is returned again (expected "
                                             f"the thread's next record to be its realloc)")
        _, size, new, result_rec = after
        settled.add(result_rec)
        return _realloc(src, slots[owner], old, size, new, result_rec,
                        live, records, new_id, drop, st, keyed)
    QUIET = {KIND[k] for k in ("start", "thread_exit", "fork", "exec", "end")}
    ALIGNED = {KIND[k] for k in ("memalign", "posix_memalign", "aligned_alloc")}
    PAGED = {KIND["valloc"], KIND["pvalloc"]}
    RETURNS_A_BLOCK = {K_MALLOC, K_CALLOC, K_REALLOC} | ALIGNED | PAGED
    make = tuple.__new__  # GlibcOp(...) without the Python-level __new__ of a named tuple
    n_ops = 0
    # the short path's lookup of a running thread: none with the records (the general path)
    short_slot = slots.get if records is None else {}.get
    if direct:  # the short path's ops made on the process directly (to_ops), else yielded
        direct_malloc, direct_free = process.malloc, process.free
        direct_realloc = process.realloc
    try:
        for i, k, t, f, a, r, rec in img.rows():
            s = short_slot(t)
            if s is not None and not f & F_IN_CREATE:
                # most records: a malloc or a free of a running thread, one op, and the two
                # halves of a realloc (the general case below does the same, with new_id and
                # drop); a call that got an address still live while another thread's realloc
                # is in flight may need that realloc settled first, and a record that is bad
                # input is named by the general case
                if k == K_MALLOC and r and r not in live:
                    if direct:
                        direct_malloc(s, r, a)  # the process keeps the block at `r`
                        op = True
                    elif keyed:  # its malloc, when it runs, puts the block in `live`
                        op = make(GlibcOp, (s, "malloc", (r, a), rec))
                        if len(live) >= max_live:
                            max_live = len(live) + 1
                    else:
                        b = heappop(free_ids) if free_ids else fresh_id()  # new_id, inline
                        live[r] = b
                        op = make(GlibcOp, (s, "malloc", (b, a), rec))
                    if len(live) > max_live:
                        max_live = len(live)
                elif k == K_FREE and keyed and a in live and a not in pthread_own:
                    if direct:
                        direct_free(s, a)
                        op = True
                    else:  # its free, when it runs, takes the block out of `live`
                        op = make(GlibcOp, (s, "free", (a,), rec))
                elif k == K_FREE and not keyed and a not in pthread_own \
                        and (b := live.pop(a, None)) is not None:
                    heappush(free_ids, b)  # drop, inline (one lookup of `live`)
                    op = make(GlibcOp, (s, "free", (b,), rec))
                elif k == K_OLD:
                    pending_old[t] = (a, rec, i)
                    continue
                elif k == K_REALLOC and t in pending_old and rec not in settled \
                        and (len(pending_old) == 1 or r not in live):
                    # the second half of a realloc that no other thread's realloc in flight
                    # can have moved (see settle): as the general case below does
                    old = pending_old.pop(t)[0]
                    ops = _realloc(src, s, old, a, r, rec, live, None, new_id, drop, st, keyed)
                    op = ops[0] if ops else False  # False: a failed realloc, no op
                    if op and direct:
                        direct_realloc(s, *op.args)
                        op = True
                else:
                    op = None
                if op is not None:
                    if op:
                        n_ops += 1
                        if op is not True:  # True: made on the process already
                            yield op
                    if t != main and last[t] == i and t not in pending_old:
                        n_ops += 1
                        del slots[t]
                        heappush(free_slots, s)
                        yield make(GlibcOp, (s, "join", (), rec))
                    continue
            out: list[GlibcOp] = []
            if k == K_NEW:
                if a not in slots:
                    _, out = slot(a, rec)
            elif k in QUIET or rec in settled:
                pass
            elif f & F_IN_CREATE and k != K_OLD and k != K_REALLOC:
                if k == K_FREE:
                    pthread_own.discard(a)
                elif r:
                    pthread_own.add(r)
                st.skip("made by pthread_create (the replay's start makes it)")
            else:
                s, out = slot(t, rec)
                if r in live and pending_old and k in RETURNS_A_BLOCK:
                    try:
                        out += settle(r, t, rec)
                    except _PrefixEnds:
                        return
                if k == K_MALLOC or k == K_CALLOC:
                    if r:
                        out.append(GlibcOp(s, KINDS[k], (new_id(r, rec), a), rec))
                    else:
                        st.skip("failed allocation")
                elif k == K_FREE:
                    if a in pthread_own:
                        pthread_own.discard(a)
                        st.skip("free of a block pthread_create made")
                    else:
                        out.append(GlibcOp(s, "free", (drop(a, rec, "free"),), rec))
                elif k == K_OLD:
                    pending_old[t] = (a, rec, i)
                elif k == K_REALLOC:
                    if t not in pending_old:
                        raise ConvertError(src, rec, "realloc without its realloc_old record "
                                                     "(expected the pair from one thread)")
                    old, _, _ = pending_old.pop(t)
                    out += _realloc(src, s, old, a, r, rec, live, records, new_id, drop, st,
                                    keyed)
                elif k in ALIGNED:
                    if not r:
                        st.skip("failed allocation")
                    else:
                        align = 1 << (f & ALIGN_LOG2)
                        if f & F_NOT_POW2 and k == KIND["posix_memalign"]:
                            raise ConvertError(src, rec, "posix_memalign succeeded with an "
                                                         "alignment that is not a power of "
                                                         "two (glibc returns EINVAL)")
                        out.append(GlibcOp(s, "memalign", (new_id(r, rec), align, a), rec))
                elif k in PAGED:
                    if r:
                        out.append(GlibcOp(s, KINDS[k], (new_id(r, rec), a), rec))
                    else:
                        st.skip("failed allocation")
                elif k == KIND["mallopt"]:
                    param = _signed(a)
                    if param not in MALLOPT_PARAMS:
                        raise ConvertError(src, rec, f"mallopt parameter {param} is not "
                                                     f"modelled (expected one of "
                                                     f"{sorted(MALLOPT_PARAMS)})")
                    out.append(GlibcOp(s, "mallopt", (MALLOPT_PARAMS[param],
                                                      max(0, _signed(r))), rec))
                elif k == KIND["malloc_trim"]:
                    out.append(GlibcOp(s, "trim", (a,), rec))
            if t != main and last.get(t) == i and t in slots and t not in pending_old:
                s = slots.pop(t)
                heappush(free_slots, s)
                out.append(GlibcOp(s, "join", (), rec))
            if out:
                n_ops += len(out)
                yield from out
    except _NeedsRecords:
        _name_the_records(img)
    finally:  # also when the replay stops early (the generator is closed)
        st.ops += n_ops
        st.max_live = max(st.max_live, max_live)


def still_live(src: str, addr: int, rec: int, records: _Records | None) -> Exception:
    if records is None:
        return _NeedsRecords()
    return ConvertError(src, rec, f"{addr:#x} returned while still live (made at "
                                  f"record {records.made[addr]}): expected a freed address")


def not_live(src: str, addr: int, rec: int, what: str, records: _Records | None) -> Exception:
    if records is None:
        return _NeedsRecords()
    when = f"freed at record {records.gone[addr]}" if addr in records.gone \
        else "never allocated"
    return ConvertError(src, rec, f"{what} of {addr:#x}, which is {when}: expected a "
                                  f"live block")


def _realloc(src, s, old, size, new, rec, live, records, new_id, drop, st,
             keyed: bool = False) -> list[GlibcOp]:
    """realloc(old, size) = new, as one op on the block of `old` (docs/record.md); `records`
    and `keyed` (blocks named by their address) as in _ops."""
    if old == 0:  # realloc(NULL, n) is malloc(n)
        if not new:
            st.skip("failed allocation")
            return []
        return [GlibcOp(s, "realloc", (new_id(new, rec), size), rec)]
    if old not in live:
        drop(old, rec, "realloc")  # raises, naming when the block was freed
    block = old if keyed else live[old]
    if size == 0:  # REALLOC_ZERO_BYTES_FREES: the block is freed, NULL returned
        drop(old, rec, "realloc")
        return [GlibcOp(s, "realloc", (block, 0), rec)]
    if not new:
        st.skip("failed realloc (the block is unchanged)")
        return []
    if new != old:  # moved: the block keeps its id at its new address
        held = live.pop(old)
        if new in live:
            raise still_live(src, new, rec, records)
        live[new] = held  # keyed: the process's block, named by its new address from now on
        if keyed:
            block = new
        if records is not None:
            records.gone[old] = rec
            records.made[new] = rec
    return [GlibcOp(s, "realloc", (block, size), rec)]


def image_to_replay(images: list) -> int:
    """The index of the last image that made allocation calls (after an exec, the program
    that was exec'ed)."""
    for n in range(len(images) - 1, -1, -1):
        if images[n].has_kind("malloc"):
            return n
    return len(images) - 1
