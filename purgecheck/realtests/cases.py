"""The fork's real tests of hole purging, case by case, beside the named scenarios.

`CASES` lists every case of test/test-purge-holes-large.c (oven-sh/mimalloc at cb73f693) and
test/test-purge-holes.c (at d4450518), read for their facts: what a case sets up, what it does
and what it asserts (in this project's words), the named scenario that re-expresses it and the
assertions (names of purgecheck.realtests.checks.CHECKS) it makes. Five more rows are the cases that
digest section 11 and issue 21 name but those two commits do not hold.

The status of a case is computed, never typed in: `assess` runs the scenario on the model and on
the C reference, runs the scenario's declared checks on both traces, and a case is FULL when
every assertion it needs is declared by its scenario and held on both engines, PARTIAL when
some are (it says what is missing), MISSING when no scenario re-expresses it.
`purgecheck docs` writes the table as docs/real-tests.md.
"""

from __future__ import annotations

from dataclasses import dataclass

LARGE = "test-purge-holes-large.c@cb73f69"
SMALL = "test-purge-holes.c@d445051"
DIGEST = "digest 11 / issue 21"
LATER = "test-purge-holes.c@02ea105"  # the file's later form (the unit bitmap of seed 000)


@dataclass(frozen=True)
class RealCase:
    source: str  # the file (and commit) the case is in
    name: str  # its CHECK label in the file's main(), or the function
    setup: str
    does: str
    asserts: tuple[str, ...]  # the assertions, as check names of purgecheck.realtests.checks
    scenario: str | None = None  # the named scenario that re-expresses it
    unmodelled: str = ""  # what the case asserts that no check here states (said, not hidden)
    out_of_scope: str = ""  # why the case is not reproduced at all
    grid: str | None = None  # a grid of purgecheck.arith that re-expresses it (no scenario)
    threads: str | None = None  # a scenario of reference_c/stress (stress_*.c) for real threads


CASES: tuple[RealCase, ...] = (
    # -- test-purge-holes-large.c ----------------------------------------------------------------
    RealCase(LARGE, "unit", "one block each of 16 B, 1 KiB, 8 KiB, 64 KiB and of the first, a "
             "middle and the largest large class",
             "reads each page's purge unit, bits and base",
             ("unit-rule",), "unit-sizes"),
    RealCase(LARGE, "unit-arithmetic", "units of 8, 16, 64 KiB; blocks of 80..512 KiB; "
             "offsets 0, 4 KiB, 192 B; a full 4 MiB capacity",
             "for every unit index: inside the block area or not, and the first and last "
             "overlapping block, against a direct enumeration",
             ("unit-blocks-grid",), None, grid="large"),
    *(RealCase(LARGE, f"discard-{which}-class", f"40 blocks of the {which} large class "
               f"({size} KiB), every third kept; interval 0",
               "one idle sweep",
               ("freed-purged", "something-purged", "survivors-intact"), f"discard-idle-{size}")
      for which, size in (("first", 96), ("middle", 320), ("largest", 512))),
    RealCase(LARGE, "reuse-after-purge", "24 blocks of the middle class, 3 of 4 freed dirty; "
             "an idle sweep",
             "takes as many blocks again, alternately mi_zalloc and mi_malloc, writes them",
             ("something-purged", "reuse-rises", "no-aliasing", "survivors-intact",
              "zalloc-zero"), "reuse-idle"),
    RealCase(LARGE, "cross-thread-free", "60 blocks of the first class; the owner frees 3k+2; "
             "a sweep",
             "another thread frees 3k+1 into the pages with holes; a sweep; the other thread "
             "frees the rest; a forced collect (the op collect_force: mi_collect(true))",
             ("purged-grows", "survivors-intact", "pages-freed-with-holes"), "xthread-idle"),
    RealCase(LARGE, "realloc", "16 blocks of the middle class, odd ones freed; a sweep",
             "each even block: shrink by 4 KiB (in place), grow to twice, shrink to half, a "
             "sweep after each",
             ("something-purged", "reuse-rises", "survivors-intact", "no-aliasing"),
             "realloc-idle"),
    RealCase(LARGE, "abandoned", "a thread allocates 20 blocks of the largest class, frees the "
             "odd ones and exits; interval 0",
             "another thread's idle sweep; then 20 mi_zalloc from it",
             ("something-purged", "freed-purged", "survivors-intact", "no-aliasing"),
             "abandoned-idle"),
    RealCase(LARGE, "heap-destroy", "a heap: 30 blocks of the middle class, every third kept; a "
             "sweep", "mi_heap_destroy; a collect",
             ("something-purged", "survivors-intact", "nothing-left-at-end"), "heap-destroy"),
    RealCase(LARGE, "heap-delete", "a heap: 30 blocks of the middle class, every third kept; a "
             "sweep", "mi_heap_delete (survivors move), free them; a collect",
             ("something-purged", "survivors-intact", "nothing-left-at-end"), "heap-delete"),
    RealCase(LARGE, "double-free-of-a-purged-block", "8 blocks of the middle class, block 3 "
             "freed; a sweep", "block 3 freed again by its owner",
             ("double-free-reported", "survivors-intact"), "double-free-purged"),
    RealCase(LARGE, "park-defers-large-pages", "interval 300 ms; 24 blocks of the middle class, "
             "odd ones freed", "the thread parks; the scavenger sweeps it until done; 3 "
             "intervals more",
             ("park-first-keeps", "park-done-in-2-3", "freed-purged", "survivors-intact"),
             "park-handoff"),
    RealCase(LARGE, "recent-allocation", "interval 300 ms; 16 blocks of the middle class, 3 of "
             "4 freed", "inline sweeps: two right after, one an interval later after touching "
             "one page, four rounds touching a page before each, then untouched",
             ("hold-first-keeps", "held-says-pending", "freed-purged", "survivors-intact",
              "skip-unchanged"), "recent-allocation"),
    RealCase(LARGE, "abandoned-young", "interval 300 ms; a thread allocates 20 of the largest "
             "class, frees the odd ones, exits", "another thread's sweep, and one an interval "
             "later",
             ("hold-first-keeps", "something-purged", "survivors-intact"), "abandoned-young"),
    RealCase(LARGE, "sweepers-at-the-same-time", "interval 50 ms; 12 blocks of the middle "
             "class, the odd ones freed; 4 threads, each with a page of the first class with two "
             "standing holes, that allocate and sweep without pause",
             "this thread touches a page and sweeps, for 12 intervals and 4 epoch moves (on "
             "real threads: `stress --scenario real`, tests/test_sweepers_real.py)",
             ("epoch-not-shorter", "busy-page-keeps", "survivors-intact"), "sweepers-real",
             threads="real"),
    RealCase(LARGE, "floor", "", "", (), None,
             out_of_scope="purge_holes_large_floor is a later version's rule (digest 6.3), "
                          "optional for issue 21"),
    RealCase(LARGE, "floor-decay", "", "", (), None,
             out_of_scope="purge_holes_large_floor_epochs: the floor's decay, later versions"),
    RealCase(LARGE, "floor-idle-park", "", "", (), None,
             out_of_scope="the floor under a park: later versions"),
    RealCase(LARGE, "reclaim-before-extend", "", "", (), None,
             out_of_scope="run with the floor set: later versions"),
    RealCase(LARGE, "floor-free-page", "", "", (), None,
             out_of_scope="the floor's pages with no block in use: later versions"),
    RealCase(LARGE, "end-of-run", "everything freed", "mi_collect(true); the stats "
             "(mi_purge_holes_stats_get: discards, reuses, ineligible pages)",
             ("nothing-left-at-end",), "lifecycle-small"),
    # -- test-purge-holes.c ------------------------------------------------------------------------
    RealCase(SMALL, "run-arithmetic", "OS pages of 4 and 16 KiB, blocks of 16 B..64 KiB, "
             "seven offsets, capacities 0, 1, 64 and 512 KiB worth (the file's later form, "
             "os-page-arithmetic: d445051's run range belongs to its per-block bitmap, which "
             "the unit bitmap of seed 000 replaced)",
             "for every OS page index: inside the block area or not, and the first and last "
             "overlapping block; outside means first = last = 0",
             ("os-page-blocks-grid",), None, grid="small"),
    *(RealCase(SMALL, f"survivors-{bs}", f"{count} blocks of {bs} B, every {keep}th kept",
               "mi_purge_holes", ("survivors-intact", "something-purged"),
               "survivors-small") for bs, count, keep in
      ((1024, 2048, 32), (4096, 1024, 16), (8192, 512, 8), (16384, 256, 4))),
    RealCase(SMALL, "survivors-256-ineligible", "4096 blocks of 256 B, every 32nd kept; at "
             "d445051 the bitmap had a bit per block and MI_PAGE_PURGE_MAX_BLOCKS capped an "
             "eligible page below 256 blocks. The unit bitmap of seed 000 has no such cap "
             "(internal.h mi_page_can_purge_holes: reserved > 1, not pinned, no custom commit, "
             "bits <= 256; digest 2), and the file's later form asserts the opposite: 256-byte "
             "pages purge (small-blocks-are-eligible). The cap is the mutant "
             "purge-max-blocks-cap, which each-size-purged kills",
             "mi_purge_holes", ("survivors-intact", "each-size-purged"), "survivors-sizes"),
    RealCase(LATER, "small-blocks-are-eligible", "blocks of 16, 64, 256 and 1024 B, one kept "
             "in every ceil(2 OS pages / size) + 2", "mi_on_thread_idle",
             ("each-size-purged", "survivors-intact"), "survivors-sizes"),
    RealCase(SMALL, "purging-actually-happened", "the survivors cases", "",
             ("something-purged",), "survivors-small"),
    RealCase(SMALL, "churn-no-aliasing", "20,000 random steps: 55% allocate one of 11 sizes "
             "64 B..24 KiB (at most 400 live), else free a random live block",
             "mi_purge_holes every 97 steps",
             ("no-aliasing", "usable-size", "aligned", "survivors-intact"), "churn"),
    RealCase(SMALL, "aligned-16k", "128 blocks of 16 KiB at 16 KiB alignment, odd ones freed",
             "mi_purge_holes; the odd ones taken again aligned",
             ("something-purged", "aligned-16k", "survivors-intact"), "aligned-16k"),
    RealCase(SMALL, "page-lifecycle", "512 blocks of 8 KiB, every 8th kept",
             "mi_purge_holes; free the rest; collect; 512 blocks again, written",
             ("something-purged", "survivors-intact", "no-aliasing", "nothing-left-at-end"),
             "lifecycle-small"),
    RealCase(SMALL, "abandoned-pages", "a thread: 256 blocks of 8 KiB, every 8th kept, exits",
             "mi_purge_holes from another thread; 256 blocks from there",
             ("something-purged", "survivors-intact", "no-aliasing"), "abandoned-small"),
    RealCase(SMALL, "option-off-is-noop", "purge_holes set to 0 at run time; 256 blocks of "
             "4 KiB, 3 of 4 freed", "mi_purge_holes",
             ("nothing-discarded", "survivors-intact"), "option-off"),
    RealCase(SMALL, "no-holes-outstanding-at-exit", "every case above freed everything",
             "mi_collect(true)", ("nothing-left-at-end",), "lifecycle-small"),
    # -- named by the digest and the issue, not in those two commits --------------------------------
    RealCase(DIGEST, "unformed-tail", "a page with blocks not formed yet",
             "idle sweeps, then allocations that form the tail",
             ("tail-life", "survivors-intact"), "unformed-tail"),
    RealCase(DIGEST, "sweep-skips-unchanged", "a walked page", "sweeps with nothing changed, "
             "then a free and a sweep", ("skip-unchanged",), "sweep-skip"),
    RealCase(DIGEST, "full-sweep-finds-hidden-hole", "a walked page, then a change the skip "
             "cannot see", "sweeps up to the purge_holes_full_every-th",
             ("full-sweep-finds-hole",), "full-sweep"),
    RealCase(DIGEST, "idle-never-unpurges", "a page with holes, its free list empty",
             "idle sweeps and collects", ("idle-never-unpurges", "something-purged"),
             "idle-no-unpurge"),
    RealCase(DIGEST, "holes-report", "", "", (), None,
             out_of_scope="mi_purge_holes_report is a diagnostic of the real code (it prints "
                          "where the holes are), not a rule of when memory goes back"),
    RealCase(DIGEST, "double-free-small", "a small page with a purged block",
             "the owner frees it again", ("double-free-reported", "survivors-intact"),
             "double-free-small"),
)


@dataclass
class Assessment:
    case: RealCase
    status: str  # FULL, PARTIAL, MISSING, OUT OF SCOPE
    engines: tuple[str, ...]  # where the scenario ran with its checks held: model, C, C threads
    checked: tuple[str, ...]  # the case's assertions its scenario declares and both engines held
    missing: str  # what is missing, in words


def run_scenario_checks(names: set[str], driver=None) -> dict[str, dict[str, dict[str, list]]]:
    """{scenario: {engine: {check: problems}}} for each named scenario: the model's trace, and
    the C reference's when `driver` (a purgecheck.conformance.CDriver) is given."""
    from purgecheck.realtests.checks import run_checks
    from purgecheck.formats.trace import model_trace
    from purgecheck.scenarios import SCENARIOS

    out: dict[str, dict[str, dict[str, list]]] = {}
    for name in sorted(names):
        sc = SCENARIOS[name]
        model = model_trace(sc.ops(), sc.options, source=f"scenario:{name}")
        out[name] = {"model": run_checks(sc.checks, *model)}
        if driver is not None:
            out[name]["C"] = run_checks(sc.checks, *driver.run(sc.build(), sc.options))
    return out


def assess(case: RealCase, results: dict) -> Assessment:
    """The status of one case from what its scenario declares and what held where."""
    from purgecheck.scenarios import SCENARIOS

    if case.out_of_scope:
        return Assessment(case, "OUT OF SCOPE", (), (), case.out_of_scope)
    if case.grid is not None:
        from purgecheck.arith import GRIDS
        key, checks = f"grid:{case.grid}", (GRIDS[case.grid].check,)
    else:
        sc = SCENARIOS.get(case.scenario) if case.scenario else None
        if sc is None:
            return Assessment(case, "MISSING", (), (), case.unmodelled or "no scenario")
        key, checks = sc.name, sc.checks
    runs = results.get(key, {})
    engines = tuple(e for e in ("model", "C") if e in runs
                    and not any(runs[e].get(c) for c in checks))
    if runs.get("diff"):  # a grid: the C reference's lines must be the model's
        engines = ()
    declared = [a for a in case.asserts if a in checks]
    checked = tuple(declared) if len(engines) == 2 else ()
    gaps = []
    if runs.get("diff"):
        gaps.append(f"C differs from the model at {runs['diff']}")
    undeclared = [a for a in case.asserts if a not in checks]
    if undeclared:
        gaps.append("not checked: " + ", ".join(undeclared))
    for e in ("model", "C"):
        if e not in runs:
            gaps.append(f"not run on {e}")
        elif e not in engines and any(runs[e].get(c) for c in checks):
            failing = [c for c in checks if runs[e].get(c)]
            gaps.append(f"fails on {e}: " + ", ".join(failing))
    if case.threads:  # the same case on the C reference's real threads and clock
        run = results.get(f"threads:{case.threads}")
        if run is None:
            gaps.append("not run on C's real threads")
        elif run["failed"]:
            gaps.append(f"fails on C's real threads: {', '.join(run['failed'])}")
        elif len(engines) == 2:
            engines += ("C threads",)
    if case.unmodelled:
        gaps.append(case.unmodelled)
    status = "FULL" if not gaps else "PARTIAL"
    return Assessment(case, status, engines, checked, "; ".join(gaps))


def assess_all(driver=None) -> list[Assessment]:
    from purgecheck.scenarios import SCENARIOS

    from purgecheck.arith import run_grid

    names = {c.scenario for c in CASES if c.scenario in SCENARIOS}
    results = run_scenario_checks(names, driver)
    for grid in {c.grid for c in CASES if c.grid}:
        results[f"grid:{grid}"] = run_grid(grid, driver is not None)
    if driver is not None:
        for scenario in {c.threads for c in CASES if c.threads}:
            results[f"threads:{scenario}"] = run_threads(scenario)
    return [assess(c, results) for c in CASES]


def run_threads(scenario: str) -> dict:
    """{"failed": the C checks that failed, "figures": ...} of one run of `stress --scenario
    SCENARIO` at its own interval (lower bounds only: they hold at any load)."""
    import tempfile
    from pathlib import Path

    from purgecheck.engines.validate import run_stress

    with tempfile.TemporaryDirectory() as tmp:
        run = run_stress(Path(tmp), scenario=scenario, interval=REAL_INTERVAL_MS, ms=0,
                         traced=False)
    failed = run.failed_checks or ([] if run.returncode == 0 else [f"exit {run.returncode}"])
    return {"failed": failed, "figures": run.summary.get("real", {})}


REAL_INTERVAL_MS = 50  # the interval of the fork's sweepers test (reference_c/stress_real.c)


def real_tests_page(assessments: list[Assessment]) -> str:
    """docs/real-tests.md."""
    from collections import Counter

    counts = Counter(a.status for a in assessments)
    lines = ["# The fork's real tests, case by case", "",
             "Generated by `purgecheck docs` from `purgecheck/realtests/cases.py`: every case of "
             "`test/test-purge-holes-large.c` (oven-sh/mimalloc at cb73f69) and "
             "`test/test-purge-holes.c` (at d445051), and the cases digest section 11 and issue "
             "21 name that those commits do not hold. The status is computed: the scenario runs "
             "on the model and on the C reference, and its declared checks "
             "(`purgecheck/realtests/checks.py`) are run on both traces; the two arithmetic cases run "
             "their grid (`purgecheck/arith.py`) through the model's and the C reference's unit "
             "arithmetic, whose lines must be equal. FULL: every assertion of the case is a "
             "check of its scenario and held on both engines.", "",
             "Totals: " + ", ".join(f"{k} {counts[k]}" for k in
                                    ("FULL", "PARTIAL", "MISSING", "OUT OF SCOPE")), "",
             "| source | case | scenario | engines | assertions checked | status | missing |",
             "|---|---|---|---|---|---|---|"]
    for a in assessments:
        c = a.case
        cell = lambda s: s.replace("|", "\\|")  # noqa: E731
        where = c.scenario or (f"grid {c.grid} (`driver --arith {c.grid}`)" if c.grid else "-")
        lines.append(f"| {c.source} | {c.name} | {where} | "
                     f"{', '.join(a.engines) or '-'} | {', '.join(a.checked) or '-'} | "
                     f"{a.status} | {cell(a.missing)} |")
    lines += ["", "## The cases", ""]
    for c in CASES:
        if c.out_of_scope:
            continue
        lines.append(f"- **{c.name}** ({c.source}): sets up {c.setup}; does {c.does or '-'}; "
                     f"asserts {', '.join(c.asserts)}.")
    lines += ["", "## The checks", ""]
    from purgecheck.realtests.checks import CHECKS
    for ch in CHECKS.values():
        lines.append(f"- `{ch.name}`: {ch.statement}")
    return "\n".join(lines) + "\n"


def real_tests_files() -> dict[str, str]:
    """{"real-tests.md": the table}: the scenarios run on the model and, when it is built, on
    the C reference (without it every case says "not run on C")."""
    from purgecheck.conformance import CDriver, DriverError

    try:
        driver = CDriver()
    except DriverError:
        return {"real-tests.md": real_tests_page(assess_all(None))}
    with driver:
        return {"real-tests.md": real_tests_page(assess_all(driver))}
