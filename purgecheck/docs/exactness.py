"""For each invariant of the registry: does it pin the rule exactly, or only bound it?

Issue 28: a rule checked as "at most" where the seed gives an exact one lets a broken
implementation through as long as it stays on the safe side (discarding less, never moving a
block, marking a park done early...). Each invariant is "exact" (it fails on any departure
from the seed's rule, in both directions) or "bound" (one side only), with why; where a bound
has an exact partner, the why names it. docs/invariants.md shows the column; the suite checks
every registered invariant is listed (tests/test_exact_invariants.py).
"""

from __future__ import annotations

E, B = "exact", "bound"

EXACTNESS: dict[str, tuple[str, str]] = {
    # -- the page (seed 000 (1), digest 1-4)
    "PG-UNIT": (E, "the unit is pinned: a power-of-two multiple, within 256 bits, and the "
                   "smallest such (both sides of the doubling)"),
    "PG-DISCARD-INSIDE": (B, "says what may not be discarded; its exact partner is "
                             "PG-WALK-TAKES-EVERY-FREE-UNIT (what must be)"),
    "PG-DISCARD-ALL-FREE": (B, "says what may not be discarded; its exact partner is "
                               "PG-WALK-TAKES-EVERY-FREE-UNIT"),
    "PG-PURGED-IFF-OVERLAP": (E, "a block is purged exactly when it overlaps a discarded unit, "
                                 "and the count says how many"),
    "PG-PURGED-OFF-LISTS": (B, "one side of PG-PURGED-IFF-OVERLAP / PG-COUNT, which make it "
                               "exact together"),
    "PG-COUNT": (E, "an equation: used + listed + purged == capacity"),
    "PG-LIVE-NOT-FREE": (B, "safety (no block both live and free); what is free is pinned by "
                            "PG-COUNT"),
    "PG-SURVIVORS-KEEP-BYTES": (B, "safety: no discard reaches a live block; that freed blocks "
                                   "do go is RT-FREED-PURGED and PG-WALK-TAKES-EVERY-FREE-UNIT"),
    "PG-FREE-IS-ZERO-CLEARED": (B, "only the clearing the seed requires; the flag is never set "
                                   "by a discard (RT-ZALLOC-ZERO checks the bytes)"),
    "PG-ACCOUNTING": (E, "an equation: discarded bytes == discarded units * unit"),
    "PG-UNPURGE-ALL-RESETS": (E, "after unpurge-all every count and bit is zero"),
    "PG-HUGE-NEVER-PURGE": (B, "an ineligible page never purges; that an eligible one does "
                               "is RT-EACH-SIZE-PURGED"),
    "PG-WALK-REVERSES": (E, "the free list after a walk is pinned, order included"),
    "PG-WALK-TAKES-EVERY-FREE-UNIT": (E, "with PG-DISCARD-INSIDE and -ALL-FREE: a complete walk "
                                         "discards exactly the units digest 3 step 2 names"),
    "AL-REALLOC-MOVES": (E, "in place exactly when half the block <= size <= the block; a "
                            "realloc that never moves down is caught"),
    # -- the process-wide counters (issue 28 (3))
    "PR-DISCARDED-BYTES-SUM": (E, "an equation between the process and its pages"),
    "PR-PURGED-BLOCKS-SUM": (E, "an equation between the process and its pages"),
    "PR-UNFORMED-BYTES-SUM": (E, "an equation between the process and its pages"),
    "PR-FULL-SWEEPS-SUM": (E, "an equation between the process and its threads"),
    "PR-PARKED-COUNT-SUM": (E, "an equation between the process and its threads"),
    "PR-ABANDONED-PAGES-SUM": (E, "an equation between the process and its pages"),
    # -- the hold, the sweep and the park (seed 000 (2), digest 5-8)
    "HD-YOUNG-KEPT": (B, "a young page keeps its blocks; that an old one loses them is "
                         "RT-HOLD-FIRST-KEEPS (a page held two epochs on fails it) and "
                         "HD-GOES-WITHIN-TWO"),
    "HD-INTERVAL": (B, "a lower bound on time (the seed's \"for the interval at least\"); the "
                       "upper one is HD-GOES-WITHIN-TWO"),
    "HD-GOES-WITHIN-TWO": (B, "the upper bound on time, at the end of the liveness scenarios; "
                              "with HD-INTERVAL it brackets when blocks go"),
    "PK-MAX-SWEEPS": (B, "at most six sweeps; PK-DONE-EXACT pins when the park is done"),
    "PK-DONE-TWO-EPOCHS": (B, "done once two epochs passed; the other side (not done while it "
                              "holds young blocks) is PK-DONE-EXACT"),
    "PK-DONE-EXACT": (E, "done exactly when nothing was left, two epochs passed, or the sixth "
                         "sweep; a park marked done early is caught"),
    "PK-SPACING": (B, "a lower bound on the time between sweeps of a park (the seed gives no "
                      "upper one: the scavenger's due time is a wake-up, not a promise)"),
    "PK-DONE-WITHIN-MAX": (B, "termination within the cap over the state graph"),
    "PK-NO-STUCK-CYCLE": (B, "no cycle without the park being done: liveness, one-sided by "
                             "nature"),
    "SW-WALK-SETS-STATE": (E, "swept_state after a complete walk is pinned to (capacity, used)"),
    # -- the epoch (seed 000 (2), digest 7)
    "EP-NO-SHORT-EPOCH": (B, "no epoch shorter than the interval (the seed bounds it below "
                             "only; an epoch may last longer: nobody swept)"),
    "EP-RECORDED-NOT-BEFORE-REAL": (B, "the recorded start is not before the real one; the seed "
                                       "allows it to be later"),
    "EP-ONE-PER-SWEEP": (B, "at most one move per sweep; that it moves is EP-EPOCH-MOVES"),
    "EP-EPOCH-MOVES": (B, "the epoch moves when due (liveness; with EP-ONE-PER-SWEEP it moves "
                          "by exactly one)"),
    "EP-SEES-STARTED": (B, "under C11: the epoch read after a start is seen is the one begun "
                           "there or a later one (the seed asks only that it is not older)"),
    "PK-HANDOFF-FRESH": (E, "under C11: what each side reads across the park and the claim is "
                            "exactly the latest value written, not merely a recent one"),
    "EP-MOVING-HELD": (E, "MOVING is held exactly while an advance is between its CAS and its "
                          "store"),
    "EP-BACK-IS-DUE": (B, "a reading behind start is due; the forward compare is checked by the "
                          "contracts (`due`: exactly now - start >= interval)"),
    "EP-AGE-MOD": (E, "age < 2 exactly when the stamp is the current or previous epoch modulo "
                      "2^32 (Z3, both directions)"),
    "PF-UNIT-MAP": (E, "the ranges are exactly the overlapping blocks and units (Z3, both "
                       "directions)"),
    # -- the fuzz machines' own judges
    "FZ-SURVIVORS-NEVER-DISCARDED": (B, "safety on the bytes: a live block keeps its pattern"),
    "FZ-ZALLOC-ZERO": (E, "every byte of a zalloc'd block is zero"),
    "FZ-NO-BLOCK-TWICE": (B, "safety: no block handed out twice"),
    "FZ-DOUBLE-FREE-REPORTED": (E, "a free of a block not held is reported and counted, every "
                                   "time"),
    # -- the C reference
    "CF-TRACE-EQUAL": (E, "the C trace equals the model's event for event"),
    "CF-SANITIZERS-CLEAN": (B, "no sanitizer report (absence of a class of bugs)"),
    "CF-LINEARIZED-RUNS": (B, "safety: each event a step the model allows in lin order; which "
                              "interleavings a run reaches is the machine's"),
    # -- glibc (seed 001)
    "GL-CHUNKS-TILE": (E, "the chunks tile the heap: no gap, no overlap"),
    "GL-TOP-LAST": (E, "the top chunk is exactly the last chunk"),
    "GL-NO-FREE-NEIGHBOURS": (B, "no two free neighbours (a consequence of coalescing)"),
    "GL-ACCOUNTING": (E, "system_mem equals the heaps' sizes"),
    "GL-TRIM-RULE": (E, "each trim gives back what its version's rule says, both when it trims "
                        "and when it does not"),
    "GL-PAD-KEPT": (B, "at least top_pad + MINSIZE stays; the amount is pinned by GL-TRIM-RULE"),
    "GL-TRIM-TRIGGER": (B, "a trim only from a large enough free; GL-TRIM-RULE pins the trim"),
    "GL-RFC-COUNTERS": (B, "the counters stay below 100 and are zero after a madvise"),
    "GL-DYNAMIC-THRESHOLD": (E, "the thresholds are pinned while no parameter was set"),
    "GL-STRACE-CONFORMANCE": (E, "the model's calls equal the real library's, category by "
                                 "category"),
    "GL-RFC-UINT16": (B, "the counters stay within 0..99"),
    "GL-RFC-CONDITION": (E, "the ratio test holds exactly when L >= 2 and M >= L + 2"),
    "GL-TRIM-FLOOR": (B, "no shrink below trim_threshold; how much is GL-TRIM-RULE"),
    "GL-PUBLISHED": (E, "the published counts, call for call"),
    # -- the real tests' case checks (purgecheck/realtests/checks.py)
    "RT-NO-ALIASING": (B, "safety: no block handed out twice"),
    "RT-USABLE-SIZE": (B, "the usable size is at least the request"),
    "RT-ALIGNED": (B, "every block at least MI_MAX_ALIGN_SIZE aligned"),
    "RT-ALIGNED-16K": (B, "every 16 KiB request at least 16 KiB aligned"),
    "RT-SURVIVORS-INTACT": (B, "safety: live blocks keep their bytes; RT-FREED-PURGED is the "
                               "other side"),
    "RT-ZALLOC-ZERO": (E, "every OS page of a zalloc'd purged block is written"),
    "RT-UNIT-RULE": (E, "the unit is the smallest that fits, both sides"),
    "RT-PURGED-GROWS": (B, "more is discarded at each sweep after more frees"),
    "RT-HOLD-FIRST-KEEPS": (E, "nothing goes while the page is young, and a page two epochs "
                               "old is not held"),
    "RT-HELD-SAYS-PENDING": (E, "_pending is true after a sweep that held free blocks and false "
                                "after one that held none"),
    "RT-PARK-FIRST-KEEPS": (B, "the first sweep of a park takes nothing and is not done"),
    "RT-PARK-DONE-IN-2-3": (E, "done after two or three sweeps, and not swept again"),
    "RT-FREED-PURGED": (E, "every freed block of a walked page is purged and not resident at "
                           "the end (with RT-SURVIVORS-INTACT: exactly the freed ones go)"),
    "RT-SOMETHING-PURGED": (B, "something was discarded (the case is not vacuous)"),
    "RT-NOTHING-DISCARDED": (E, "with purging off, nothing at all"),
    "RT-REUSE-RISES": (B, "a purged hole is taken back at least once"),
    "RT-NOTHING-LEFT-AT-END": (E, "nothing discarded at the end, every count zero"),
    "RT-DOUBLE-FREE-REPORTED": (E, "every second free is reported and changes nothing"),
    "RT-IDLE-NEVER-UNPURGES": (B, "the idle path never unpurges"),
    "RT-STATS-AGREE": (E, "each counter equals what the trace shows"),
    "RT-SKIP-UNCHANGED": (E, "an unchanged page is skipped and a changed one walked"),
    "RT-FULL-SWEEP-FINDS-HOLE": (B, "a full sweep discards the hidden hole at least once"),
    "RT-TAIL-LIFE": (B, "the tail's discard stays inside [capacity, reserved) and is gone when "
                        "formed; PR-UNFORMED-BYTES-SUM pins the bytes"),
    "RT-PAGES-FREED-WITH-HOLES": (E, "every emptied page goes back with its runs reused, and "
                                     "none with no live block stays"),
    "RT-EACH-SIZE-PURGED": (B, "every size purges something"),
    "RT-EPOCH-NOT-SHORTER": (B, "no epoch shorter than the interval"),
    "RT-BUSY-PAGE-KEEPS": (B, "a busy page keeps its blocks in that sweep"),
    "RT-UNIT-BLOCKS-GRID": (E, "the first and last block are exactly the overlapping ones"),
    "RT-OS-PAGE-BLOCKS-GRID": (E, "the same, and first = last = 0 outside"),
}
