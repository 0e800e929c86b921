"""`purgecheck validate`: which block a malloc returns, and the scavenger's due times.

The replay follows each page's free lists (model/alloc.py) as long as the trace determines
them, and checks that every malloc takes the block the model takes, that a sweep's walk is
the model's walk of those lists and a malloc's unpurge the model's; it checks that the
scavenger sweeps a parked thread only once it is due (model.park.is_park_due) and, where the
virtual clock is known, the due time a pass returns (mi_theap_sweep_parked). Each check is
shown rejecting a tampered trace or a broken variant, beside clean traces it accepts.
"""

from __future__ import annotations

import io

import orjson
import pytest

from purgecheck.scenarios import SCENARIOS
from purgecheck.formats.trace import model_trace
from purgecheck.formats.tracegen import generate
from purgecheck.validate import validate_stream
from purgecheck.engines.validate import run_stress
from tests.test_validate import (at, built, lin_header, numbered, verdict_of,  # noqa: F401
                                 two_sweepers)


def generated(n: int, seed: int, **knobs) -> list[bytes]:
    buf = io.BytesIO()
    generate(buf, n, seed=seed, **knobs)
    return buf.getvalue().split(b"\n")


def validate_lines(lines: list[bytes], name: str = "t"):
    return validate_stream(io.BytesIO(b"\n".join(lines)), name)


def edit_line(lines: list[bytes], i: int, **fields) -> list[bytes]:
    ev = orjson.loads(lines[i])
    ev.update(fields)
    return lines[:i] + [orjson.dumps(ev)] + lines[i + 1:]


def first(lines: list[bytes], needle: bytes, start: int = 1) -> int:
    return next(i for i in range(start, len(lines)) if needle in lines[i])


# -- which block a malloc takes ---------------------------------------------------------------

def test_a_malloc_of_another_free_block_is_rejected():
    lines = generated(20_000, seed=4)
    v = validate_lines(lines)
    assert v.accepted and v.stats["blocks_checked"] > 100
    i = first(lines, b'"src":"free"')
    block = orjson.loads(lines[i])["block"]
    v = validate_lines(edit_line(lines, i, block=1 + block % 3))  # another of blocks 1..3
    assert not v.accepted and v.line == i + 1
    assert "the model takes the head of its free list" in v.why


def test_a_collect_while_the_free_list_holds_blocks_is_rejected():
    lines = generated(20_000, seed=5)
    i = first(lines, b'"src":"free"')
    v = validate_lines(edit_line(lines, i, src="collect"))
    assert not v.accepted and "collects its free lists, but the model's free list holds" in v.why


def take(block: int, src: str, tid: int = 1) -> dict:
    return {"ev": "malloc", "page": 1, "block": block, "zero": False, "src": src, "tid": tid}


def freed(block: int, thread: str = "owner", tid: int = 1) -> dict:
    return {"ev": "free", "page": 1, "block": block, "thread": thread, "tid": tid}


def test_a_collect_takes_local_free_in_order():
    """Page 1 of the hand-built trace: blocks 0..3 formed, 0 and 1 taken, 1 freed (local
    [1]). Taking 2 and 3 empties the free list; 2 freed again is pushed on local's head
    ([2, 1]); the collect appends it in that order: the model takes 2, then 1."""
    events = two_sweepers()[:6]
    good = events + [take(2, "free"), take(3, "free"), freed(2), take(2, "collect"),
                     take(1, "free")]
    v = verdict_of(lin_header(), numbered(good))
    assert v.accepted, v.why
    bad = events + [take(2, "free"), take(3, "free"), freed(2), take(1, "collect")]
    v = verdict_of(lin_header(), numbered(bad))
    assert not v.accepted and "takes block 1 (collect)" in v.why and "[2, 1]" in v.why


def test_extend_while_blocks_are_free_is_rejected():
    sc = SCENARIOS["every-third"]
    header, events = model_trace(sc.ops(), sc.options, source="every-third")
    assert verdict_of(header, events).accepted
    i = next(n for n, ev in enumerate(events) if ev["ev"] == "malloc" and ev["src"] == "free")
    page = events[i]["page"]
    capacity = sum(ev["count"] for ev in events[:i] if ev["ev"] == "extend"
                   and ev["page"] == page)
    extend = {"ev": "extend", "page": page, "first": capacity, "count": 4}
    v = verdict_of(header, events[:i] + [extend] + events[i:])
    assert not v.accepted and "forms new blocks, but the model's free list holds" in v.why


def test_a_cross_thread_free_racing_with_the_collect_leaves_the_check():
    """A push on xthread_free after the owner's last event on the page and before its
    collecting malloc may or may not be in the collect (the exchange has no event): either
    block is accepted, and the page leaves the check. A push before the owner's last event
    on the page is collected for certain: then the order is checked (xthread_free first)."""
    pushed = freed(2, "other", tid=2)
    base = two_sweepers()[:6] + [take(2, "free"), take(3, "free")]  # free [], local [1]
    for block in (1, 2):  # 2 if the push came before the exchange, 1 if after
        v = verdict_of(lin_header(), numbered(base + [pushed, take(block, "collect")]))
        assert v.accepted, (block, v.why)
    before = base[:-1] + [pushed, base[-1]]  # pushed before the owner's malloc of block 3
    v = verdict_of(lin_header(), numbered(before + [take(1, "collect")]))
    assert not v.accepted and "takes block 1 (collect)" in v.why and "[2, 1]" in v.why
    assert verdict_of(lin_header(), numbered(before + [take(2, "collect")])).accepted


def test_the_walk_is_the_models_walk_of_the_free_lists():
    """A sweep's walk of a listed page: the model's walk of the lists the replay has
    discards these runs and drops these blocks (a C walk that purges a unit beside a live
    block is rejected so too: test_validate.C_MUTANTS, unit-next-to-live)."""
    sc = SCENARIOS["inline-hold"]
    header, events = model_trace(sc.ops(), sc.options, source="inline-hold")
    assert verdict_of(header, events).accepted
    i = next(n for n, ev in enumerate(events) if ev["ev"] == "walk" and ev["dropped"])
    wrong = [dict(ev) for ev in events]
    wrong[i]["dropped"] -= 1
    v = verdict_of(header, wrong)
    assert not v.accepted and "the model's walk of its free blocks" in v.why
    j = next(n for n, ev in enumerate(events) if ev["ev"] == "discard" and ev["k1"] - ev["k0"] > 1)
    wrong = [dict(ev) for ev in events]
    wrong[j]["k1"] -= 1
    v = verdict_of(header, wrong)
    assert not v.accepted and f"discards units {events[j]['k0']}.." in v.why


def test_the_unpurge_of_a_malloc_is_the_lowest_purged_run():
    lines = generated(20_000, seed=6)
    i = first(lines, b'"ev":"unpurge"')
    v = validate_lines(edit_line(lines, i, blocks=2))
    assert not v.accepted and v.line == i + 1 and "the model's lowest purged run is" in v.why
    # an unpurge while the free list still holds a block (the model takes that block)
    unpurge = orjson.loads(lines[i])
    k = first(lines, b'"src":"free"', start=i)
    malloc = orjson.loads(lines[k])
    unpurge.update(page=malloc["page"], lin=malloc["lin"], tid=malloc["tid"])
    v = validate_lines(lines[:k] + [orjson.dumps(unpurge)] + lines[k + 1:])
    assert not v.accepted and v.line == k + 1
    assert "unpurges units, but the model's free list holds" in v.why
    # an unpurge of a page with nothing purged: every block taken, the lists empty
    unpurge = {"ev": "unpurge", "page": 1, "k0": 16, "k1": 32, "reuse": True, "blocks": 1,
               "tid": 1}
    events = two_sweepers()[:6] + [take(2, "free"), take(3, "free"), take(1, "collect")]
    assert verdict_of(lin_header(), numbered(events)).accepted
    v = verdict_of(lin_header(), numbered(events + [unpurge]))
    assert not v.accepted and "but the model's page has no purged unit" in v.why


def test_extend_while_units_are_purged_is_rejected():
    """After a walk purged the free blocks, the model's malloc unpurges the lowest run before
    it forms new blocks: an extend in place of the unpurge is rejected."""
    lines = generated(20_000, seed=7)
    i = first(lines, b'"ev":"unpurge"')
    unpurge = orjson.loads(lines[i])
    extend = {"ev": "extend", "page": unpurge["page"], "first": 4, "count": 4,
              "lin": unpurge["lin"], "tid": unpurge["tid"]}
    v = validate_lines(lines[:i] + [orjson.dumps(extend)] + lines[i + 1:])
    assert not v.accepted and v.line == i + 1
    assert "forms new blocks, but units" in v.why and "are purged" in v.why


def test_a_held_page_with_free_blocks_makes_the_sweep_defer():
    """A sweep that holds a page whose known lists hold free blocks leaves them behind
    (deferred): an idle that says otherwise is rejected (before, only the converse was)."""
    lines = generated(20_000, seed=8)
    i = first(lines, b'"handoff":false,"deferred":true')
    v = validate_lines(edit_line(lines, i, deferred=False))
    assert not v.accepted and v.line == i + 1
    assert "says it left nothing behind (deferred false), but it held page" in v.why


def test_the_collect_of_a_walk_or_collect_op_is_followed():
    """The ops `collect` and `walk` collect their heap's pages with no event: in file order
    at once, in a linearized trace by the page's next event. After them the blocks are
    still checked: a sequential walk op's walks and the mallocs after it, a linearized
    collect op's lists (a push after the op's event may race with it: the page leaves)."""
    sc = SCENARIOS["reuse-after-purge"]
    header, events = model_trace(sc.ops(), sc.options, source="reuse-after-purge")
    v = verdict_of(header, events)
    assert v.accepted and v.stats["blocks_checked"] == sum(ev["ev"] == "malloc" for ev in events)
    op = next(n for n, ev in enumerate(events) if ev["ev"] == "op" and ev["op"] == "walk")
    i = next(n for n in range(op, len(events)) if events[n]["ev"] == "malloc")
    wrong = [dict(ev) for ev in events]
    wrong[i]["block"] += 1
    v = verdict_of(header, wrong)
    assert not v.accepted and "the model takes the head of its free list" in v.why
    collect = {"ev": "op", "line": 9, "thread": 1, "op": "collect", "args": [], "tid": 1}
    base = two_sweepers()[:6] + [collect]  # free [2, 3] and local [1]: collected, [2, 3, 1]
    v = verdict_of(lin_header(), numbered(base + [take(2, "free"), take(3, "free"),
                                                  take(1, "free")]))
    assert v.accepted and v.stats["blocks_checked"] == 5, v.why
    v = verdict_of(lin_header(), numbered(base + [take(1, "free")]))
    assert not v.accepted and "[2, 3, 1]" in v.why
    racing = base + [freed(0, "other", tid=2), take(2, "free"), take(3, "free"), take(0, "free")]
    v = verdict_of(lin_header(), numbered(racing))  # block 0 may or may not be collected
    assert v.accepted and v.stats["blocks_checked"] == 2, v.why


def test_every_malloc_of_the_c_stress_run_is_checked(tmp_path):
    run = run_stress(tmp_path, "sweepers", ms=60)
    assert run.returncode == 0, run.stderr
    lines = run.trace.read_bytes().split(b"\n")
    v = validate_lines(lines, str(run.trace))
    mallocs = sum(1 for line in lines if b'"ev":"malloc"' in line)
    assert v.accepted, v.why
    assert v.stats["blocks_checked"] == mallocs > 100
    i = first(lines, b'"src":"free"', start=len(lines) // 2)
    block = orjson.loads(lines[i])["block"]
    v = validate_lines(edit_line(lines, i, block=block + 1))
    assert not v.accepted and v.line == i + 1


# -- the scavenger's due times ------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1])
def test_a_scavenger_that_sweeps_a_park_too_soon_is_rejected(seed):
    assert validate_lines(generated(20_000, seed)).accepted
    v = validate_lines(generated(20_000, seed, scavenger_early=5))
    assert not v.accepted
    assert "the model sweeps a parked thread again only 10 ms after the end" in v.why


def park_churn() -> tuple[dict, list[dict]]:
    sc = SCENARIOS["park-churn"]
    return model_trace(sc.ops(), sc.options, source="park-churn")


def test_the_due_time_a_pass_returns_is_the_models():
    header, events = park_churn()
    assert verdict_of(header, events).accepted
    i = next(n for n, ev in enumerate(events) if ev["ev"] == "scavenge" and ev["due"])
    wrong = [dict(ev) for ev in events]
    wrong[i]["due"] -= 1
    v = verdict_of(header, wrong)
    assert not v.accepted and "the model's pass at" in v.why and "says 100" in v.why


def test_a_pass_that_leaves_a_due_park_unswept_is_rejected():
    header, events = park_churn()
    ops = [n for n, ev in enumerate(events) if ev["ev"] == "op" and ev["op"] == "scavenge"]
    second = ops[1]
    end = next(n for n in range(second, len(events)) if events[n]["ev"] == "scavenge")
    assert any(ev["ev"] == "park_sweep" for ev in events[second:end])
    v = verdict_of(header, events[:second + 1] + events[end:])  # the pass swept nothing
    assert not v.accepted and "did not sweep it" in v.why
