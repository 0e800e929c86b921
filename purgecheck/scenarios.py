"""Named scenarios: the cases of the real tests (digest section 11) as op scripts.

Each scenario is an op script plus the options it runs under. The same scripts drive the model
engines, `purgecheck scenario`, and (later) the C driver, so a scenario means one thing
everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from model.geometry import ARCH32, KiB, MiB
from model.world import Options
from purgecheck.formats.ops import Op, parse_script


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    build: Callable[[], str]  # returns the op script text
    options: Options = field(default_factory=Options)
    tags: tuple[str, ...] = ("page",)
    # The real tests' assertions this scenario checks (names of purgecheck.realtests.checks.CHECKS),
    # on the model's trace and on the C reference's.
    checks: tuple[str, ...] = ()

    def ops(self) -> list[Op]:
        return parse_script(self.build(), source=f"scenario:{self.name}")


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, description: str, options: Options | None = None,
             tags: tuple[str, ...] = ("page",), checks: tuple[str, ...] = ()):
    def wrap(fn: Callable[[], str]) -> Callable[[], str]:
        SCENARIOS[name] = Scenario(name, description, fn, options or Options(), tags, checks)
        return fn
    return wrap


def keep_every_third(thread: int, size: int, count: int, prefix: str) -> list[str]:
    """Allocate `count` blocks, free all but every third."""
    lines = [f"{thread} malloc {prefix}{n} {size}" for n in range(count)]
    lines += [f"{thread} free {prefix}{n}" for n in range(count) if n % 3]
    return lines


LARGE_CLASSES = (96 * KiB, 256 * KiB, 512 * KiB)  # the first, a middle and the largest


@scenario("every-third", "Keep every third block of the first, a middle and the largest "
          "large class; one walk purges every freed block and the survivors keep every byte.")
def _every_third() -> str:
    lines: list[str] = []
    for size in LARGE_CLASSES:
        lines += keep_every_third(1, size, 4 * MiB // size, f"b{size // KiB}_")
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("reuse-after-purge", "After a walk, malloc and zalloc take the purged blocks back "
          "(no block handed out twice, zalloc zero), then they are freed and purged again.")
def _reuse() -> str:
    lines = keep_every_third(1, 128 * KiB, 32, "a")
    lines.append("1 walk")
    lines += [f"1 {'zalloc' if n % 2 else 'malloc'} r{n} {128 * KiB}" for n in range(24)]
    lines += [f"1 free r{n}" for n in range(0, 24, 2)]
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("xthread-frees", "Frees from another thread into a page with holes go through "
          "xthread_free; the walk purges them after a collect, and the last blocks too.")
def _xthread() -> str:
    lines = [f"1 malloc x{n} {160 * KiB}" for n in range(25)]
    lines += [f"2 free x{n}" for n in range(25) if n % 3]
    lines.append("1 walk")
    lines += [f"2 free x{n}" for n in range(0, 24, 3)]
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("realloc-holes", "realloc shrinking in place and moving between classes next to "
          "holes.")
def _realloc() -> str:
    lines = keep_every_third(1, 192 * KiB, 21, "m")
    lines.append("1 walk")
    lines += ["1 realloc m0 m0s 100000", "1 realloc m3 m3g 400000",
              "1 realloc m6 m6m 130000", "1 walk"]
    return "\n".join(lines)


@scenario("heap-destroy", "mi_heap_destroy with holes: the accounting returns to its start.",
          checks=('something-purged', 'survivors-intact', 'nothing-left-at-end'))
def _destroy() -> str:
    lines = keep_every_third(3, 128 * KiB, 32, "d")
    lines += ["3 walk", "3 heap_destroy"]
    return "\n".join(lines)


@scenario("heap-delete", "mi_heap_delete with holes: emptied pages go back to the arena.",
          checks=('something-purged', 'survivors-intact', 'nothing-left-at-end'))
def _delete() -> str:
    lines = [f"3 malloc e{n} {128 * KiB}" for n in range(32)]
    lines += [f"3 free e{n}" for n in range(32) if n % 3]
    lines.append("3 walk")
    lines += [f"3 free e{n}" for n in range(0, 32, 3)]
    lines += ["3 heap_delete"]
    return "\n".join(lines)


@scenario("double-free-purged", "A double free of a purged block by its owner is reported, not "
          "absorbed. (Only the owner's free is checked in the real code: src/free.c calls "
          "mi_check_is_double_free from mi_free_block_local, not from mi_free_block_mt.)",
          checks=('double-free-reported', 'survivors-intact'))
def _double_free() -> str:
    lines = keep_every_third(1, 128 * KiB, 12, "f")
    lines += ["1 walk", "1 free f1", "1 free f2"]
    return "\n".join(lines)


@scenario("failed-discard", "A discard that fails un-purges its run again and leaves the walk "
          "incomplete; the next walk purges it.")
def _failed() -> str:
    lines = keep_every_third(1, 128 * KiB, 32, "g")
    lines += ["fail_discard 2", "1 walk", "1 walk"]
    return "\n".join(lines)


@scenario("small-medium", "Small and medium pages purge holes in OS-page units.")
def _small_medium() -> str:
    lines = keep_every_third(1, 8 * KiB, 64, "s")
    lines += keep_every_third(1, 48 * KiB, 10, "m")
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("walk-order", "The holes walk rebuilds the free list by pushing each kept block on "
          "a new head: the free blocks next to live ones come back reversed, and the next "
          "mallocs take them in that order (digest 3, step 3).")
def _walk_order() -> str:
    lines = [f"1 malloc w{i} 1000" for i in range(24)]
    lines += ["1 free w1", "1 free w2", "1 free w5"]  # kept: units shared with live blocks
    lines += [f"1 free w{i}" for i in range(8, 17)]  # units 2 and 3 lie in free blocks only
    lines += ["1 walk", "1 malloc x0 1000", "1 malloc x1 1000", "1 walk"]
    return "\n".join(lines)


@scenario("fork-while-moving", "Forks placed inside another thread's advance: after its CAS "
          "took MOVING and after its increment, the child records a new beginning "
          "(_mi_page_purge_holes_forked_child); outside an advance nothing is held.",
          tags=("hold",))
def _fork_moving() -> str:
    return "\n".join(["1 malloc a 262144", "1 malloc b 262144", "1 free b",
                      "clock_at cas 5", "2 fork_at increment", "2 fork_at store_start",
                      "1 idle", "2 fork",
                      "clock 100", "2 fork_at read_clock", "1 idle", "1 pending"])


@scenario("clock-back", "A clock that goes back: before the epoch's start, the advance is due "
          "(digest 7); between the increment and the second reading, the new epoch begins at "
          "the earlier reading.", Options(clock_monotone=False), tags=("hold",))
def _clock_back() -> str:
    return "\n".join(["1 malloc a 262144", "1 malloc b 262144", "1 free b", "1 idle",
                      "clock 30", "clock -50", "1 idle", "clock_at read_clock_again -20",
                      "clock 200", "1 idle", "clock 100", "1 idle", "1 pending"])


@scenario("purged-straddler", "A block that straddles two units and was purged through one of "
          "them counts as free for the other: when its other neighbour is freed, that unit "
          "goes too (digest 3, step 2: free-listed or purged).")
def _purged_straddler() -> str:
    lines = [f"1 malloc s{i} 3000" for i in range(6)]  # 3 KiB blocks on 4 KiB units
    lines += ["1 free s1", "1 free s2", "1 free s3", "1 walk",  # units 1, 2 go; s1 purged
              "1 free s0", "1 walk"]  # unit 0 lies in s0 (free) and s1 (purged): it goes
    return "\n".join(lines)


@scenario("age-half-wrap", "A page left for 2^31 epochs is old: the age is the 32-bit "
          "difference taken unsigned, so half the wraparound is not read as negative (young).",
          tags=("hold",))
def _age_half_wrap() -> str:
    return "\n".join(["1 malloc h0 262144", "1 malloc h1 262144", "1 free h1",
                      "epoch_skip 2147483648", "clock 100", "1 idle", "1 pending"])


@scenario("huge-never", "A huge page (one block) is never purged, even with its block "
          "freed from another thread and collected.")
def _huge() -> str:
    return "\n".join(["1 malloc h0 3000000", "1 malloc h1 3000000", "1 free h0",
                      "2 free h1", "1 walk"])


@scenario("fresh-blocks", "Blocks formed by an extension and never handed out are free and "
          "zero; a walk that purges them clears free_is_zero all the same.")
def _fresh() -> str:
    return "\n".join(["1 malloc z0 131072", "1 walk", "1 zalloc z1 131072"])


@scenario("offset-192", "Small pages whose first block starts 192 bytes in: unit 0 holds the "
          "page meta data and is never discarded; bits count from align_down(page_start).",
          Options(first_block_offset=192))
def _offset() -> str:
    return "\n".join(keep_every_third(1, 4 * KiB, 48, "o") + ["1 walk"])


@scenario("os-page-16k", "A large page on a 16 KiB OS page keeps the OS page as its unit.",
          Options(os_page_size=16 * KiB))
def _os16() -> str:
    return "\n".join(keep_every_third(1, 112 * KiB, 36, "p") + ["1 walk"])


@scenario("os-page-64k", "On a 64 KiB OS page a 96 KiB class shares units with live "
          "neighbours, which keep them.", Options(os_page_size=64 * KiB))
def _os64() -> str:
    return "\n".join(keep_every_third(1, 96 * KiB, 42, "q") + ["1 walk"])


@scenario("arch32-large", "On 32-bit a large page is 1 MiB and its unit is the OS page.",
          Options(arch=ARCH32))
def _arch32() -> str:
    return "\n".join(keep_every_third(1, 64 * KiB, 16, "w") + ["1 walk"])


# -- the hold, the drivers and the park (seed 000, change (2)), on a virtual clock --------

def large_pages_with_holes(thread: int, prefix: str = "L") -> list[str]:
    """Three large pages (the first, a middle and the largest class), every third kept."""
    lines: list[str] = []
    for size in LARGE_CLASSES:
        lines += keep_every_third(thread, size, 4 * MiB // size, f"{prefix}{size // KiB}_")
    return lines


@scenario("park-handoff", "A thread parks after using large pages: the first sweep takes "
          "nothing of them and does not mark the park done; two or three sweeps an interval "
          "apart take every free block; then the park is done and not swept again.",
          tags=("liveness", "epoch", "park"),
          checks=('freed-purged', 'survivors-intact', 'something-purged', 'park-first-keeps',
                  'park-done-in-2-3', 'hold-first-keeps'))
def _park() -> str:
    return "\n".join(large_pages_with_holes(1) + ["1 park", "scavenger 1000", "1 unpark"])


@scenario("inline-hold", "Inline sweeps: nothing goes at the first sweep after the "
          "allocations nor at a second right after, and _pending says so; an interval later "
          "the pages left alone go and the one just allocated from stays.",
          tags=("liveness", "epoch", "inline"),
          checks=('freed-purged', 'survivors-intact', 'hold-first-keeps', 'held-says-pending'))
def _inline() -> str:
    lines = large_pages_with_holes(1)
    lines += ["1 idle", "1 pending", "1 idle", "1 pending", "clock 100",
              "1 malloc touch 262144", "1 free touch", "1 idle", "1 pending",
              "clock 100", "1 idle", "1 pending", "clock 100", "1 idle", "1 pending"]
    return "\n".join(lines)


@scenario("inline-busy", "A page allocated from before every sweep keeps its blocks over "
          "four more epochs and goes at the first sweep after it was left alone for a whole "
          "epoch; a sweep after that has nothing to do.", tags=("liveness", "epoch", "inline"))
def _busy() -> str:
    lines = keep_every_third(1, 256 * KiB, 16, "B")
    lines += ["1 idle"]
    for n in range(5):
        lines += ["clock 100", f"1 malloc t{n} 262144", f"1 free t{n}", "1 idle"]
    lines += ["clock 100", "1 idle", "clock 100", "1 idle", "clock 100", "1 idle"]
    return "\n".join(lines)


@scenario("abandoned-young", "A young page abandoned by its thread is left by another "
          "thread's sweep and taken two epochs later.", tags=("liveness", "epoch", "abandoned"),
          checks=('something-purged', 'survivors-intact', 'hold-first-keeps'))
def _abandoned() -> str:
    lines = keep_every_third(2, 128 * KiB, 32, "A")
    lines += ["2 abandon", "1 idle", "clock 100", "1 idle", "clock 100", "1 idle",
              "clock 100", "1 idle"]
    return "\n".join(lines)


@scenario("interval-zero", "purge_holes_min_interval = 0 turns the hold off: the first sweep "
          "takes every free block.", Options(purge_holes_min_interval=0), tags=("liveness", "epoch",))
def _interval0() -> str:
    return "\n".join(large_pages_with_holes(1) + ["1 idle"])


@scenario("wraparound", "A page left for a multiple of 2^32 epochs reads as young once more "
          "and goes two epochs later.", tags=("liveness", "epoch",))
def _wrap() -> str:
    lines = keep_every_third(1, 256 * KiB, 16, "W")
    # 2^32 - 1 epochs pass; the next sweep's advance makes it 2^32 since the stamp's epoch.
    lines += ["1 idle", f"epoch_skip {(1 << 32) - 1}", "clock 100", "1 idle", "clock 100", "1 idle",
              "clock 100", "1 idle"]
    return "\n".join(lines)


def buffer_loop(requests: int, park: bool) -> list[str]:
    """A loop that takes and frees four 256 KiB buffers per request, 10 ms apart, with an
    idle sweep (inline, or a park and a scavenger pass) between requests."""
    lines: list[str] = []
    for r in range(requests):
        lines += [f"1 malloc q{r}_{b} 262144" for b in range(4)]
        lines += [f"1 free q{r}_{b}" for b in range(4)]
        lines += ["1 park", "scavenge", "1 unpark"] if park else ["1 idle"]
        lines.append("clock 10")
    return lines


@scenario("buffer-loop-inline", "A loop that frees and takes 256 KiB buffers with inline "
          "sweeps between: the epoch design discards nothing (handoff-only purged 58 MB in "
          "3 s in the seed).", tags=("epoch", "variant"))
def _loop_inline() -> str:
    return "\n".join(keep_every_third(1, 256 * KiB, 3, "pin") + buffer_loop(300, park=False))


@scenario("server-parks", "A server that parks between requests under sustained load: the "
          "epoch design discards nothing; (1) without (2) discards and refaults the buffers "
          "at every due park.", tags=("epoch", "variant", "park"))
def _server() -> str:
    return "\n".join(keep_every_third(1, 256 * KiB, 3, "pin") + buffer_loop(300, park=True))


@scenario("sweep-once-then-block", "A caller that sweeps once and then blocks: nothing comes "
          "back by itself; polling _pending an interval apart gives the blocks back.",
          tags=("epoch", "variant"))
def _sweep_once() -> str:
    lines = keep_every_third(1, 256 * KiB, 16, "S")
    lines += ["1 idle", "1 pending", "clock 5000", "1 pending", "1 idle", "1 pending",
              "clock 100", "1 idle", "1 pending", "clock 100", "1 idle", "1 pending"]
    return "\n".join(lines)


@scenario("abandoned-two-parks", "An abandoned page that two parked threads sweep one after "
          "the other: the epoch design keeps it (both see the same epoch); two-untouched gives "
          "it its two sweeps within a millisecond.", tags=("epoch", "variant", "park"))
def _two_parks() -> str:
    lines = keep_every_third(3, 128 * KiB, 32, "T")
    lines += ["3 idle", "3 abandon", "2 malloc keep2 100", "4 malloc keep4 100",
              "2 park", "4 park", "clock 1", "scavenge", "2 unpark", "4 unpark"]
    return "\n".join(lines)


@scenario("park-churn", "A parked thread whose sweeps keep finding young abandoned pages "
          "(other threads allocate, free and exit between sweeps): the park is done once a "
          "sweep began two epochs after its first, and never swept more than 6 times.",
          tags=("epoch", "park"))
def _churn() -> str:
    lines = ["1 malloc own 262144", "1 park"]
    for r in range(8):
        t = 10 + r
        lines += keep_every_third(t, 256 * KiB, 16, f"c{r}_")
        lines += [f"{t} abandon", "scavenge", "clock 100"]
    lines.append("1 unpark")
    return "\n".join(lines)


@scenario("park-slow-sweeps", "Park sweeps that take 30 ms of work each: the next sweep is "
          "an interval after the END of the one before.", Options(sweep_ms=30),
          tags=("liveness", "epoch", "park"))
def _slow() -> str:
    return "\n".join(large_pages_with_holes(1) + ["1 park", "scavenger 1000", "1 unpark"])


# -- paths that only the fuzz machines reached before (issue 28 (6)) --------------------------

@scenario("xthread-then-park", "Another thread frees blocks of large pages with holes (each "
          "a push on xthread_free); the owner parks: the handoff's sweeps collect those frees "
          "and, once the pages are old, discard them with the rest; the survivors keep every "
          "byte.", tags=("liveness", "epoch", "park"),
          checks=("survivors-intact", "freed-purged", "stats-agree", "park-first-keeps",
                  "park-done-in-2-3", "hold-first-keeps"))
def _xthread_then_park() -> str:
    lines = [f"1 malloc x{n} {256 * KiB}" for n in range(16)]
    lines += [f"1 free x{n}" for n in range(16) if n % 4 == 1]  # the owner's own frees
    lines += [f"2 free x{n}" for n in range(16) if n % 4 in (2, 3)]  # cross-thread frees
    return "\n".join(lines + ["1 park", "scavenger 1000", "1 unpark"])


@scenario("abandon-reclaim-sweep", "A thread abandons large pages with holes and exits; "
          "another thread's sweep leaves them (young), then reclaims one, allocates from it "
          "and frees into it, and sweeps an interval apart until the pages it did not touch "
          "go and the reclaimed one goes after it was left alone.",
          tags=("liveness", "epoch", "abandoned"),
          checks=("survivors-intact", "something-purged", "stats-agree", "hold-first-keeps",
                  "no-aliasing"))
def _abandon_reclaim_sweep() -> str:
    lines = keep_every_third(2, 128 * KiB, 64, "A")
    lines += ["2 abandon", "1 idle", "clock 100", "1 reclaim A0",
              "1 malloc n0 131072", "1 malloc n1 131072", "1 free n0", "1 free A3", "1 idle"]
    lines += ["clock 100", "1 idle", "clock 100", "1 idle", "clock 100", "1 idle"]
    return "\n".join(lines)


@scenario("park-again", "A thread parks, is swept until its park is done, leaves, allocates "
          "from one of its large pages and parks again: the new park starts over (its first "
          "sweep keeps the page it just used, is not done), and is done in two or three sweeps "
          "that take every free block.", tags=("liveness", "epoch", "park"),
          checks=("survivors-intact", "freed-purged", "stats-agree", "park-done-in-2-3",
                  "hold-first-keeps"))
def _park_again() -> str:
    lines = large_pages_with_holes(1)
    lines += ["1 park", "scavenger 1000", "1 unpark", "clock 50",
              f"1 malloc again {256 * KiB}", "1 free again", "1 park", "scavenger 1000",
              "1 unpark"]
    return "\n".join(lines)


# The real tests' cases that earlier scenarios did not re-express (purgecheck/realtests/cases.py).
import purgecheck.realtests.scenarios  # noqa: E402,F401  (registers them in SCENARIOS)
