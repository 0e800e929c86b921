"""The runtime's own part of buffer-loop and of the servers at the idle's end, measured apart
(compare.RUNTIME_APART).

docs/measure.md, "The runtime's own part, measured apart": buffer-loop.js with its buffers at
1 byte and nothing kept, under each design on the real Bun, makes what the model of
buffer-loop misses (its small and medium pages: 27 calls of 64 KiB or more over before under
epoch, 1.46 MB given back at idle). The comparison adds that excess to the model's for
buffer-loop, and the servers' at 1 byte to their memory at the idle's end.

Deterministic: the recorded measurements (docs/data/) and the model only.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from purgecheck.measure.compare import (MB, RUNTIME_APART, RUNTIME_PART, MachineModel,
                                        add_runtime_part, compare, run_model,
                                        runtime_counters, runtime_part)

RECORD = json.loads((Path(__file__).parent.parent / "docs" / "data" /
                     "real-bun.json").read_text())["workloads"]


@pytest.fixture(scope="module")
def plain():
    """buffer-loop's model without the runtime's part (the comparison before it)."""
    w = RECORD["buffer-loop"]
    return run_model("buffer-loop", w["params"], w["summary"], ["no-hold", "epoch", "default"],
                     replace(MachineModel(), runtime_apart=False))


def _verdicts(model) -> dict:
    w = RECORD["buffer-loop"]
    c = compare("buffer-loop", w["params"], w["summary"], model)
    return {(r.figure, r.design): r for r in c.rows}, {f: o["same"] for f, o in c.order.items()}


def _with(plain, apart) -> dict:
    model = {d: dict(c) for d, c in plain.items()}
    add_runtime_part(model, apart)
    return model


def test_the_runtime_part_is_taken_for_buffer_loop_typed_arrays_and_the_servers_only():
    assert RUNTIME_APART.is_file()
    for name in ("buffer-loop", "typed-arrays"):
        assert runtime_part(name) is not None
        assert runtime_counters(name) == tuple(RUNTIME_PART)
    assert runtime_part("typed-arrays-own-pace") is None  # kept for the test below only
    for name in ("buffer-loop", "bun-serve"):
        assert runtime_part(name, replace(MachineModel(), runtime_apart=False)) is None


def test_the_servers_take_the_runtime_part_at_the_idles_end_only():
    """The server with its bodies at 1 byte (docs/measure.md, "The servers' own part at the
    idle's end"): both servers take its excess over before in the memory at the idle's end,
    where the model holds none of the requests' small objects any more, and nothing under
    load, where it holds them (SMALL_OBJECTS). Broken variant: every counter, as buffer-loop
    takes them, which counts the small objects' calls under load twice."""
    apart = runtime_part("bun-serve")
    assert apart is not None and apart == runtime_part("bun-serve-nothing-kept")
    assert runtime_counters("bun-serve") == runtime_counters("bun-serve-nothing-kept") \
        == ("rss_end",)
    model = {d: {k: 0.0 for k in RUNTIME_PART} for d in ("before", "epoch")}
    add_runtime_part(model, apart, runtime_counters("bun-serve"))
    given_back = apart["before"]["anon_mb_idle_end"]["median"] \
        - apart["epoch"]["anon_mb_idle_end"]["median"]
    assert given_back > 1  # MB: the sweeps give the runtime's pages back, before keeps them
    assert model["epoch"]["rss_end"] == pytest.approx(-given_back * MB)
    assert model["epoch"]["all_large_discards_load"] == model["before"]["rss_end"] == 0


def test_with_the_runtime_part_epochs_calls_and_the_mb_given_back_are_inside(plain):
    rows, order = _verdicts(plain)
    outside = {("discards_load", "epoch"), ("mb_given_back_idle", "no-hold"),
               ("mb_given_back_idle", "epoch")}
    assert all(rows[k].verdict == "outside band" for k in outside)
    rows2, order2 = _verdicts(_with(plain, runtime_part("buffer-loop")))
    assert all(rows2[k].verdict == "within band" for k in outside)
    assert rows2[("discards_load", "epoch")].model == pytest.approx(27)  # 36 less before's 9
    assert rows2[("mb_given_back_idle", "epoch")].model == pytest.approx(3.75 + 1.46, abs=0.01)
    # nothing inside before is outside with it, and the orderings it changes come right
    assert not [k for k, r in rows.items()
                if r.verdict == "within band" and rows2[k].verdict != "within band"]
    assert [f for f in order if order[f] and not order2[f]] == []
    assert sum(order2.values()) == sum(order.values()) + 3


def test_the_runtime_part_with_before_and_the_design_swapped_is_caught(plain):
    """The broken variant: the runtime's excess taken the wrong way round (before less the
    design): the MB given back and epoch's calls fall outside."""
    apart = runtime_part("buffer-loop")
    swapped = {d: {f: {"median": 2 * apart["before"][f]["median"] - v["median"]}
                   for f, v in apart[d].items() if isinstance(v, dict) and "median" in v}
               for d in apart}
    rows, _ = _verdicts(_with(plain, swapped))
    assert rows[("discards_load", "epoch")].verdict == "outside band"
    assert rows[("mb_given_back_idle", "epoch")].verdict == "outside band"
    assert rows[("mb_given_back_idle", "epoch")].model < 3.75


def _typed_arrays_with(apart) -> dict:
    """typed-arrays' rows with a model whose every design is its `off` (the model's own excess
    in calls and faults under load is 0 there: it holds the large objects' pages only,
    docs/real-bun.md before the runtime's part) plus the runtime's part `apart`."""
    w = RECORD["typed-arrays"]
    model = {d: {k: 0.0 for k in RUNTIME_PART} for d in w["summary"]}
    add_runtime_part(model, apart)
    c = compare("typed-arrays", w["params"], w["summary"], model)
    return {(r.figure, r.design): r for r in c.rows}


def test_typed_arrays_calls_come_from_the_runtime_at_the_real_pace():
    """docs/measure.md, "Typed-arrays: the runtime's pages at the real pace": typed-arrays.js
    with its objects at 1 byte and its turns made to last as the real program's
    (`turn_ms`), so that its load (0.4 s) gives the sweeps their time, makes epoch's and the
    default's excess of calls of 64 KiB or more (real 21 and 24; the model's own 0).
    Broken variant: the same program at its own pace (a load of 0.03 s, 2026-12-04), whose
    part leaves both outside."""
    rows = _typed_arrays_with(runtime_part("typed-arrays"))
    for d in ("epoch", "default"):
        assert rows[("discards_load", d)].verdict == "within band"
        assert rows[("discards_load", d)].model >= 10
    own_pace = json.loads(RUNTIME_APART.read_text())["workloads"]["typed-arrays-own-pace"]
    assert own_pace["summary"]["epoch"]["load_s"]["median"] < 0.1
    assert runtime_part("typed-arrays")["epoch"]["load_s"]["median"] > 0.3
    broken = _typed_arrays_with(own_pace["summary"])
    for d in ("epoch", "default"):
        assert broken[("discards_load", d)].verdict == "outside band"
