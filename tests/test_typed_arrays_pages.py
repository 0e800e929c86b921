"""Which page kind typed-arrays' allocations fall into, in the fork and in the model.

js/typed-arrays.js takes Uint8Arrays, Buffers and strings of LO..HI bytes (100 KiB to 500 KiB,
102,400 to 512,000) and, for one string in three, a temporary Buffer of the same size. In the
fork (digest section 2; seed 000: "the size classes of a large page on 64-bit are 96, 112, ...
448 and 512 KiB") a block above the medium maximum (about 84 KiB) and up to 512 KiB (a large
page of 4 MiB over 8) lies in a large page, several blocks to a page; only a request above
512 KiB gets a singleton ("huge") page, which never purges holes. So every one of the
program's objects is in a large page with 8 to 36 blocks, and the model must put every one
there too: if the model sent some to huge pages, or to medium pages, its discards for this
workload would come from another mechanism than the real ones.

Deterministic: the model's workload as the comparison builds it from the recording of 21:38,
cut to its first 400 allocations, driven through the simulator.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from model.geometry import ARCH64, Arch, MiB, PageKind, compute_block_size
from purgecheck.measure.compare import MachineModel, model_workload, run_model
from purgecheck.simulate.mimalloc import Simulation
from purgecheck.simulate.workloads import make_workload

QUIET = json.loads((Path(__file__).parent / "data" /
                    "real_bun_2026-12-03_quiet.json").read_text())["workloads"]
JS_PROGRAM = Path(__file__).parent.parent / "purgecheck" / "measure" / "js" / "typed-arrays.js"


def _pages_of_the_program(allocations: int = 400) -> dict[int, tuple]:
    """The model's workload for the recorded epoch run, first `allocations` only: for each of
    its allocations (the objects and the strings' temporaries) the kind, area and block count
    of the page it landed in."""
    w = QUIET["typed-arrays"]
    mw = model_workload("typed-arrays", w["params"], w["summary"], MachineModel(), "epoch")
    mw = make_workload("typed-arrays", idle_ms=0, **{**mw.params, "allocations": allocations})
    sim = Simulation("epoch", mw.idle)
    seen: dict[int, tuple] = {}
    for c in mw.calls():
        sim.call(c)
        if c.op == "malloc":
            g = sim.world.pages[sim.ptrs[c.name].page].geom
            seen[c.name] = (c.size, g.kind, g.area_size, g.reserved)
    return seen


def test_the_programs_bounds_are_the_recordings_and_the_largest_fits_a_large_class():
    """The recording ran the program's own bounds, and the largest request, with room to
    spare for a string's header (JavaScriptCore's StringImpl in front of its characters),
    is still in the last large class, not a huge page."""
    params = QUIET["typed-arrays"]["params"]
    text = JS_PROGRAM.read_text()
    assert f"env.LO ?? {params['lo']}" in text and f"env.HI ?? {params['hi']}" in text
    top = compute_block_size(params["hi"])
    assert top == 512 * 1024 == ARCH64.large_max_obj_size
    assert top - params["hi"] >= 4096  # a header of a few words fits in the class
    assert compute_block_size(params["lo"]) > ARCH64.medium_max_obj_size


def test_every_allocation_of_typed_arrays_is_in_a_large_page_of_4_mib():
    seen = _pages_of_the_program()
    assert len(seen) > 400  # the objects and the strings' temporaries
    kinds = {kind for _, kind, _, _ in seen.values()}
    assert kinds == {PageKind.LARGE}
    assert {area for _, _, area, _ in seen.values()} == {4 * MiB}
    # 4 MiB over the block: 8 blocks of 512 KiB up to 36 of 112 KiB, never a singleton
    assert {reserved for *_, reserved in seen.values()} <= set(range(8, 37))
    assert min(reserved for *_, reserved in seen.values()) == 8


def test_a_large_maximum_halved_sends_half_of_them_to_huge_pages(monkeypatch):
    """The broken variant: a large maximum of a 4 MiB page over 16 (256 KiB) puts every
    request above 256 KiB in a singleton page, and the test above fails."""
    monkeypatch.setattr(Arch, "large_max_obj_size",
                        property(lambda self: self.large_page_size // 16))
    seen = _pages_of_the_program(100)
    kinds = [kind for _, kind, _, _ in seen.values()]
    assert PageKind.HUGE in kinds and PageKind.LARGE in kinds
    assert all(kind is PageKind.HUGE for size, kind, _, _ in seen.values() if size > 256 * 1024)


def _objects_misplaced(calls, small: int) -> list[str]:
    """What is wrong with the small objects of a typed-arrays stream: an object freed at
    another time than the allocation it was taken with, an object of a kept allocation
    freed, or one of a freed allocation left."""
    owner: dict[int, int] = {}
    last_big = None
    freed_at: dict[int, float] = {}
    problems = []
    for c in calls:
        if c.op == "malloc" and c.name >= 0:
            last_big = c.name
        elif c.op == "malloc" and c.size == small and c.name < -(1 << 39):
            owner[c.name] = last_big
        elif c.op == "free":
            freed_at[c.name] = c.t_ms
    for o, big in owner.items():
        if (o in freed_at) != (big in freed_at):
            problems.append(f"object {o} of allocation {big}: freed {o in freed_at}, "
                            f"its allocation {big in freed_at}")
        elif o in freed_at and freed_at[o] != freed_at[big]:
            problems.append(f"object {o} freed at {freed_at[o]}, its allocation at "
                            f"{freed_at[big]}")
    return problems


def _stream(**params):
    return list(make_workload("typed-arrays", allocations=300, gc_every=40, per_turn=8,
                              temp_every=3, **params).calls())


def test_the_small_objects_are_taken_with_each_allocation_and_freed_with_it():
    """`small`, `small_per_allocation` (what the derivation in docs/measure.md scans): each
    allocation's objects go with it, at its collection, and stay with a kept one."""
    calls = _stream(small=12288, small_per_allocation=2)
    objects = [c for c in calls if c.op == "malloc" and c.size == 12288]
    assert len(objects) == 2 * 300
    assert _objects_misplaced(calls, 12288) == []
    kept = {c.name for c in calls if c.op == "malloc" and c.name >= 0} - \
        {c.name for c in calls if c.op == "free"}
    assert kept  # one in 12 stays to the end, and its objects with it
    # the rest of the stream is the one the comparison runs, without the objects
    assert [c for c in calls if c.name > -(1 << 39)] == _stream()


def test_objects_freed_at_once_are_caught():
    """The broken variant: every object freed right after it was taken."""
    calls = []
    for c in _stream(small=12288, small_per_allocation=1):
        if c.op == "free" and c.name < -(1 << 39):
            continue
        calls.append(c)
        if c.op == "malloc" and c.name < -(1 << 39):
            calls.append(c._replace(op="free", size=0))
    assert _objects_misplaced(calls, 12288)


def _befores_resident_mb(**objects) -> float:
    """The model's `before` (off) on the recorded before run, resident MB at the load's end,
    with the comparison's options; `objects`: small objects per allocation beside."""
    w = QUIET["typed-arrays"]
    summary = {"before": w["summary"]["before"]}
    if objects:
        from unittest import mock

        from purgecheck.measure import compare as cmp
        plain = cmp.model_workload

        def with_objects(*args):
            mw = plain(*args)
            return replace(make_workload("typed-arrays", idle_ms=mw.idle_ms,
                                         **{**mw.params, **objects}),
                           collect_at_end=mw.collect_at_end)
        with mock.patch.object(cmp, "model_workload", with_objects):
            return run_model("typed-arrays", w["params"], summary, [])["before"]["rss_load_end"] / MiB
    return run_model("typed-arrays", w["params"], summary, [])["before"]["rss_load_end"] / MiB


def test_befores_anonymous_memory_bounds_the_objects_per_allocation():
    """docs/measure.md, "typed-arrays' small and medium pages": the real before held 156.4 MB
    of anonymous memory at the load's end (155.8 to 160.8 over its runs). The program ends its
    load with `Bun.gc(true)`, whose forced collect gives the kept large pages back (the model's
    `collect_at_end`, since 2026-12-04): the model's large pages hold 146.2 MB then (154.8
    without it), so 10.3 MB (14.6 at the highest run) is left for everything else of the
    process, the runtime's own small and medium objects among it. The objects that the calls
    below 64 KiB pick (12 KiB, one per allocation) add 3.9 MB there under before: within the
    median's room. Those that would put epoch's calls inside the band (16 KiB, two per
    allocation) add 10.5 MB: just above the median's room, within the highest run's. Fails
    when the objects' runs lose the forced collect that the plain run has (the room would be
    measured against another end of the load)."""
    before = QUIET["typed-arrays"]["summary"]["before"]["anon_mb_load_end"]
    plain = _befores_resident_mb()
    room, room_max = before["median"] - plain, before["max"] - plain
    assert 8.0 < room < 12.0 < room_max < 16.0
    picked = _befores_resident_mb(small=12288, small_per_allocation=1) - plain
    assert 0 < picked < room
    assert room < _befores_resident_mb(small=16384, small_per_allocation=2) - plain < room_max
