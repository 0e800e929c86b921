"""The real tests' cases as named scenarios, in the real tests' shapes (purgecheck/realtests/cases.py).

Each scenario re-expresses one case of test/test-purge-holes-large.c or test/test-purge-holes.c
(oven-sh/mimalloc): the same sizes, counts and order of operations, with `idle` where the real
test sweeps. The large-page file runs with `purge_holes_min_interval` 0 except where a case sets
its own, and `mi_purge_holes()` of the small-page file is an `idle` at interval 0 (a sweep of
every page of the thread's heaps and of the abandoned ones, with no hold). Each declares the
assertions of its case as checks (purgecheck/realtests/checks.py), which run on the model's trace and
on the C reference's.
"""

from __future__ import annotations

import random

from model.geometry import ARCH64, KiB
from model.world import Options
from purgecheck.scenarios import keep_every_third, scenario

NO_HOLD = Options(purge_holes_min_interval=0)

# The real test's three requests in large pages: just over what a medium page takes, half the
# largest plus 1 KiB, the largest less 4 KiB (blocks of 96, 320 and 512 KiB on 64-bit).
LARGE_REQUESTS = {96: ARCH64.medium_max_obj_size + 1024,
                  320: ARCH64.large_max_obj_size // 2 + 1024,
                  512: ARCH64.large_max_obj_size - 4096}
MIDDLE = LARGE_REQUESTS[320]


def allocate(thread: int, prefix: str, count: int, size: int) -> list[str]:
    return [f"{thread} malloc {prefix}{i} {size}" for i in range(count)]


def free_where(thread: int, prefix: str, count: int, keep) -> list[str]:
    """Free every block i of `prefix` for which keep(i) is false."""
    return [f"{thread} free {prefix}{i}" for i in range(count) if not keep(i)]


# -- the unit ---------------------------------------------------------------------------------------

@scenario("unit-sizes", "One block of 16 B, 1 KiB, 8 KiB and 64 KiB (small and medium pages: "
          "the unit is the OS page) and one of each real large request (the unit is the "
          "smallest power-of-two multiple of the OS page the bitmap can hold).",
          checks=("unit-rule",))
def _unit_sizes() -> str:
    sizes = [16, 1024, 8192, 65536, *LARGE_REQUESTS.values()]
    return "\n".join(f"1 malloc u{n} {s}" for n, s in enumerate(sizes))


# -- discard at an idle sweep, per large class ------------------------------------------------------

def _discard(size_kib: int) -> str:
    lines = allocate(1, "d", 40, LARGE_REQUESTS[size_kib])
    lines += free_where(1, "d", 40, lambda i: i % 3 == 0)
    return "\n".join(lines + ["1 idle"])


for _kib in LARGE_REQUESTS:
    scenario(f"discard-idle-{_kib}", f"40 blocks of the {_kib} KiB class, every third kept; one "
             f"idle sweep at interval 0 discards every freed block (none resident), the "
             f"survivors keep every byte.", NO_HOLD,
             checks=("freed-purged", "something-purged", "survivors-intact", "stats-agree"))(
        lambda kib=_kib: _discard(kib))


@scenario("reuse-idle", "24 blocks of the middle class, 3 of 4 freed; a sweep; as many blocks "
          "taken again, alternately zalloc and malloc: purged holes come back (reuses rise), "
          "no block twice, a zalloc of a purged block is zeroed in full.", NO_HOLD,
          checks=("something-purged", "reuse-rises", "no-aliasing", "survivors-intact",
                  "zalloc-zero", "stats-agree"))
def _reuse_idle() -> str:
    lines = allocate(1, "r", 24, MIDDLE) + free_where(1, "r", 24, lambda i: i % 4 == 0)
    lines.append("1 idle")
    lines += [f"1 {'zalloc' if i % 2 == 0 else 'malloc'} a{i} {MIDDLE}" for i in range(18)]
    return "\n".join(lines + ["1 collect"])


@scenario("xthread-idle", "60 blocks of the first class; the owner frees 3k+2; a sweep; another "
          "thread frees 3k+1 into the pages with holes; a sweep takes them too; the other "
          "thread frees the rest and a forced collect (mi_collect(true)) gives the pages they "
          "emptied back to the arena, holes and all.", NO_HOLD,
          checks=("purged-grows", "survivors-intact", "stats-agree", "pages-freed-with-holes"))
def _xthread_idle() -> str:
    size = LARGE_REQUESTS[96]
    lines = allocate(1, "x", 60, size) + [f"1 free x{i}" for i in range(60) if i % 3 == 2]
    lines.append("1 idle")
    lines += [f"2 free x{i}" for i in range(60) if i % 3 == 1]
    lines.append("1 idle")
    lines += [f"2 free x{i}" for i in range(60) if i % 3 == 0]
    return "\n".join(lines + ["1 collect_force"])


@scenario("realloc-idle", "16 blocks of the middle class, the odd ones freed; a sweep; each even "
          "block shrunk by 4 KiB (in place), grown to twice (a huge block) and brought to half "
          "(the 160 KiB class), a sweep after each: the moves take purged holes back.", NO_HOLD,
          checks=("something-purged", "reuse-rises", "survivors-intact", "no-aliasing",
                  "stats-agree"))
def _realloc_idle() -> str:
    lines = allocate(1, "m", 16, MIDDLE) + free_where(1, "m", 16, lambda i: i % 2 == 0)
    lines.append("1 idle")
    for i in range(0, 16, 2):
        lines += [f"1 realloc m{i} s{i} {MIDDLE - 4096}", f"1 realloc s{i} g{i} {2 * MIDDLE}",
                  f"1 realloc g{i} h{i} {MIDDLE // 2 + 8192}", "1 idle"]
    return "\n".join(lines)


@scenario("abandoned-idle", "A thread allocates 20 blocks of the largest class, frees the odd "
          "ones and exits; another thread's sweep at interval 0 discards them in the abandoned "
          "pages; 20 zallocs from that thread after it.", NO_HOLD,
          checks=("something-purged", "freed-purged", "survivors-intact", "no-aliasing",
                  "stats-agree"))
def _abandoned_idle() -> str:
    size = LARGE_REQUESTS[512]
    lines = allocate(2, "b", 20, size) + free_where(2, "b", 20, lambda i: i % 2 == 0)
    lines += ["2 abandon", "1 idle"]
    lines += [f"1 zalloc z{i} {size}" for i in range(20)]
    return "\n".join(lines + ["1 collect"])


# -- test-purge-holes.c: small and medium pages ------------------------------------------------------

# (block size, blocks, one kept in): the real test's counts fill 32 small pages of each size
SURVIVORS = ((1024, 2048, 32), (4096, 1024, 16), (8192, 512, 8), (16384, 256, 4),
             (256, 4096, 32))
SURVIVORS_SMALL = ((1024, 128, 32), (4096, 32, 16), (8192, 16, 8), (16384, 40, 4),
                   (256, 256, 32))  # a page or two of each: what the named scenario runs


def survivors_script(shape=SURVIVORS, prefix: str = "s") -> str:
    """The survivors cases: per block size, allocate, keep one in `keep`, sweep, free the
    survivors."""
    lines: list[str] = []
    for bs, count, keep in shape:
        p = f"{prefix}{bs}_"
        lines += allocate(1, p, count, bs) + free_where(1, p, count, lambda i, k=keep: i % k == 0)
        lines.append("1 idle")
        lines += [f"1 free {p}{i}" for i in range(0, count, keep)]
    return "\n".join(lines)


@scenario("survivors-small", "Blocks of 1, 4, 8 and 16 KiB (and 256 B) in small and medium "
          "pages, one in 32/16/8/4 kept (two pages of each; the real counts in the slow tier): "
          "a sweep discards some, every survivor keeps every byte; then the survivors are "
          "freed.", NO_HOLD, checks=("something-purged", "survivors-intact", "stats-agree"))
def _survivors_small() -> str:
    return survivors_script(SURVIVORS_SMALL)


def lifecycle_script(n: int) -> str:
    lines = allocate(1, "p", n, 8192) + free_where(1, "p", n, lambda i: i % 8 == 0)
    lines.append("1 idle")
    lines += [f"1 free p{i}" for i in range(0, n, 8)] + ["1 collect"]
    lines += allocate(1, "q", n, 8192) + [f"1 free q{i}" for i in range(n)]
    return "\n".join(lines + ["1 collect"])


@scenario("lifecycle-small", "64 blocks of 8 KiB (the real test: 512), one in 8 kept; a sweep; "
          "the rest freed and collected: the pages go back with their holes; as many blocks "
          "again, written; all freed: nothing is left discarded at the end.", NO_HOLD,
          checks=("something-purged", "survivors-intact", "no-aliasing", "nothing-left-at-end",
                  "stats-agree"))
def _lifecycle() -> str:
    return lifecycle_script(64)


def abandoned_small_script(n: int) -> str:
    lines = allocate(2, "a", n, 8192) + free_where(2, "a", n, lambda i: i % 8 == 0)
    lines += ["2 abandon", "1 idle"] + allocate(1, "n", n, 8192)
    return "\n".join(lines)


@scenario("abandoned-small", "A thread allocates 64 blocks of 8 KiB (the real test: 256), keeps "
          "one in 8 and exits; another thread's sweep discards the holes of the abandoned "
          "pages; that thread then allocates as many.", NO_HOLD,
          checks=("something-purged", "survivors-intact", "no-aliasing", "stats-agree"))
def _abandoned_small() -> str:
    return abandoned_small_script(64)


@scenario("option-off", "purge_holes off: 64 blocks of 4 KiB, 3 of 4 freed, a sweep: nothing "
          "is discarded, the unformed tail included, and the survivors keep every byte.",
          Options(purge_holes=False, purge_holes_min_interval=0),
          checks=("nothing-discarded", "survivors-intact", "stats-agree"))
def _option_off() -> str:
    lines = allocate(1, "o", 64, 4096) + free_where(1, "o", 64, lambda i: i % 4 == 0)
    lines += ["1 idle", "1 malloc big 131072", "1 idle"]  # a large page with an unformed tail
    return "\n".join(lines)


CHURN_SIZES = (64, 512, 1024, 4096, 8192, 10239, 10240, 10241, 16384, 16385, 24576)
CHURN_LIVE_MAX = 400


def churn_script(steps: int, seed: int = 0x853C49E6) -> str:
    """The churn case: each step allocates one of CHURN_SIZES (55% of the time while fewer than
    CHURN_LIVE_MAX are live, always when none is) or frees a random live block; a sweep every
    97 steps; at the end every live block is freed."""
    rng = random.Random(seed)
    live: list[str] = []
    lines: list[str] = []
    for step in range(steps):
        if not live or (len(live) < CHURN_LIVE_MAX and rng.random() < 0.55):
            name = f"c{step}"
            lines.append(f"1 malloc {name} {rng.choice(CHURN_SIZES)}")
            live.append(name)
        else:
            k = rng.randrange(len(live))
            live[k], live[-1] = live[-1], live[k]
            lines.append(f"1 free {live.pop()}")
        if step % 97 == 0:
            lines.append("1 idle")
    lines += [f"1 free {name}" for name in live]
    return "\n".join(lines + ["1 idle"])


CHURN_STEPS_SMALL = 300  # the named scenario; the real test's 20,000 run in the slow tier


@scenario("churn", f"{CHURN_STEPS_SMALL:,} random steps (the real test: 20,000) of 64 B to "
          f"24 KiB blocks with a sweep every 97: no block handed out twice, every usable size at "
          f"least the request, every block aligned, every live block intact.", NO_HOLD,
          checks=("no-aliasing", "usable-size", "aligned", "survivors-intact", "stats-agree"))
def _churn() -> str:
    return churn_script(CHURN_STEPS_SMALL)


# -- named by the digest and the issue ----------------------------------------------------------------

@scenario("unformed-tail", "A large page with three blocks formed: a sweep discards its "
          "unformed tail, strictly inside [capacity, reserved); allocations bring it back before "
          "they form blocks in it; once the page is fully formed no tail is left.", NO_HOLD,
          checks=("tail-life", "survivors-intact", "stats-agree", "nothing-left-at-end"))
def _unformed() -> str:
    size = 128 * KiB
    lines = allocate(1, "t", 3, size) + ["1 idle"]
    lines += allocate(1, "u", 29, size) + ["1 idle"]  # forms the rest: 32 blocks in all
    lines += [f"1 free t{i}" for i in range(3)] + [f"1 free u{i}" for i in range(29)]
    return "\n".join(lines + ["1 idle"])


@scenario("sweep-skip", "A walked page is skipped by the next sweeps (no blocks visited, no "
          "discard) while nothing changes; a free makes the next sweep walk it again.", NO_HOLD,
          checks=("skip-unchanged", "survivors-intact", "stats-agree"))
def _skip() -> str:
    lines = keep_every_third(1, 128 * KiB, 12, "k")
    lines += ["1 idle", "1 idle", "1 idle", "1 free k3", "1 idle", "1 idle"]
    return "\n".join(lines)


@scenario("full-sweep", "A change the skip cannot see: after a walk a block is taken and another "
          "freed, so (capacity, used) is as the walk left it; sweeps skip the page and the hole "
          "stays until the full sweep (every purge_holes_full_every-th, 4 here) walks it.",
          Options(purge_holes_min_interval=0, purge_holes_full_every=4),
          checks=("full-sweep-finds-hole", "skip-unchanged", "survivors-intact", "stats-agree"))
def _full() -> str:
    # 5 KiB blocks on 4 KiB units: block 1 has no unit of its own, so it stays on the free list
    # at the walk; block 7 does, so it can go as soon as it is free.
    lines = allocate(1, "f", 12, 5 * KiB) + ["1 free f1", "1 idle", "1 malloc g 5120",
                                             "1 free f7"]
    lines += ["1 idle"] * 4
    return "\n".join(lines)


@scenario("idle-no-unpurge", "A page whose free blocks are all purged: idle sweeps and collects "
          "never take a hole back; the next allocation does.", NO_HOLD,
          checks=("idle-never-unpurges", "something-purged", "survivors-intact", "stats-agree"))
def _idle_no_unpurge() -> str:
    lines = keep_every_third(1, 128 * KiB, 12, "i")
    lines += ["1 idle", "1 collect", "1 idle", "2 idle", "1 collect", "1 malloc back 131072"]
    return "\n".join(lines + ["1 collect"])


@scenario("double-free-small", "A purged block of a small page freed again by its owner is "
          "reported and changes nothing.", NO_HOLD,
          checks=("double-free-reported", "survivors-intact", "stats-agree"))
def _double_free_small() -> str:
    lines = allocate(1, "w", 16, 4096) + free_where(1, "w", 16, lambda i: i % 3 == 0)
    return "\n".join(lines + ["1 idle", "1 free w4", "1 free w5"])


# -- the hold, in the real test's shape ---------------------------------------------------------------

@scenario("recent-allocation", "Interval 300 ms: 16 blocks of the middle class, 3 of 4 freed. "
          "The first sweep after the allocations and a second right after take nothing and "
          "_pending says so; an interval later, with one page just allocated from, the others "
          "go and that one stays; four rounds an interval apart, a page allocated from before "
          "each sweep keeps its blocks; an interval after the last, all go, _pending is false, "
          "and a sweep after that skips the pages.", Options(purge_holes_min_interval=300),
          tags=("liveness", "epoch", "inline"),
          checks=("hold-first-keeps", "held-says-pending", "freed-purged", "survivors-intact",
                  "skip-unchanged", "stats-agree"))
def _recent_allocation() -> str:
    lines = ["1 idle", "clock 320"]
    lines += allocate(1, "r", 16, MIDDLE) + free_where(1, "r", 16, lambda i: i % 4 == 0)
    lines += ["1 idle", "1 pending", "1 idle", "1 pending"]
    for n in range(5):  # the touched page, then the four busy rounds
        lines += ["clock 320", f"1 malloc t{n} {MIDDLE}", f"1 free t{n}", "1 idle", "1 pending"]
    lines += ["clock 320", "1 idle", "1 pending", "1 idle"]
    return "\n".join(lines)


@scenario("aligned-16k", "128 blocks of 16 KiB at 16 KiB alignment (mi_malloc_aligned; JSC's "
          "MarkedBlock), the odd ones freed; a sweep discards them; the odd ones taken again "
          "at the same alignment stay 16 KiB aligned after the unpurge and the survivors keep "
          "every byte.",
          NO_HOLD, checks=("something-purged", "aligned-16k", "survivors-intact", "reuse-rises",
                           "stats-agree"))
def _aligned() -> str:
    return aligned_script()


@scenario("aligned-16k-offset", "As aligned-16k with the block area 192 bytes into the page (the "
          "offset of the real unit-arithmetic test): no block of the 16 KiB class is aligned, "
          "so each request takes a larger block and hands out the aligned address in it; those "
          "stay aligned after the unpurge too.",
          Options(purge_holes_min_interval=0, first_block_offset=192),
          checks=("aligned-16k", "survivors-intact", "usable-size", "stats-agree"))
def _aligned_offset() -> str:
    return aligned_script()


def aligned_script() -> str:
    lines = [f"1 malloc_aligned j{i} 16384 16384" for i in range(128)]
    lines += free_where(1, "j", 128, lambda i: i % 2 == 0)
    lines.append("1 idle")
    lines += [f"1 malloc_aligned k{i} 16384 16384" for i in range(1, 128, 2)]
    return "\n".join(lines + ["1 collect"])


# -- sweepers at the same time, in the real test's shape, on the virtual clock ----------------------

FIRST = LARGE_REQUESTS[96]
SHAPE_INTERVAL_MS = 50  # the real test's purge_holes_min_interval
SHAPE_SWEEPERS = 4
SHAPE_ROUND_MS = 12  # the virtual time a round of every thread's allocation and sweep takes


def sweepers_script(rounds: int = 52) -> str:
    """The real test's sweepers: thread 1 keeps 12 blocks of the middle class with the odd
    ones freed; threads 2..5 each keep a page of the first class with two standing holes
    (blocks 1 and 3 of 4 freed); then each round every sweeper allocates, frees and sweeps,
    and thread 1 allocates from its page with holes, frees and sweeps; the clock moves
    SHAPE_ROUND_MS a round (52 rounds: 624 ms, 12.5 intervals)."""
    lines = allocate(1, "r", 12, MIDDLE) + free_where(1, "r", 12, lambda i: i % 2 == 0)
    sweepers = range(2, 2 + SHAPE_SWEEPERS)
    for t in sweepers:
        lines += allocate(t, f"own{t}_", 4, FIRST) + [f"{t} free own{t}_1", f"{t} free own{t}_3"]
    for n in range(rounds):
        for t in sweepers:
            lines += [f"{t} malloc p{t}_{n} {FIRST}", f"{t} free p{t}_{n}", f"{t} idle"]
        lines += [f"1 malloc b{n} {MIDDLE}", f"1 free b{n}", "1 idle", f"clock {SHAPE_ROUND_MS}"]
    return "\n".join(lines)


@scenario("sweepers-real", "The real test's sweepers at the same time, on the virtual clock: "
          "interval 50 ms; thread 1 keeps 12 blocks of the middle class, the odd ones freed; "
          "four sweepers each keep a page of the first class with two standing holes; each "
          "round every thread allocates, frees and sweeps, 12 ms a round for 52 rounds (12.5 "
          "intervals; the C reference's `stress --scenario real` runs it on real threads). No epoch is shorter than the interval, a page allocated from less than "
          "an interval before a sweep keeps its blocks, the survivors keep every byte.",
          Options(purge_holes_min_interval=SHAPE_INTERVAL_MS), tags=("epoch", "inline"),
          checks=("epoch-not-shorter", "busy-page-keeps", "survivors-intact", "stats-agree"))
def _sweepers_real() -> str:
    return sweepers_script()


# -- the later test-purge-holes.c: every small size class purges (small-blocks-are-eligible) ---------

SIZES_SMALL = (16, 64, 256, 1024)
SIZES_SURVIVORS = 2  # survivors per size in the named scenario; the real test keeps 32


def sizes_script(survivors: int = SIZES_SURVIVORS, os_page: int = 4 * KiB) -> str:
    """test_survivors of the later file: per block size, keep one block in every
    ceil(2 OS pages / size) + 2 (so at least two OS pages of free blocks lie between two
    survivors), 256 blocks at least; a sweep; then the survivors are freed."""
    keeps = [(bs, -(-2 * os_page // bs) + 2) for bs in SIZES_SMALL]
    return survivors_script([(bs, max(keep * survivors, 256), keep) for bs, keep in keeps],
                            prefix="z")


@scenario("survivors-sizes", "Blocks of 16, 64, 256 and 1024 B in small pages, one kept in "
          "every ceil(2 OS pages / size) + 2 (two survivors of each; the real test: 32): a sweep "
          "discards something in the pages of every size, 256 and 512 blocks a page included, "
          "and every survivor keeps every byte.", NO_HOLD,
          checks=("each-size-purged", "survivors-intact", "stats-agree"))
def _survivors_sizes() -> str:
    return sizes_script()
