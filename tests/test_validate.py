"""`purgecheck validate`: a trace is accepted when the model can reproduce it.

The model's own traces and the C reference's (virtual clock, every seed scenario, every design)
are accepted; each check of the validator rejects at least one broken C switch or a broken
linearized trace built here by hand (two CAS winners, a start recorded early, a young page
walked, ...); the rejection names the line, the event, why, the model's state and what the
model could do there; generated traces of every size are accepted and a flipped step in one
is rejected.
"""

from __future__ import annotations

import dataclasses
import io
import subprocess

import orjson
import pytest

from model.epoch import MOVING
from model.variants import VARIANTS
from purgecheck.cli import main
from purgecheck.conformance import BUILD_DIR, CDriver
from purgecheck.scenarios import SCENARIOS
from purgecheck.formats.trace import config_of, model_trace, write_trace
from purgecheck.formats.tracegen import generate
from purgecheck.validate import validate_stream
from model.world import Options


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def driver():
    with CDriver() as d:
        yield d


def verdict_of(header: dict, events: list[dict], name: str = "t.jsonl"):
    buf = io.BytesIO()
    write_trace(buf, header, events)
    buf.seek(0)
    return validate_stream(buf, name)


# -- sequential traces: the model's and the C reference's ---------------------------------------

def accepted_on(variant: str, names: list[str]) -> None:
    for name in names:
        sc = SCENARIOS[name]
        opts = dataclasses.replace(sc.options, variant=variant)
        v = verdict_of(*model_trace(sc.ops(), opts, source=name), name=name)
        assert v.accepted, f"{name}: {v.why}"
        assert v.events > 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_model_traces_of_every_scenario_are_accepted_under_some_design(variant):
    """The i-th scenario under the j-th design where i + j is a multiple of 3: every scenario
    under one or two designs, each design on a third of them (8 s of CPU for every pair, which
    the slow tier runs: test_model_traces_of_every_scenario_are_accepted)."""
    j = list(VARIANTS).index(variant)
    accepted_on(variant, [n for i, n in enumerate(SCENARIOS) if (i + j) % 3 == 0])


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_model_traces_of_every_scenario_are_accepted(variant):
    accepted_on(variant, list(SCENARIOS))


def test_hold_decisions_are_shared_only_where_the_design_reads_nothing_else(monkeypatch):
    """Sweeps of one context share the hold decision for a swept_state, except in
    two-untouched, whose decision counts the sweeps that found the page untouched. Shared
    there too (a broken validator), the model's own two-untouched traces are rejected."""
    import purgecheck.validate.sweeps as sweeps
    monkeypatch.setattr(sweeps, "TWO_UNTOUCHED", "no design")
    rejected = []
    for name, sc in SCENARIOS.items():
        opts = dataclasses.replace(sc.options, variant="two-untouched")
        if not verdict_of(*model_trace(sc.ops(), opts, source=name), name=name).accepted:
            rejected.append(name)
    assert "inline-hold" in rejected


def test_c_traces_of_every_scenario_are_accepted(driver):
    for name, sc in SCENARIOS.items():
        v = verdict_of(*driver.run(sc.build(), sc.options), name=name)
        assert v.accepted, f"{name}: {v.why}"


# Each check of the validator, and a C switch (purgecheck/mutants/catalogue/ c_switch) that it rejects
# in a seed scenario whose clean C trace it accepts (the test above).
C_MUTANTS = [
    ("age-lt-1", "inline-hold", "which the model holds"),  # the hold rule, on a walk
    ("no-hold-inline", "inline-hold", "which the model holds"),
    ("age-no-modulo", "wraparound", "which the model holds"),
    ("stamp-never-written", "inline-hold", "wrote no stamp"),  # the stamp obligation
    ("walk-keeps-stamp", "every-third", "is observed with swept_state"),  # the observation
    ("park-done-first", "park-handoff", "says done True"),  # compute_park_next
    ("park-unbounded", "park-churn", "says done False"),
    ("sweep-last-before-work", "park-slow-sweeps", "its last park sweep ended at"),  # due
    ("unit-next-to-live", "inline-hold", "the model's walk of its free blocks"),  # the walk
    ("epoch-not-rate-limited", "inline-hold", "less than the interval"),  # the whole advance
    ("double-increment", "inline-hold", "the model's advance made epoch 1"),
    ("unit-outside-area", "reuse-after-purge", "does not lie wholly inside"),  # the discard
    ("huge-purges", "huge-never", "cannot purge holes"),
    ("unit-os-page", "every-third", "purge unit of 16384 B"),  # page_new's geometry
]


@pytest.mark.parametrize("mutant,scenario,why", C_MUTANTS)
def test_c_mutant_traces_are_rejected(driver, mutant, scenario, why):
    sc = SCENARIOS[scenario]
    v = verdict_of(*driver.run(sc.build(), sc.options, mutant=mutant), name=scenario)
    assert not v.accepted
    assert why in v.why


# -- linearized traces built by hand -------------------------------------------------------------

INTERVAL = 10


def lin_header(threads=(1, 2)) -> dict:
    return {"format": "purgecheck-trace", "version": 1,
            "config": config_of(Options(purge_holes_min_interval=INTERVAL, clock_start_ms=0),
                                clock="real"),
            "producer": {"name": "hand", "linearized": True, "threads": list(threads)}}


def step(tid, pc, value, **more):
    return {"ev": "advance_step", "pc": pc, "value": value, **more, "tid": tid}


def numbered(events: list[dict]) -> list[dict]:
    return [{**ev, "lin": n} for n, ev in enumerate(events)]


def two_sweepers() -> list[dict]:
    """Thread 1 allocates from its large page, then it and thread 2 sweep at once: 1 wins the
    CAS, 2 loses it and waits for 1's store; both sweep in the new epoch, 1's page is held."""
    return [
        {"ev": "page_new", "page": 1, "page_kind": "large", "block_size": 262144,
         "reserved": 16, "unit": 16384, "tid": 1},
        {"ev": "extend", "page": 1, "first": 0, "count": 4, "tid": 1},
        {"ev": "malloc", "page": 1, "block": 0, "zero": False, "src": "extend", "tid": 1},
        {"ev": "stamp", "page": 1, "epoch": 0, "tid": 1},
        {"ev": "malloc", "page": 1, "block": 1, "zero": False, "src": "free", "tid": 1},
        {"ev": "free", "page": 1, "block": 1, "thread": "owner", "tid": 1},
        step(1, "load_start", 0), step(2, "load_start", 0),
        step(1, "read_clock", 1000), step(2, "read_clock", 1000),
        step(1, "cas", True), step(2, "cas", False),
        step(1, "increment", 1), step(1, "read_clock_again", 1001),
        step(1, "store_start", 1001), step(2, "wait_moving", 1001, spins=3),
        {"ev": "epoch_advance", "thread": 1, "epoch": 1, "start": 1001, "tid": 1},
        {"ev": "sweep_begin", "thread": 1, "seq": 1, "full": False, "epoch": 1, "now": 1001,
         "tid": 1},
        {"ev": "sweep_begin", "thread": 2, "seq": 1, "full": False, "epoch": 1, "now": 1001,
         "tid": 2},
        {"ev": "sweep_page", "page": 1, "outcome": "held", "tid": 1},
        {"ev": "idle", "thread": 2, "epoch": 1, "handoff": False, "deferred": False,
         "full": False, "tid": 2},
        {"ev": "idle", "thread": 1, "epoch": 1, "handoff": False, "deferred": True,
         "full": False, "tid": 1},
        {"ev": "pending", "thread": 1, "value": True, "tid": 1},
    ]


def replace(events: list[dict], index: int, **fields) -> list[dict]:
    out = [dict(ev) for ev in events]
    out[index].update(fields)
    return out


def at(events: list[dict], pred) -> int:
    return next(i for i, ev in enumerate(events) if pred(ev))


def pc_at(events, tid, pc, nth=0):
    hits = [i for i, ev in enumerate(events) if ev.get("pc") == pc and ev["tid"] == tid]
    return hits[nth]


def test_hand_built_trace_is_accepted_in_any_line_order():
    events = numbered(two_sweepers())
    assert verdict_of(lin_header(), events).accepted
    # Lines written late (each thread writes after taking its number): the same replay.
    shuffled = events[:6] + events[6:16][::-1] + events[16:]  # the advance steps
    v = verdict_of(lin_header(), shuffled)
    assert v.accepted and v.events == len(events)


def broken_variants():
    base = two_sweepers()
    # No CAS exclusion: both sweepers that found the epoch due claim it and both increment.
    i = pc_at(base, 2, "cas")
    no_cas = base[:i] + [step(2, "cas", True), step(2, "increment", 2)] + base[i + 1:]
    # The start recorded from the clock read before the increment.
    early = replace(base, pc_at(base, 1, "store_start"), value=1000)
    # A wait that gives up while start is MOVING, before its bound.
    i = pc_at(base, 2, "wait_moving")
    quitter = [dict(ev) for ev in base]
    quitter.insert(pc_at(base, 1, "increment"), quitter.pop(i))
    quitter[pc_at(quitter, 2, "wait_moving")]["value"] = MOVING
    # The epoch moved twice by one sweep.
    twice = replace(base, pc_at(base, 1, "increment"), value=2)
    # A load that returns what start never held.
    ghost = replace(base, pc_at(base, 2, "load_start"), value=5)
    # A sweep that begins before its advance has finished.
    i = at(base, lambda ev: ev["ev"] == "sweep_begin" and ev["thread"] == 2)
    hasty = base[:]
    hasty.insert(pc_at(base, 2, "wait_moving"), hasty.pop(i))
    # A CAS after the compare found the epoch not due (no rate limit).
    j = at(base, lambda ev: ev.get("ev") == "pending")
    unlimited = base[:j] + [step(2, "load_start", 1001), step(2, "read_clock", 1005),
                            step(2, "cas", True)] + base[j:]
    # The page stamped in epoch 0 walked in epoch 1 (it is held).
    k = at(base, lambda ev: ev.get("outcome") == "held")
    walked = base[:k] + [
        {"ev": "walk", "page": 1, "complete": True, "runs": [], "dropped": 0, "tid": 1},
        {"ev": "sweep_page", "page": 1, "outcome": "walked", "tid": 1}] + base[k + 1:]
    # A stamp of an epoch the read cannot return.
    future = replace(base, at(base, lambda ev: ev["ev"] == "stamp"), epoch=3)
    # A stamp of the epoch before the current one, read under the trace's lock.
    past = base + [{"ev": "malloc", "page": 1, "block": 2, "zero": False, "src": "free",
                    "tid": 1}, {"ev": "stamp", "page": 1, "epoch": 0, "tid": 1}]
    # The pending flag of a sweep that left nothing.
    liar = replace(base, at(base, lambda ev: ev["ev"] == "pending"), value=False)
    # Thread 2's sweep reaches thread 1's page.
    k2 = at(base, lambda ev: ev["ev"] == "idle" and ev["thread"] == 2)
    trespass = base[:k2] + [{"ev": "sweep_page", "page": 1, "outcome": "held", "tid": 2}] \
        + base[k2:]
    return {
        "no-cas-exclusion": (no_cas, "so the model's CAS fails"),
        "start-before-increment": (early, "its clock read after the increment was"),
        "wait-gives-up": (quitter, "stopped waiting"),
        "double-increment": (twice, "the model's makes 1"),
        "load-of-a-ghost": (ghost, "start is 0"),
        "sweep-before-advance": (hasty, "before its advance finished"),
        "not-rate-limited": (unlimited, "found the epoch not due"),
        "young-page-walked": (walked, "which the model holds"),
        "stamp-from-the-future": (future, "the read of the epoch returns 0..0"),
        "stamp-from-the-past": (past, "the read of the epoch returns 1..1"),
        "pending-lies": (liar, "mi_on_thread_idle_pending of thread 1 says False"),
        "sweep-trespasses": (trespass, "owned by thread 1"),
    }


@pytest.mark.parametrize("name", list(broken_variants()))
def test_hand_built_broken_traces_are_rejected(name):
    events, why = broken_variants()[name]
    v = verdict_of(lin_header(), numbered(events))
    assert not v.accepted, name
    assert why in v.why, v.why


def park_trace() -> list[dict]:
    """Thread 1 parks; the scavenger (tid -1) sweeps it; it comes back."""
    return [
        {"ev": "park", "thread": 1, "tid": 1},
        step(-1, "load_start", 0), step(-1, "read_clock", 1000), step(-1, "cas", True),
        step(-1, "increment", 1), step(-1, "read_clock_again", 1000),
        step(-1, "store_start", 1000),
        {"ev": "epoch_advance", "thread": 1, "epoch": 1, "start": 1000, "tid": -1},
        {"ev": "sweep_begin", "thread": 1, "seq": 1, "full": False, "epoch": 1, "now": 1000,
         "tid": -1},
        {"ev": "idle", "thread": 1, "epoch": 1, "handoff": True, "deferred": False,
         "full": False, "tid": -1},
        {"ev": "park_sweep", "thread": 1, "epoch": 1, "deferred": False, "done": True,
         "tid": -1},
        {"ev": "unpark", "thread": 1, "tid": 1},
    ]


def test_park_handoff_by_hand():
    base = park_trace()
    assert verdict_of(lin_header((1,)), numbered(base)).accepted
    early = base[:-1]
    early.insert(at(base, lambda ev: ev["ev"] == "idle"), base[-1])
    v = verdict_of(lin_header((1,)), numbered(early))
    assert not v.accepted and "a sweep has its heap" in v.why
    undone = replace(base, at(base, lambda ev: ev["ev"] == "park_sweep"), done=False)
    v = verdict_of(lin_header((1,)), numbered(undone))
    assert not v.accepted and "the model's park is done" in v.why
    unparked = base[1:]  # the scavenger claims a thread that never parked
    v = verdict_of(lin_header((1,)), numbered(unparked))
    assert not v.accepted and "it claims only parked threads" in v.why


# -- what a rejection shows ------------------------------------------------------------------------

def test_rejection_on_the_command_line(tmp_path, capsys):
    events, _ = broken_variants()["no-cas-exclusion"]
    path = tmp_path / "nocas.jsonl"
    with open(path, "wb") as f:
        write_trace(f, lin_header(), numbered(events))
    rc = main(["validate", str(path), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1
    first, *rest = out.splitlines()
    line = at(numbered(events), lambda ev: ev.get("pc") == "cas" and ev["tid"] == 2) + 2
    assert first.startswith(f"{path}:{line}: rejected")
    assert '"pc":"cas","value":true' in out  # the event
    assert "start is MOVING" in out  # why
    assert "epoch 0, start MOVING" in out  # the model's state there
    assert "tid 1: advancing, at increment" in out
    assert "enabled there:" in out and "advance_step cas -> lost" in out
    assert f"replay: purgecheck validate {path}" in out
    rc = main(["validate", str(path), "--json"])
    doc = orjson.loads(capsys.readouterr().out)
    assert rc == 1 and doc["accepted"] is False
    assert doc["verdicts"][0]["line"] == line and doc["verdicts"][0]["enabled"]


def test_accepted_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "ok.jsonl"
    with open(path, "wb") as f:
        write_trace(f, lin_header(), numbered(two_sweepers()))
    assert main(["validate", str(path), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(f"accepted: {len(two_sweepers())} events")


# -- generated traces ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_traces_are_accepted(seed):
    buf = io.BytesIO()
    n = generate(buf, 30_000, seed=seed)
    buf.seek(0)
    v = validate_stream(buf, f"gen{seed}")
    assert v.accepted, v.why
    assert v.events == n >= 30_000
    assert v.stats["epochs"] > 10


def test_crowded_generated_traces_are_accepted():
    """Many sweepers on a fast clock: an advance's epoch_advance line comes after another
    sweeper has moved the epoch again; it says the epoch its own increment made (the
    tracegen before it drove the model's steps wrote the current one: rejected, seeds 0, 1)."""
    for seed in (0, 1):
        buf = io.BytesIO()
        n = generate(buf, 30_000, seed=seed, sweepers=8, parkers=2, steps_per_ms=3)
        buf.seek(0)
        v = validate_stream(buf, f"crowded{seed}")
        assert v.accepted, v.why
        assert v.events == n


def test_a_flipped_cas_in_a_generated_trace_is_rejected():
    buf = io.BytesIO()
    generate(buf, 20_000, seed=3)
    lines = buf.getvalue().split(b"\n")
    i = next(n for n, line in enumerate(lines) if b'"cas","value":false' in line)
    lines[i] = lines[i].replace(b'"value":false', b'"value":true')
    v = validate_stream(io.BytesIO(b"\n".join(lines)), "flipped")
    assert not v.accepted and "CAS" in v.why and v.line == i + 1


# -- every other check, each on one edit of a seed scenario's model trace --------------------------

def nth(events, pred, n=0) -> int:
    return [i for i, ev in enumerate(events) if pred(ev)][n]


def kind(k, **fields):
    return lambda ev: ev["ev"] == k and all(ev.get(f) == v for f, v in fields.items())


def edited(events, pred, n=0, drop=False, insert=None, **fields):
    out = [dict(ev) for ev in events]
    i = nth(out, pred, n)
    if drop:
        del out[i]
    elif insert is not None:
        out.insert(i + 1, insert)
    else:
        out[i].update(fields)
    return out


EDITS = [
    # a sweep that does not move the epoch, where the model's advance moves it
    ("inline-hold", lambda e: edited(e, kind("epoch_advance"), drop=True), "does not move the epoch"),
    ("inline-hold", lambda e: edited(e, kind("sweep_page", outcome="walked"), outcome="unchanged"),
     "skipped as unchanged"),
    ("inline-hold", lambda e: edited(e, kind("sweep_page", outcome="walked"), outcome="ineligible"),
     "swept as ineligible, but it can purge holes"),
    ("inline-hold", lambda e: edited(e, kind("sweep_page", outcome="unchanged"), outcome="walked"),
     "without a walk event"),
    ("inline-hold", lambda e: edited(e, kind("sweep_begin"), n=1, seq=7), "the model's is sweep 2"),
    ("inline-hold", lambda e: edited(e, kind("idle", deferred=False), deferred=True),
     "but it held no page"),
    ("every-third", lambda e: edited(e, kind("extend"), count=5), "the model forms 4 blocks"),
    ("every-third", lambda e: edited(e, kind("malloc"), block=999), "the page has formed"),
    ("every-third", lambda e: edited(e, kind("free", thread="owner"), thread="other"),
     "as another thread would"),
    ("every-third", lambda e: edited(e, kind("stamp"), insert={"ev": "stamp", "page": 1,
                                                              "epoch": 0}),
     "with no allocation from it just before"),
    ("reuse-after-purge", lambda e: edited(e, kind("malloc"), n=3,
                                           insert={"ev": "stamp", "page": 1, "epoch": 0}),
     "already carries the stamp of epoch 0"),
    ("every-third", lambda e: edited(e, kind("page_state"), capacity=3), "is observed with capacity 3"),
    ("park-handoff", lambda e: edited(e, kind("park"), insert={"ev": "park", "thread": 1}),
     "parks, but it is parked"),
    ("xthread-frees", lambda e: edited(e, kind("op", op="malloc"), thread=2),
     "only a page's owner allocates"),
    ("wraparound", lambda e: edited(e, kind("epoch_skip"), epoch=0), "behind the current"),
    ("abandoned-young", lambda e: edited(e, kind("page_new"), insert={"ev": "reclaim", "page": 1,
                                                                     "thread": 1}),
     "which is not abandoned"),
]


@pytest.mark.parametrize("scenario,edit,why", EDITS, ids=[f"{s}:{w[:24]}" for s, _, w in EDITS])
def test_each_check_rejects_an_edited_model_trace(scenario, edit, why):
    sc = SCENARIOS[scenario]
    header, events = model_trace(sc.ops(), sc.options, source=scenario)
    assert verdict_of(header, events).accepted
    v = verdict_of(header, edit(events), name=scenario)
    assert not v.accepted, why
    assert why in v.why, v.why


def test_an_aligned_address_outside_its_block_is_rejected():
    """malloc_aligned's event (issue 21's aligned-16k-offset takes the over-allocation path):
    the model's trace is accepted; an offset past the block's end is not."""
    sc = SCENARIOS["aligned-16k-offset"]
    header, events = model_trace(sc.ops(), sc.options, source=sc.name)
    assert verdict_of(header, events).accepted
    i = at(events, lambda ev: ev.get("ev") == "aligned" and ev["offset"] > 0)
    size = next(ev["block_size"] for ev in events
                if ev.get("ev") == "page_new" and ev["page"] == events[i]["page"])
    v = verdict_of(header, replace(events, i, offset=size))
    assert not v.accepted and "aligned address" in v.why
