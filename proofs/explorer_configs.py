"""The configurations the explorer checks, and the manifest of their state counts.

proofs/manifest.json holds, per configuration, the states, transitions and depth that the
explorer found when the manifest was last written (`python -m proofs.explorer_configs
--write`); a run that finds other numbers reports the difference, so a change in the size of
a state space is noticed (as tlaplus/Examples does with its manifest).
"""

from __future__ import annotations

import json
from pathlib import Path

from proofs.explorer import Config

MANIFEST = Path(__file__).with_name("manifest.json")

# interval 3 ms, clock to 9 ms: three intervals, as in the scale figures of docs/proofs.md.
CONFIGS = {c.name: c for c in [
    Config("bare-1", sweepers=1),
    Config("bare-2", sweepers=2),
    Config("bare-3", sweepers=3),
    Config("bare-4", sweepers=4),
    Config("park-1-short", sweepers=1, owner=True, parked=True, graph=True, clock_bound=6),
    Config("park-1", sweepers=1, owner=True, parked=True, graph=True),
    Config("park-2", sweepers=2, owner=True, parked=True, interval=2, clock_bound=6),
    # the aim of issue 4: 3 sweepers + 1 allocating thread + the scavenger with a parked
    # thread over 3 intervals, exhaustively in under 60 s (12 to 35 s here, docs/proofs.md)
    Config("park-3", sweepers=3, owner=True, parked=True, interval=2, clock_bound=6),
    # six intervals: enough park sweeps for the cap (MI_PARK_SWEEPS_MAX) to be what ends a
    # park, as when a sweeper stopped between its CAS and its store holds the epoch still
    Config("park-1-cap", sweepers=1, owner=True, parked=True, interval=1, clock_bound=6),
    # the rare paths of the advance (issue 20), opt-in so that the spaces above stay as they
    # are: a fork by another thread while a sweeper holds MOVING, the run going on in the
    # child (EP-MOVING-HELD); a clock that steps back 2 ms, also between the steps of an
    # advance, without the reductions that assume time only grows (EP-BACK-IS-DUE)
    Config("fork-2", sweepers=2, fork=True),
    Config("fork-3", sweepers=3, fork=True),
    Config("clock-back-1", sweepers=1, clock_back=2, reduce_dead=False, interval=2,
           clock_bound=6),
    Config("clock-back-2", sweepers=2, clock_back=2, reduce_dead=False, interval=2,
           clock_bound=4),
    # the paths only the fuzz machines reached (issue 28): another thread frees the block
    # into the parked owner's page at any point of the scavenger's sweeps (the sweep's
    # collect takes it, the hold keeps it, a later sweep purges it); and a page that another
    # thread freed into and its owner then allocates from (the malloc path's collect brings
    # that free back: what a thread that reclaimed an abandoned page does first), freed and
    # parked, then swept. The explorer keeps one page with one owner: the abandoned map
    # itself, and a sweep of the page by another thread meanwhile, are the scenarios' and
    # the fuzz machines' (abandon-reclaim-sweep, the page machine).
    Config("xthread-park", sweepers=1, owner=True, parked=True, interval=2, clock_bound=6,
           program=("malloc", "park", "xfree")),
    Config("reclaim-alloc-park", sweepers=1, owner=True, parked=True, interval=2,
           clock_bound=6, program=("malloc", "xfree", "malloc", "free", "park")),
]}
# Too big for `purgecheck prove`: run by the benchmark, purgecheck/bench/explorer.py.
BENCH_ONLY = {c.name: c for c in [
    # park-3 with the bare configurations' interval and bound (3 ms, clock to 9 ms)
    Config("park-3-i3", sweepers=3, owner=True, parked=True),
    # park-3 with a fourth sweeper (issue 19): the clock to 4 ms, then to 6 ms
    Config("park-4-short", sweepers=4, owner=True, parked=True, interval=2, clock_bound=4),
    Config("park-4", sweepers=4, owner=True, parked=True, interval=2, clock_bound=6),
]}
QUICK = ("bare-1", "bare-2", "bare-3", "park-1-short", "park-1-cap",  # the test suite, --quick
         "fork-2", "clock-back-1", "xthread-park", "reclaim-alloc-park")


def load_manifest() -> dict:
    return json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}


def manifest_entry(rep) -> dict:
    return {"states": rep.states, "transitions": rep.transitions, "depth": rep.depth,
            "describe": rep.config.describe()}


def compare_with_manifest(rep) -> str | None:
    """None when the run matches the manifest; else what changed."""
    want = load_manifest().get(rep.config.name)
    if want is None:
        return f"configuration {rep.config.name} is not in proofs/manifest.json"
    got = manifest_entry(rep)
    diffs = [f"{k} {want[k]:,} -> {got[k]:,}" for k in ("states", "transitions", "depth")
             if want[k] != got[k]]
    return ("state space changed: " + ", ".join(diffs)) if diffs else None


if __name__ == "__main__":
    import sys

    from proofs.explorer import explore

    names = [a for a in sys.argv[1:] if not a.startswith("-")] or list(CONFIGS)
    if "--write" in sys.argv:
        data = load_manifest()
        for name in names:
            rep = explore(CONFIGS[name])
            if rep.violations:
                sys.exit(f"{name}: violations {list(rep.violations)}; manifest not written")
            data[name] = manifest_entry(rep)
            print(name, rep.figure(), f"{rep.seconds:.1f}s", flush=True)
        MANIFEST.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
