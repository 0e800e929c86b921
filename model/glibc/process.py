"""A process using glibc's malloc: threads, their tcaches and arenas, and the system calls.

The public operations are the op script's (docs/glibc.md): `malloc`, `free`, `calloc`,
`realloc`, `memalign` (`valloc`, `pvalloc`), `trim` (malloc_trim), `mallopt`, `start` and
`join` of a thread. Thread 0 is the main thread (the main arena). A thread gets
its arena at its first malloc (2.26+: tcache's 640-byte request), reuses the arena of an
exited thread if one is free, and at exit flushes its tcache into the arenas; pthread's own
part (the stack and its cache, the dtv allocated for a new stack) is modelled as far as it
makes system calls or touches the main arena.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.glibc import malloc, system
from model.glibc.arena import Arena, malloc_consolidate
from model.glibc.constants import (CHUNK_HDR_SZ, DTV_CALLOC_REQUEST, HEAP_MAX_SIZE,
                                   MALLOC_ALIGN_MASK, MALLOC_ALIGNMENT, MAX_TCACHE_CHUNK,
                                   MINSIZE, PAGESIZE, SIZE_SZ, STACK_SIZE, STACK_CACHE_MAXSIZE,
                                   TCACHE_MAX_BINS, TCACHE_STRUCT_REQUEST, request2size)
from model.glibc.heap import MMAPPED, Chunk
from model.glibc.memalign import effective_alignment, int_memalign, pvalloc_request
from model.glibc.mtrim import malloc_trim
from model.glibc.realloc import int_realloc
from model.glibc.params import MallocPar, set_param
from model.glibc.resident import ResidentPages
from model.glibc.syscalls import SysCall
from model.glibc.versions import VERSIONS, Version

ARENA_TEST = 8  # arenas are created freely up to mp_.arena_test; beyond, ncores decides
BRK_BASE = 0x5555_5555_0000
HEAP_AREA = 0x7f00_0000_0000
MMAP_AREA = 0x7e00_0000_0000
STACK_AREA = 0x7d00_0000_0000


class ScriptError(Exception):
    """An op the process cannot do (a thread not started, joined twice...): names the op."""


@dataclass(eq=False)
class Thread:
    tid: int
    arena: Arena | None = None
    tcache: list[list[Chunk]] | None = None  # per tcache bin, LIFO
    tcache_chunk: Chunk | None = None  # the tcache_perthread_struct
    shutting_down: bool = False
    stack: "Stack | None" = None


@dataclass(eq=False)
class Stack:
    addr: int
    dtv: Chunk  # the dtv calloc'ed from the creating thread's arena with the stack


@dataclass(eq=False)
class Process:
    version: Version = field(default_factory=lambda: VERSIONS["2.23+"])
    settings: dict[str, int] = field(default_factory=dict)  # environment / GLIBC_TUNABLES
    may_shrink_heap: bool = False  # overcommit 2 or setuid: shrink_heap remaps PROT_NONE
    mp: MallocPar = field(default_factory=MallocPar)
    calls: list[SysCall] = field(default_factory=list)
    threads: dict[int, Thread] = field(default_factory=dict)
    arenas: list[Arena] = field(default_factory=list)
    free_list: list[Arena] = field(default_factory=list)  # arenas of exited threads, LIFO
    blocks: dict[int, Chunk] = field(default_factory=dict)  # live blocks by id (or address)
    stack_cache: list[Stack] = field(default_factory=list)  # oldest first
    brk_base: int = BRK_BASE
    next_heap: int = HEAP_AREA
    next_mmap: int = MMAP_AREA
    next_stack: int = STACK_AREA
    resident: ResidentPages = field(default_factory=ResidentPages)  # ghost: what it costs

    def __post_init__(self) -> None:
        for name, value in self.settings.items():  # read at ptmalloc_init, before any malloc
            set_param(self.mp, name, value, self.version.mmap_threshold_cap)
        main = Arena("main", is_main=True, attached_threads=1, process=self)
        self.arenas.append(main)
        self.threads[0] = Thread(0, arena=main)

    @property
    def main_arena(self) -> Arena:
        return self.arenas[0]

    # -- addresses and the log --------------------------------------------------------------

    def emit(self, name: str, category: str, addr: int, length: int) -> None:
        """A system call; those that give memory back make its pages non-resident."""
        self.calls.append(SysCall(name, category, addr, length))
        self.resident.drop(category, addr, length)

    def reserve_heap_address(self) -> int:
        self.next_heap += HEAP_MAX_SIZE
        return self.next_heap

    def reserve_mmap_address(self, size: int) -> int:
        addr = self.next_mmap
        self.next_mmap += size + PAGESIZE
        return addr

    # -- the script's operations ------------------------------------------------------------

    def thread(self, tid: int) -> Thread:
        t = self.threads.get(tid)
        if t is None:
            raise ScriptError(f"thread {tid} is not running: start it first")
        return t

    def malloc(self, tid: int, block: int, size: int) -> Chunk:
        """__libc_malloc: tcache (2.26+, initialised on first use), else the arena."""
        t = self.threads.get(tid) or self.thread(tid)  # (thread() names a missing one)
        # request2size and csize2tidx, inline: a call each was a tenth of this function
        nb = size + SIZE_SZ + MALLOC_ALIGN_MASK
        nb = MINSIZE if nb < MINSIZE else nb & ~MALLOC_ALIGN_MASK
        if t.tcache is None:
            self.maybe_init_tcache(t)
        tcache = t.tcache
        if tcache is not None and nb <= MAX_TCACHE_CHUNK \
                and tcache[i := (nb - MINSIZE + MALLOC_ALIGN_MASK) // MALLOC_ALIGNMENT]:
            c = tcache[i].pop()
            c.state = "inuse"
            self.resident.write(c.addr + 3 * SIZE_SZ, SIZE_SZ)  # tcache_get: e->key = 0
        else:
            c = malloc.int_malloc(self, t.arena or self.arena_get(t, size), nb, t)
        self.blocks[block] = c  # an id still live is overwritten: that block leaks, as in C
        return c

    def calloc(self, tid: int, block: int, size: int) -> Chunk:
        """__libc_calloc: MAYBE_INIT_TCACHE, then _int_malloc of the arena; never the tcache's
        chunks. The zeroing writes the block, except memory fresh from the top."""
        t = self.thread(tid)
        self.maybe_init_tcache(t)
        c = malloc.int_malloc(self, self.arena_get(t, size), request2size(size), t)
        self.blocks[block] = c
        if c.state != MMAPPED:
            self.resident.write(c.addr + CHUNK_HDR_SZ, c.size - CHUNK_HDR_SZ)
        return c

    def realloc(self, tid: int, block: int, size: int) -> Chunk | None:
        """__libc_realloc: of nothing is malloc; to 0 bytes frees (REALLOC_ZERO_BYTES_FREES);
        an mmapped chunk is mremapped (mremap_chunk); any other goes to _int_realloc of the
        arena that owns it, after MAYBE_INIT_TCACHE (model.glibc.realloc)."""
        c = self.blocks.get(block)
        if c is None:
            return self.malloc(tid, block, size)
        if size == 0:
            self.free(tid, block)
            return None
        t = self.threads.get(tid) or self.thread(tid)  # (thread() names a missing one)
        nb = request2size(size)
        if c.state == MMAPPED:
            system.mremap_chunk(self, c, nb)
            return c
        if t.tcache is None:
            self.maybe_init_tcache(t)
        c = self.blocks[block] = int_realloc(self, c.segment.arena, t, c, nb)
        return c

    def memalign(self, tid: int, block: int, alignment: int, size: int) -> Chunk:
        """_mid_memalign (memalign, aligned_alloc, posix_memalign; model.glibc.memalign)."""
        if alignment <= MALLOC_ALIGNMENT:
            return self.malloc(tid, block, size)
        t = self.thread(tid)
        alignment = effective_alignment(alignment)
        av = self.arena_get(t, size + alignment + MINSIZE)
        c = self.blocks[block] = int_memalign(self, av, t, alignment, size)
        return c

    def valloc(self, tid: int, block: int, size: int) -> Chunk:
        """__libc_valloc: _mid_memalign (pagesize, bytes)."""
        return self.memalign(tid, block, PAGESIZE, size)

    def pvalloc(self, tid: int, block: int, size: int) -> Chunk:
        """__libc_pvalloc: _mid_memalign (pagesize, the request rounded as glibc rounds it)."""
        return self.memalign(tid, block, PAGESIZE, pvalloc_request(size))

    def trim(self, tid: int, pad: int) -> bool:
        """malloc_trim (model.glibc.mtrim)."""
        self.thread(tid)
        return malloc_trim(self, pad)

    def use(self, block: int, length: int) -> int:
        """The program writes the first `length` bytes of its block `block` (seed 001's
        `do_stuff (m)`; ebizzy fills its record): those pages become resident. Returns how
        many pages faulted. A length past the block's usable size stops at it."""
        c = self.blocks.get(block)
        if c is None:
            raise ScriptError(f"block {block} holds nothing: malloc it first")
        usable = c.size - (CHUNK_HDR_SZ if c.state == MMAPPED else SIZE_SZ)
        return self.resident.write(c.addr + CHUNK_HDR_SZ, min(length, usable))

    def free(self, tid: int, block: int) -> None:
        """__libc_free: an mmapped chunk is unmapped, anything else goes to _int_free of the
        arena that owns it (through the freeing thread's tcache). Freeing an id that holds
        nothing is free(NULL)."""
        t = self.threads.get(tid) or self.thread(tid)
        c = self.blocks.pop(block, None)
        if c is None:
            return
        self.free_chunk(t, c)

    def free_chunk(self, t: Thread, c: Chunk) -> None:
        if c.state == MMAPPED:
            system.munmap_chunk(self, c)
            return
        if t.tcache is None:
            self.maybe_init_tcache(t)
        malloc.int_free(self, c.segment.arena, c, t)

    def mallopt(self, tid: int, name: str, value: int) -> bool:
        """__libc_mallopt: consolidates the main arena's fastbins, then sets the parameter."""
        self.thread(tid)
        malloc_consolidate(self.main_arena)
        return set_param(self.mp, name, value, self.version.mmap_threshold_cap)

    def start(self, tid: int) -> None:
        """pthread_create from the main thread: a cached stack, or a new one whose dtv is
        calloc'ed in the main arena."""
        if tid == 0 or tid in self.threads:
            raise ScriptError(f"thread {tid} is already running")
        if self.stack_cache:
            stack = self.stack_cache.pop()
        else:
            addr = self.next_stack
            self.next_stack += STACK_SIZE + PAGESIZE
            self.emit("mmap", "stack_mmap", addr, STACK_SIZE)
            self.emit("mprotect", "stack_mprotect", addr + PAGESIZE, STACK_SIZE - PAGESIZE)
            dtv = malloc.int_malloc(self, self.main_arena, request2size(DTV_CALLOC_REQUEST),
                                    self.threads[0])
            stack = Stack(addr, dtv)
        self.threads[tid] = Thread(tid, stack=stack)

    def join(self, tid: int) -> None:
        """The thread returns: its tcache is flushed into the arenas, its arena goes to the
        free list, its stack is madvised; pthread_join caches the stack (40 MiB at most)."""
        if tid == 0:
            raise ScriptError("thread 0 is the main thread: it is never joined")
        t = self.thread(tid)
        self.tcache_thread_shutdown(t)
        if t.arena is not None:
            t.arena.attached_threads -= 1
            if t.arena.attached_threads == 0:
                self.free_list.append(t.arena)
        self.emit("madvise", "stack_madvise", t.stack.addr, STACK_SIZE - 4 * PAGESIZE)
        del self.threads[tid]
        self.stack_cache.append(t.stack)
        while len(self.stack_cache) * STACK_SIZE > STACK_CACHE_MAXSIZE:
            old = self.stack_cache.pop(0)
            self.emit("munmap", "stack_munmap", old.addr, STACK_SIZE)
            self.free_chunk(self.threads[0], old.dtv)  # _dl_deallocate_tls frees the dtv

    # -- tcache and arenas ----------------------------------------------------------------

    def maybe_init_tcache(self, t: Thread) -> None:
        """MAYBE_INIT_TCACHE (malloc and free, 2.26+): the tcache struct is the thread's first
        allocation, and creates (or takes) its arena."""
        if not self.version.tcache or t.tcache is not None or t.shutting_down:
            return
        av = self.arena_get(t, TCACHE_STRUCT_REQUEST)
        t.tcache_chunk = malloc.int_malloc(self, av, request2size(TCACHE_STRUCT_REQUEST), None)
        t.tcache = [[] for _ in range(TCACHE_MAX_BINS)]
        self.resident.write(t.tcache_chunk.addr + CHUNK_HDR_SZ, TCACHE_STRUCT_REQUEST)  # memset

    def tcache_thread_shutdown(self, t: Thread) -> None:
        """Every tcache entry, bin by bin from the head, then the struct, goes to _int_free
        with the tcache disabled: small ones to fastbins, the rest merge and may trim."""
        if t.tcache is None:
            return
        entries, t.tcache = t.tcache, None
        t.shutting_down = True
        for bin_ in entries:
            while bin_:
                c = bin_.pop()
                c.state = "inuse"
                malloc.int_free(self, c.segment.arena, c, None)
        malloc.int_free(self, t.tcache_chunk.segment.arena, t.tcache_chunk, None)

    def arena_get(self, t: Thread, request: int) -> Arena:
        """arena_get2: the thread's arena, else the most recently freed one, else a new one."""
        if t.arena is None:
            if self.free_list:
                t.arena = self.free_list.pop()
            else:
                if len(self.arenas) >= ARENA_TEST:
                    raise ScriptError(f"thread {t.tid} would be the arena number "
                                      f"{len(self.arenas) + 1}: more than {ARENA_TEST} "
                                      f"arenas at once is not modelled")
                av = system.new_arena(self, f"arena{len(self.arenas)}", request)
                if av is None:
                    raise malloc.OutOfMemory("no heap for a new arena")
                self.arenas.append(av)
                t.arena = av
            t.arena.attached_threads = 1
        return t.arena

    def count(self) -> dict[str, int]:
        from model.glibc.syscalls import count_by_category
        return count_by_category(self.calls)
