"""The model beside the real Bun: the simulator run on the workload that was measured, with
the measured run's parameters and pace, and each figure compared within a stated band.

The model holds the large-page heap of seed 000 and, on the servers, a request's small
objects in small and medium pages (SMALL_OBJECTS) with the arena's purges of them, and, where
measured, Bun's other threads sweeping the abandoned pages (other_sweep_ms); on buffer-loop
and typed-arrays (and on the servers at the idle's end) the runtime's own small and medium
pages are the program's own excess measured apart with its objects at 1 byte
(RUNTIME_APART), added to the model's (the servers' under load too, in place of
SMALL_OBJECTS, with MachineModel.small_apart: off, as it takes them further out); the real
process also has the rest of JSC's heap and its start-up. So every figure is compared as its excess over the design
without hole purging: the real `before` (MIMALLOC_PURGE_HOLES=0) against the model's `off`.

| figure | real | model | band |
|---|---|---|---|
| discards under load | madvise calls of d less those of before | discards of d less off | x2 |
| MB discarded under load | the same in MB | the same | x2 |
| faults per request under load | minor faults per request, d less before | refaults per request, d less off | x2 |
| MB given back at idle | anonymous at idle end, before less d | RSS at idle end, off less d | 25 % |

A real figure whose excess is inside its own noise (half the spread of its runs plus half
that of before's) is not compared ("within noise"). Beyond the bands, the designs must come in the same
order on both sides for every figure (ties within the real noise allowed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from purgecheck.measure.designs import MODEL_DESIGN

MB = 1 << 20
BASE_REAL, BASE_MODEL = "before", "off"


@dataclass(frozen=True)
class MachineModel:
    """What the model takes of the machine and of the program beside the allocator's rules.

    Measured, when the measurement has them (`measured_inputs`): the loop's turns (requests
    per park), the collector's collections (requests per collection), the scavenger's
    passes per turn under no-hold, where every park wakes it: with `coalesced_wakes` they give
    how late it runs (scavenger_lateness), else the fraction of parks it sweeps
    (scavenger_reach); and how often Bun's other threads sweep the abandoned pages
    (other_sweep_ms).
    Fitted against the recorded measurement of tests/data/ (2026-12-03), and used only where
    the measurement lacks the figure (one recorded before it was counted, or no perf): how
    late a woken scavenger runs (ms, the mean of an exponential), how many request bodies
    (or allocations, in typed-arrays.js) the collector frees at once. Whether the arena hands
    a retired page's addresses out again (its purged memory faults in again there) and the
    order of a size class's page queue (a fresh page first, a full page that gets a block
    back last) are facts of mimalloc, not figures."""

    scavenger_late_ms: float = 0.6  # fitted
    arena_reuse: bool = True
    gc_every: int = 3  # fitted
    js_gc_every: int = 8  # typed-arrays.js asks for a collection every 8 allocations
    seed: int = 0
    design_options: bool = True  # a real design's options reach the model (DESIGN_OPTIONS)
    measured_inputs: bool = True  # the loop's turns, the collections, the scavenger's reach
    page_queue_order: bool = True  # mimalloc's page queues (model.world.Options)
    abandon_full_pages: bool = True  # full pages abandoned, back through the map (model.full_pages)
    # the v3 fork's mi_page_extend_free: a large page's blocks formed one at a time (model.alloc)
    extend_v3: bool = True
    # Bun's other threads' own idle sweeps (JIT workers), which pass the abandoned map, at the
    # rate measured (other_sweep_ms)
    other_sweeps: bool = True
    # the servers' small and medium pages beside the bodies (SMALL_OBJECTS), kept a while when
    # all free (model.retire), and the arena's purge in runs of adjacent slices
    small_pages: bool = True
    # the fork's wake of the scavenger (scavenger_lateness): one pass for the parks that come
    # while it is pending, late by what the measured passes say, sweeping a thread only if it
    # is still parked; off: every pass counted is a sweep of a park (scavenger_reach)
    coalesced_wakes: bool = True
    # the servers' parks last what the measured CPU leaves of a turn (loop_park_share); off:
    # until the next request, a request's share of the load
    measured_parks: bool = True
    # the runtime's own small and medium pages, measured apart (the program with its objects
    # at 1 byte, RUNTIME_APART), added to the model's excess where the model holds none
    # (buffer-loop's every figure, the servers' memory at the idle's end)
    runtime_apart: bool = True
    # the servers' small objects under load, measured apart at the real pace (the server at 1
    # byte, its collector asked as often as the real bodies make it collect, SMALL_APART_OF),
    # per request, in place of the model's own (SMALL_OBJECTS). Off in the comparison: in
    # their place it takes nothing-kept's calls of epoch and default out of the band (26 and
    # 18 against 72 and 62) and both servers' epoch MB under load further out (9.7 and 8.2
    # against the own 13.2 and 13.3; docs/measure.md, "The servers' small pages under load at
    # the real pace")
    small_apart: bool = False
    # the event loop's turns in the idle, measured (loop_turns_idle): the model's loop wakes
    # and parks again as often, evenly spaced (simulate's Workload.idle_turns); off: one park
    # through the idle, as the model had it before they were counted
    idle_turns: bool = True
    # how many runs of the model each design's figures are the median of, each with its own
    # seed of the workload's random choices and of the simulator's (run_model); the real
    # figure is the median of its repeats. 1 in the tests; COMPARISON_RUNS in the comparison
    runs: int = 1
    # what is resident at the idle's end taken against before's `off` at before's own pace, as
    # the real figure takes before's runs (AT_OWN_PACE); off: against the design's own `off`
    # at the design's pace, as the figures under load are
    idle_end_own_pace: bool = True


# The model's runs per design in the comparison (`--seed-tables`, `--compare`, the page, the
# bench): as many as the real repeats of the page's recording (3). One run's figure moves by
# whole pages with where the workload's random choices fall (docs/measure.md: nothing-kept's
# default given back at idle, 4 MiB a large page); the median of 3 is what the real side
# takes of its runs too.
COMPARISON_RUNS = 3


# The simulator as it was before the real Bun was measured: a scavenger at the instant of
# every park, an arena that never reuses, every free at once, a park after every request, and
# no-hold run at the default interval (so with the handoff's rate limit). A broken variant
# for the comparison.
SEED_SCHEDULE = MachineModel(scavenger_late_ms=0.0, arena_reuse=False, gc_every=1,
                             js_gc_every=1, design_options=False, measured_inputs=False,
                             small_pages=False, abandon_full_pages=False, other_sweeps=False)
# A real design's options that the model takes too (purgecheck/measure/designs.py): no-hold
# sets purge_holes_min_interval=0, which also lifts the handoff's rate limit (digest 8).
DESIGN_OPTIONS = {"no-hold": {"purge_holes_min_interval": 0}}

# figure -> (what it is, real figure, model counter, sign, band kind, band)
# sign +1: the excess is design less before; -1: before less design (memory given back).
# The model's discards include the arena's purges of retired pages: strace counts those too.
FIGURES = {
    "discards_load": ("discard calls of 64 KiB or more under load, over before",
                      "discards_load_large", "all_large_discards_load", 1, "factor", 2.0),
    "discarded_mb_load": ("MB discarded under load, over before", "discarded_mb_load",
                          "all_discarded_bytes_load", 1, "factor", 2.0),
    "faults_per_request": ("page faults per request under load, over before",
                           "faults_per_request", "refaults_per_request", 1, "factor", 2.0),
    "mb_given_back_idle": ("MB given back by the end of the idle, against before",
                           "anon_mb_idle_end", "rss_end", -1, "relative", 0.25),
}


# The counters a design's model keeps as its own run gives them, against before's `off` at
# before's pace, where every other counter is before's plus the design's excess over an `off`
# at the design's own pace (_run_model_once). The real figure of memory given back at idle is
# before's run less the design's, each at its own pace, and what is resident at the idle's end
# follows the pace: it is what the program keeps (a server keeps a body every 1,000 requests,
# 30 under before and 23 under no-hold on the page's recording), and the pages that holds.
# With every design keeping as many bodies (kept=20, keep_every=100), the real no-hold gave
# back 2.5 MB less than epoch, where on the recording (23 bodies against 36) it gave back
# 4.3 MB more (docs/measure.md, "Memory at the idle's end follows the pace"). Under load the
# excess over the design's own `off` stays: there the model's pace moves which retired pages
# the arena purges before they are taken again, which by the idle's end are all purged.
AT_OWN_PACE = ("rss_end",)

# Seed 000: the large pages of the nothing-kept server "exist in every Bun process: they are
# pinned by about 1 MB of allocations made at start-up"; the model pins them with 4 bodies
# kept from the start (simulate's bun-serve-nothing-kept does the same).
START_UP_KEPT = 4

# The small and medium objects a Bun server takes per request beside its body (the request
# and response objects, headers, strings): not visible from outside the process; derived from
# the measurement in docs/measure.md ("The servers' small and medium pages").
SMALL_OBJECTS = {"small": 16 * 1024, "small_per_request": 2}

# typed-arrays.js waits for the event loop (setImmediate) every 8 allocations, and one
# allocation in 3 is a string made from a temporary Buffer of its size.
TYPED_ARRAYS_PER_TURN = 8
TYPED_ARRAYS_TEMP_EVERY = 3

# The runtime's own part of a workload, measured apart on the real Bun: the same program with
# its own objects at 1 byte, under each design (docs/measure.md, "The runtime's own part,
# measured apart"). Only where that program keeps the workload's time and the model holds no
# small objects: buffer-loop (its rounds are timed) and typed-arrays, whose program at 1 byte
# keeps the real load's length with its turns made to last (`turn_ms`; at its own pace its
# load is 0.03 s against 0.4, too short for the sweeps that give the runtime's pages back,
# docs/measure.md, "Typed-arrays: the runtime's pages at the real pace"). The servers model
# their small objects under load (SMALL_OBJECTS), but none of them
# is left in the model at the idle's end (their pages have all gone back): there the server
# with its bodies at 1 byte gives the part the model holds nothing of, the runtime's pages
# that `before` keeps with their holes and the sweeps give back (docs/measure.md, "The
# servers' own part at the idle's end").
RUNTIME_APART = Path(__file__).resolve().parents[2] / "docs" / "data" / "runtime-apart.json"
# workload -> (the program measured apart, the model counters its excess is added to)
RUNTIME_APART_OF = {"buffer-loop": ("buffer-loop", None),  # None: every counter of RUNTIME_PART
                    "typed-arrays": ("typed-arrays", None),
                    "bun-serve": ("bun-serve-nothing-kept", ("rss_end",)),
                    "bun-serve-nothing-kept": ("bun-serve-nothing-kept", ("rss_end",))}
# model counter -> (figure of the program at 1 byte, its scale to the counter's units): the
# runtime's excess over its before (its resident memory at the idle's end: less by what it
# gave back)
RUNTIME_PART = {
    "all_large_discards_load": ("discards_load_large", 1),
    "all_discarded_bytes_load": ("discarded_mb_load", MB),
    "refaults_per_request": ("faults_per_request", 1),
    "rss_end": ("anon_mb_idle_end", MB),
}


# The servers' small objects under load, measured apart at the real pace: the server with its
# bodies at 1 byte, its collector asked every as many requests as the real bodies make it
# collect (serve.js GC_EVERY: 38 on bun-serve, 27 on nothing-kept, the recording's
# requests_per_collection), so that its small pages live as long as the real server's
# (docs/measure.md, "The servers' small pages under load at the real pace"). Its excess over
# before per request, times the design's requests, takes the place of the model's own small
# objects (SMALL_OBJECTS, then left out of the model's workload): both are the requests' small
# objects with the runtime's pages beside them, and taking both would count them twice.
SMALL_APART_OF = {"bun-serve": "bun-serve-paced",
                  "bun-serve-nothing-kept": "bun-serve-nothing-kept-paced"}
# model counter -> whether it is a count over the load (taken per request and scaled by the
# design's requests) rather than a figure per request already
SMALL_APART_COUNTERS = {"all_large_discards_load": True, "all_discarded_bytes_load": True,
                        "refaults_per_request": False}


def takes_small_apart(workload: str, machine: MachineModel = MachineModel()) -> bool:
    """Whether the model of `workload` takes its small objects from the measurement apart
    (SMALL_APART_OF) rather than holding its own (SMALL_OBJECTS)."""
    return machine.small_apart and machine.small_pages and workload in SMALL_APART_OF \
        and RUNTIME_APART.is_file()


def small_part(workload: str, machine: MachineModel = MachineModel()) -> dict | None:
    """The summary of the server at 1 byte at the real pace (SMALL_APART_OF), or None where the
    model holds its own small objects."""
    if not takes_small_apart(workload, machine):
        return None
    import json
    return json.loads(RUNTIME_APART.read_text())["workloads"][SMALL_APART_OF[workload]]["summary"]


def add_small_part(model: dict[str, dict[str, float]], apart: dict,
                   requests: dict[str, float]) -> None:
    """Each measured design's counters under load (SMALL_APART_COUNTERS) get the small objects'
    excess over before as measured apart: per request of the program at 1 byte, times the
    design's `requests` (the model's excess is a design's cost at its own pace, as the model's
    other parts are: _run_model_once)."""
    for d, c in model.items():
        if d == BASE_REAL or d not in apart or d not in requests:
            continue
        for key, per_request in SMALL_APART_COUNTERS.items():
            fig, scale = RUNTIME_PART[key]
            if per_request:
                rate = [apart[x][fig]["median"] / apart[x]["requests"]["median"]
                        for x in (d, BASE_REAL)]
                c[key] += scale * (rate[0] - rate[1]) * requests[d]
            else:
                c[key] += scale * (apart[d][fig]["median"] - apart[BASE_REAL][fig]["median"])


def runtime_part(workload: str, machine: MachineModel = MachineModel()) -> dict | None:
    """The summary of the workload's program with its objects at 1 byte (RUNTIME_APART), or
    None where it is not taken."""
    if not machine.runtime_apart or workload not in RUNTIME_APART_OF \
            or not RUNTIME_APART.is_file():
        return None
    import json
    name = RUNTIME_APART_OF[workload][0]
    return json.loads(RUNTIME_APART.read_text())["workloads"][name]["summary"]


def runtime_counters(workload: str) -> tuple[str, ...]:
    """The model counters that take the runtime's part on `workload` (RUNTIME_APART_OF)."""
    counters = RUNTIME_APART_OF[workload][1]
    return tuple(RUNTIME_PART) if counters is None else counters


def add_runtime_part(model: dict[str, dict[str, float]], apart: dict,
                     counters: tuple[str, ...] = tuple(RUNTIME_PART)) -> None:
    """Each measured design's `counters` get the runtime's excess over before, as measured
    apart (a design the program at 1 byte did not run, a model-only one, gets nothing)."""
    for d, c in model.items():
        if d == BASE_REAL or d not in apart:
            continue
        for key in counters:
            fig, scale = RUNTIME_PART[key]
            c[key] += scale * (apart[d][fig]["median"] - apart[BASE_REAL][fig]["median"])


# The real figure that a measurement recorded before a finer one existed stands in for it.
OLDER_FIGURE = {"discards_load_large": "discards_load"}


@dataclass
class Comparison:
    workload: str
    design: str
    figure: str
    real: float | None  # the real excess (median), None when not measured
    real_noise: float  # the spread of the real runs that the excess is judged against
    model: float | None  # the model's excess, None when the model has no such design
    band: str
    verdict: str  # "within band", "outside band", "within noise", "no model design"

    def as_json(self) -> dict:
        return asdict(self)


@dataclass
class WorkloadComparison:
    workload: str
    params: dict
    model_params: dict
    rows: list[Comparison] = field(default_factory=list)
    order: dict[str, dict] = field(default_factory=dict)  # figure -> real/model order, verdict

    def as_json(self) -> dict:
        return asdict(self)


def measured_run(summary: dict, design: str) -> dict:
    """The real runs whose pace the model takes for `design`: its own, or for a design that
    has no option in Bun (the clock rule, handoff-only) the seed's rule's (`epoch`), else
    before's."""
    for d in (design, "epoch", BASE_REAL):
        if d in summary:
            return summary[d]
    return next(iter(summary.values()))


def _measured(run: dict, key: str, machine: MachineModel = MachineModel()) -> float | None:
    return run[key]["median"] if machine.measured_inputs and key in run else None


def scavenger_reach(summary: dict, design: str,
                    machine: MachineModel = MachineModel()) -> float | None:
    """The fraction of parks that the real scavenger sweeps: its passes per turn of the loop
    under no-hold, where every park is due and wakes it (else under the design itself), less
    the passes it makes on its own timers (the arena's purge_delay, due parks), at the rate
    `before` shows them (its passes per second of load: before's parks need no sweep); None
    where not counted (the model then takes the fitted lateness)."""
    run = summary["no-hold"] if "no-hold" in summary else measured_run(summary, design)
    passes = _measured(run, "scavenger_passes", machine)
    turns = _measured(run, "loop_turns", machine)
    if passes is None or not turns:
        return None
    base = summary.get(BASE_REAL, {})
    timer = _measured(base, "scavenger_passes", machine)
    if timer is not None and run is not base:
        passes -= timer / base["load_s"]["median"] * run["load_s"]["median"]
    return min(1.0, max(0.0, passes) / turns)


def scavenger_lateness(summary: dict, machine: MachineModel = MachineModel()) -> float | None:
    """How late the real scavenger runs after a park wakes it (ms, the mean of an
    exponential), from its passes per turn under no-hold (scavenger_reach, its timers' passes
    taken off); None where not counted, or where it made no pass (a reach of 0 stays).

    The fork's wake is coalesced (scavenger.c: `_mi_scavenger_wake` wakes the thread only
    when its flag goes from clear to set, and a pass clears it as it begins), so a pass
    answers every park that comes before it runs: with turns every `T` ms and a pass late by
    an exponential of mean `m`, the passes per turn are `p = 1 - exp(-T / m)` (the turns
    until the first park after the pass are geometric), and `m = -T / ln(1 - p)`. The passes
    are counted where every park wakes the scavenger (no-hold); the lateness is the
    machine's, and every design runs with it (simulate's `scavenger_coalesced`). A pass
    sweeps only a thread still parked when it runs (theap.c, `_mi_theap_sweep_parked`), so
    fewer parks are swept than passes are made: on the page's recording, with `T` 0.95 ms
    and `p` 0.42 (bun-serve), `m` is 1.7 ms, and a park of the model (until its next call,
    0.21 ms) is swept at 1 - exp(-0.21 / 1.7) = 0.12 of the turns, where the real scavenger's
    sweeps that gave something back were 0.125 of them (docs/measure.md)."""
    import math
    if not machine.coalesced_wakes or "no-hold" not in summary:
        return None
    p = scavenger_reach(summary, "no-hold", machine)
    run = summary["no-hold"]
    turns = _measured(run, "loop_turns", machine)
    if p is None or not turns or p <= 0:
        return None
    if p >= 1:
        return 0.0
    turn_ms = 1000 * run["load_s"]["median"] / turns
    return -turn_ms / math.log(1 - p)


def loop_park_share(run: dict, machine: MachineModel = MachineModel()) -> float | None:
    """The share of the load during which the server's event loop is parked (bun_serve's
    `park_share`): what the process's CPU leaves of the load's time, `1 - (user + kernel CPU
    per request) x requests per second`; None where not measured. The main thread runs the
    requests and waits in `epoll_pwait2` (its park, purgecheck/measure/turns.py) between
    turns; the CPU counted is the whole process's (the scavenger's and JavaScriptCore's
    threads too), and on a loaded machine a thread that waits for a CPU is not parked, so
    this is an estimate, not a bound. On the page's recording: 0.14 for bun-serve without the
    hold (0.86 s of CPU a second), 0.61 on the loaded one of 14:53 (0.39 s), where the real
    scavenger's passes nearly all swept (docs/measure.md)."""
    if not machine.measured_parks:
        return None
    user = _measured(run, "user_us_per_request", machine)
    kernel = _measured(run, "sys_us_per_request", machine)
    if user is None or kernel is None or not run["load_s"]["median"]:
        return None
    cpu = (user + kernel) * run["requests"]["median"] / run["load_s"]["median"] / 1e6
    return round(min(0.95, max(0.01, 1 - cpu)), 3)


def other_sweep_ms(summary: dict, machine: MachineModel = MachineModel()) -> float | None:
    """How often Bun's other threads sweep under load, in ms: the idle sweeps of its JIT
    workers (`mi_on_thread_idle` at the end of a compilation), which pass the abandoned pages
    of the heaps and with them the loop's large pages that were abandoned full (seed 000 (2):
    "full pages are abandoned and are reached by the sweeps of the other threads of the
    heap"; model.full_pages). Measured under no-hold, where a sweep of an abandoned page that
    changed gives something back: its sweeps that discarded 64 KiB or more less the
    scavenger's, less before's such sweeps (the loop's own arena purges, which every design
    has), over its load. A sweep that found nothing is not seen, so this is their rate at
    the least. A thread's sweep does not depend on the design (a compilation ends when it
    ends), so every design takes no-hold's rate. None where not measured, or where the
    scavenger makes every sweep seen (the servers, buffer-loop)."""
    if not machine.other_sweeps or "no-hold" not in summary or BASE_REAL not in summary:
        return None
    keys = ("discarding_sweeps_load", "scavenger_sweeps_load")

    def others(run: dict) -> float | None:
        got = [_measured(run, k, machine) for k in keys]
        return None if None in got else max(0.0, got[0] - got[1])

    nohold, base = others(summary["no-hold"]), others(summary[BASE_REAL])
    if nohold is None or base is None or nohold - base <= 0:
        return None
    return 1000 * summary["no-hold"]["load_s"]["median"] / (nohold - base)


def collector_survivors(run: dict, machine: MachineModel = MachineModel()) -> dict:
    """The bodies the real collector passes over and frees later (js/collections.js): per
    collection, and a fuller collection every so many requests frees them; nothing where not
    measured (a recording made before they were counted)."""
    per = _measured(run, "survivors_per_collection", machine)
    every = _measured(run, "requests_per_late_collection", machine)
    if not per or not every:
        return {}
    return {"survivors": round(per, 2), "major_every": max(1, round(every))}


def idle_turns(run: dict, machine: MachineModel = MachineModel()) -> int:
    """The real event loop's turns in the idle after the load (`loop_turns_idle`, a perf
    window of its own: purgecheck/measure/run.py), the median of the design's runs; 0 where
    not counted (a recording made before, or no perf), where the model keeps one park through
    the idle. On the servers, 4 to 17 in 3 s: the runtime's timers (2026-12-04)."""
    turns = _measured(run, "loop_turns_idle", machine) if machine.idle_turns else None
    return max(0, round(turns)) if turns else 0


def model_workload(workload: str, params: dict, summary: dict,
                   machine: MachineModel = MachineModel(), design: str = BASE_REAL):
    """The simulator's workload of the measured one as `design` ran it, with the event loop's
    turns in the idle as measured (idle_turns); see _model_workload."""
    w = _model_workload(workload, params, summary, machine, design)
    return replace(w, idle_turns=idle_turns(measured_run(summary, design), machine))


def _model_workload(workload: str, params: dict, summary: dict,
                    machine: MachineModel = MachineModel(), design: str = BASE_REAL):
    """The simulator's workload of the measured one as `design` ran it: its requests over
    its load (the pace), and where measured its loop's turns (requests per park,
    purgecheck/measure/turns.py) and its collector's batch (requests per collection,
    js/collections.js); where not measured, a park after every request and the machine
    model's collector. Each design runs at its own pace: a design that costs more CPU per
    request serves fewer of them and more per turn of the loop (2026-12-03, bun-serve: 3.6
    requests per turn under before, 5.0 without the hold)."""
    from purgecheck.simulate.workloads import make_workload
    run = measured_run(summary, design)
    n = max(1, int(run["requests"]["median"]))
    load_ms = 1000 * run["load_s"]["median"]
    idle_ms = 1000 * float(params["idle_s"])
    gc = _measured(run, "requests_per_collection", machine)
    if workload.startswith("bun-serve"):
        kept = START_UP_KEPT + min(int(params["kept"]), n // int(params["keep_every"]))
        per_turn = _measured(run, "requests_per_turn", machine) or 1.0
        share = loop_park_share(run, machine)
        return make_workload(workload, idle_ms=idle_ms, requests=n, body=int(params["body"]),
                             kept=kept, inflight=int(params["connections"]), seed=machine.seed,
                             think_ms=load_ms / n, per_turn=max(1.0, round(per_turn, 2)),
                             gc_every=max(1, round(gc)) if gc else machine.gc_every,
                             **collector_survivors(run, machine),
                             **({"park_share": share} if share is not None else {}),
                             **(SMALL_OBJECTS if machine.small_pages
                                and not takes_small_apart(workload, machine) else {}))
    if workload == "typed-arrays":  # measured: the collector apart from the loop's turns
        collector = dict(gc_every=max(1, round(gc)), per_turn=TYPED_ARRAYS_PER_TURN,
                         temp_every=TYPED_ARRAYS_TEMP_EVERY) if gc \
            else dict(gc_every=machine.js_gc_every)
        w = make_workload(workload, idle_ms=idle_ms, allocations=n, lo=int(params["lo"]),
                          hi=int(params["hi"]), keep_every=int(params["keep_every"]),
                          seed=machine.seed,
                          lifetime=int(params["lifetime"]), think_ms=load_ms / n, **collector)
        return replace(w, collect_at_end=True)  # the program ends with Bun.gc(true)
    if workload == "buffer-loop":
        w = make_workload(workload, idle_ms=idle_ms, seconds=load_ms / 1000,
                          size=int(params["size"]), batch=int(params["batch"]),
                          step_ms=load_ms / n, kept=int(params["kept"]), free_late=1,
                          gc_every=max(1, round(gc)) if gc else 1)
        # on Linux Bun's event loop parks between rounds; the program ends with Bun.gc(true)
        return replace(w, idle="park", collect_at_end=True)
    raise ValueError(f"no model workload for {workload!r}")


def run_model(workload: str, params: dict, summary: dict, designs: list[str],
              machine: MachineModel = MachineModel(), sample_ms: float = 10.0,
              idle: str | None = None) -> dict[str, dict[str, float]]:
    """The model's counters per design (_run_model_once), each the median of `machine.runs`
    runs: run k takes the seed `machine.seed + k` for the workload's random choices (which
    bodies are kept, the sizes of typed-arrays) and for the simulator's (how late each pass
    of the scavenger runs, the other threads' phases). The real figure is the median of its
    repeats, and its excess the difference of two medians: so is the model's."""
    return run_models([(workload, params, summary, designs, idle)], machine, sample_ms,
                      workers=1)[0]


def run_models(jobs: list[tuple], machine: MachineModel = MachineModel(),
               sample_ms: float = 10.0, workers: int | None = None) -> list[dict]:
    """run_model for each job (workload, params, summary, designs, idle), the same figures,
    with every job's runs spread over `workers` processes (default: the machine's cores) when
    there are several: the comparison's median of COMPARISON_RUNS runs a workload made
    `purgecheck docs` three times as long (540 s of CPU against 167 s), one run after another."""
    import os
    import threading
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context
    if machine.runs <= 1:  # the model as it was: one run, no median taken
        return [_run_model_once(w, p, s, d, machine, sample_ms, idle) for w, p, s, d, idle in jobs]
    flat = [run for job in jobs for run in _runs_of(job, machine, sample_ms)]
    workers = min(workers or os.cpu_count() or 1, len(flat))
    # forked, where this process has no other thread (a Dask client's would be copied half-way
    # through what they do); spawn would run the caller's main script again in each process
    if workers > 1 and threading.active_count() == 1:
        with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
            done = list(pool.map(_run_model_star, flat))
    else:
        done = [_run_model_once(*run) for run in flat]
    return [_median_of(done[i * machine.runs:(i + 1) * machine.runs]) for i in range(len(jobs))]


def _runs_of(job: tuple, machine: MachineModel, sample_ms: float) -> list[tuple]:
    """A job's runs: run k with the seed machine.seed + k."""
    workload, params, summary, designs, idle = job
    return [(workload, params, summary, designs, replace(machine, seed=machine.seed + k, runs=1),
             sample_ms, idle) for k in range(machine.runs)]


def _run_model_star(run: tuple) -> dict:
    return _run_model_once(*run)


def _median_of(each: list[dict]) -> dict[str, dict[str, float]]:
    import statistics
    return {d: {key: statistics.median(run[d][key] for run in each) for key in c}
            for d, c in each[0].items()}


def _run_model_once(workload: str, params: dict, summary: dict, designs: list[str],
                    machine: MachineModel = MachineModel(), sample_ms: float = 10.0,
                    idle: str | None = None) -> dict[str, dict[str, float]]:
    """The model's counters per design (a real design by its real name, or a model design),
    `before` always among them; a design the model lacks is left out. `idle`: another idle
    behaviour than the workload's (the seed measured the buffer loop sweeping inline).

    Each design runs on its own measured workload (model_workload), and so does `off` beside
    it: a design's counters are before's plus what the design costs over `off` on the same
    workload. The rule's cost is then told apart from what its pace alone changes in the
    model (which retired pages the arena purges before they are taken again: 0 or 33 such
    purges in 3 s of the same server, at 5,800 requests and 7.2 or 8.6 per turn). The
    memory resident at the idle's end is the design's own run against before's, as measured
    (AT_OWN_PACE, MachineModel.idle_end_own_pace): it follows what the program kept."""
    from model.world import Options
    from purgecheck.simulate.mimalloc import DESIGN_NAMES, simulate

    late = scavenger_lateness(summary, machine)
    sweeper_every_ms = other_sweep_ms(summary, machine)  # the machine's: every design's
    scavenger = dict(scavenger_late_ms=late, scavenger_coalesced=True) if late is not None \
        else None

    def counters(w, md: str, d: str) -> dict[str, float]:
        extra = DESIGN_OPTIONS.get(d, {}) if machine.design_options else {}
        opts = Options(arena_reuse=machine.arena_reuse, page_queue_order=machine.page_queue_order,
                       abandon_full_pages=machine.abandon_full_pages,
                       retire_cycles=machine.small_pages, arena_purge_runs=machine.small_pages,
                       extend_v3=machine.extend_v3, **extra)
        c = dict(simulate(w, md, opts, sample_ms=sample_ms, seed=machine.seed,
                          sweeper_every_ms=sweeper_every_ms,
                          **(scavenger or dict(
                              scavenger_late_ms=machine.scavenger_late_ms,
                              scavenger_reach=scavenger_reach(summary, d, machine)))).counters)
        c["all_discards_load"] = c["discards_load"] + c["arena_purges_load"]
        # a purge of the arena is a slice or more: 64 KiB at least, as every call counted here
        c["all_large_discards_load"] = c["discards_load_large"] + c["arena_purges_load"]
        c["all_discarded_bytes_load"] = c["discarded_bytes_load"] + c["arena_purged_bytes_load"]
        return c

    def workload_of(d: str):
        w = model_workload(workload, params, summary, machine, d)
        return w if idle is None else replace(w, idle=idle)

    base_w = workload_of(BASE_REAL)
    out = {BASE_REAL: counters(base_w, MODEL_DESIGN[BASE_REAL], BASE_REAL)}
    for d in dict.fromkeys(designs):
        md = MODEL_DESIGN.get(d, d)
        if md not in DESIGN_NAMES or d == BASE_REAL:
            continue
        w = workload_of(d)
        c = counters(w, md, d)
        if (w.params, w.idle_turns) != (base_w.params, base_w.idle_turns):
            off = counters(w, MODEL_DESIGN[BASE_REAL], BASE_REAL)
            own = AT_OWN_PACE if machine.idle_end_own_pace else ()
            c = {k: v if k in own else out[BASE_REAL][k] + v - off[k] for k, v in c.items()}
        out[d] = c
    apart = runtime_part(workload, machine)
    if apart is not None:
        add_runtime_part(out, apart, runtime_counters(workload))
    small = small_part(workload, machine)
    if small is not None:
        add_small_part(out, small, {d: measured_run(summary, d)["requests"]["median"]
                                    for d in out})
    return out


def model_params(workload: str, params: dict, summary: dict,
                 machine: MachineModel = MachineModel()) -> dict:
    """The parameters of the model's workload per design, for the reader: design ->
    parameter -> value (with several runs, their number in place of the one seed)."""
    out = {}
    for d in summary:
        w = model_workload(workload, params, summary, machine, d)
        p = {**w.params, **({"idle_turns": w.idle_turns} if w.idle_turns else {})}
        if machine.runs > 1:
            p = {**{k: v for k, v in p.items() if k != "seed"}, "model_runs": machine.runs}
        out[d] = p
    return out


def _value_text(k: str, v) -> str:
    return f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"


def params_text(model_params: dict) -> str:
    """The model's workload per design as text: what every design shares, then what each
    design's own measured run set (its pace, its loop's turns, its collector)."""
    designs = list(model_params.values())
    if not designs or not isinstance(designs[0], dict):  # one workload for all (older JSON)
        return ", ".join(_value_text(k, v) for k, v in model_params.items())
    shared = {k: v for k, v in designs[0].items() if all(d.get(k) == v for d in designs)}
    parts = [", ".join(_value_text(k, v) for k, v in shared.items())]
    for name, d in model_params.items():
        own = [_value_text(k, v) for k, v in d.items() if k not in shared]
        if own:
            parts.append(f"{name}: {', '.join(own)}")
    return "; ".join(p for p in parts if p)


def _excess(values: dict, design: str, key: str, sign: int, scale: float = 1.0):
    if design not in values or BASE_REAL not in values:
        return None
    return sign * (values[design][key] - values[BASE_REAL][key]) / scale


def compare(workload: str, params: dict, summary: dict,
            model: dict[str, dict[str, float]] | None = None,
            machine: MachineModel = MachineModel()) -> WorkloadComparison:
    """Every figure of every measured design against the model (run now unless given)."""
    designs = [d for d in summary if d != BASE_REAL]
    mparams = model_params(workload, params, summary, machine)
    if model is None:
        model = run_model(workload, params, summary, designs, machine)
    real_med = {d: {k: v["median"] for k, v in s.items()} for d, s in summary.items()}
    out = WorkloadComparison(workload, dict(params), mparams)
    for fig, (_, rkey, mkey, sign, kind, band) in FIGURES.items():
        if any(rkey not in s for s in summary.values()):  # a measurement made before it
            rkey = OLDER_FIGURE.get(rkey, rkey)
        scale = MB if "bytes" in mkey or mkey == "rss_end" else 1.0
        for d in designs:
            if rkey not in summary[d]:
                continue
            real = _excess(real_med, d, rkey, sign)
            noise = _noise(summary, d, rkey)
            mod = _excess(model, d, mkey, sign, scale)
            out.rows.append(Comparison(workload, d, fig, real, noise, mod,
                                       _band_text(kind, band), _verdict(real, noise, mod, kind,
                                                                        band)))
        out.order[fig] = _order(summary, real_med, model, designs, rkey, mkey, sign, scale)
    return out


def _noise(summary: dict, design: str, key: str) -> float:
    """Half the spread of the runs of `design` plus half that of before's: an excess no larger
    than that lies where the two sets of runs overlap, and is not told apart from 0."""
    return _pair_noise(summary, design, BASE_REAL, key)


def _pair_noise(summary: dict, a: str, b: str, key: str) -> float:
    """Half the spread of `a`'s runs plus half that of `b`'s."""
    sa, sb = summary[a][key], summary[b][key]
    return ((sa["max"] - sa["min"]) + (sb["max"] - sb["min"])) / 2


def _band_text(kind: str, band: float) -> str:
    return f"x{band:g}" if kind == "factor" else f"±{band:.0%}"


def within(real: float, model: float, kind: str, band: float) -> bool:
    """Whether `model` is inside the band around `real` (both excesses, same sign)."""
    if kind == "factor":
        if real <= 0 or model <= 0:
            return False
        return real / band <= model <= real * band
    return abs(model - real) <= band * abs(real)


def _verdict(real, noise, model, kind, band) -> str:
    if model is None:
        return "no model design"
    if real is None or abs(real) <= noise:
        return "within noise"
    return "within band" if within(real, model, kind, band) else "outside band"


def _order(summary, real, model, designs, rkey, mkey, sign, scale) -> dict:
    """The designs sorted by the figure on each side; the same unless the real figures of two
    designs differ by less than their noise (a tie)."""
    both = [d for d in [BASE_REAL, *designs] if d in model and rkey in summary[d]]
    r = sorted(both, key=lambda d: sign * real[d][rkey])
    m = sorted(both, key=lambda d: sign * model[d][mkey] / scale)
    apart = []  # the pairs the model does not order as the real system does, beyond noise
    for i, a in enumerate(both):
        for b in both[i + 1:]:
            dr = sign * (real[a][rkey] - real[b][rkey])
            dm = sign * (model[a][mkey] - model[b][mkey]) / scale
            if abs(dr) > _pair_noise(summary, a, b, rkey) and dr * dm <= 0:
                lo, hi = (a, b) if dr < 0 else (b, a)
                apart.append(f"{lo} < {hi} really, the model "
                             f"{'ties them' if dm == 0 else 'reverses them'}")
    agree = not apart
    return {"real": r, "model": m, "same": agree, "apart": apart}


def table(c: WorkloadComparison) -> str:
    """The comparison as text: one row per figure and design."""
    lines = [f"{c.workload}: the model beside the real Bun (excess over before; model "
             f"workload {params_text(c.model_params)})",
             f"{'figure':20} {'design':8} {'real':>9} {'noise':>8} {'model':>9} {'band':>5}  verdict"]
    for row in c.rows:
        what = row.figure
        real = "-" if row.real is None else f"{row.real:,.2f}"
        mod = "-" if row.model is None else f"{row.model:,.2f}"
        lines.append(f"{what:20} {row.design:8} {real:>9} {row.real_noise:>8,.2f} {mod:>9} "
                     f"{row.band:>5}  {row.verdict}")
    lines.append("(" + "; ".join(f"{k}: {v[0]}" for k, v in FIGURES.items()) + ")")
    for fig, o in c.order.items():
        lines.append(f"order by {fig}: real {' < '.join(o['real'])}; model "
                     f"{' < '.join(o['model'])}: {'same' if o['same'] else 'DIFFERENT'}"
                     + ("" if o["same"] else f" ({'; '.join(o.get('apart', []))})"))
    return "\n".join(lines)
