"""The memory resident at the idle's end is compared at each design's own pace, as the real
figure is (compare.AT_OWN_PACE, MachineModel.idle_end_own_pace): before's `off` at before's
pace against the design's run at its own, not the design's excess over an `off` at its pace.
A server keeps a body every `keep_every` requests, so a design that serves fewer requests
keeps fewer, and the real before less the design counts them (docs/measure.md, "Memory at
the idle's end follows the pace")."""

from __future__ import annotations

from dataclasses import replace

from purgecheck.measure import compare as C

LARGE = 256 * 1024  # a request body
PARAMS = {"body": LARGE, "kept": 100, "keep_every": 5, "connections": 16, "idle_s": 0.5}


def _run(requests: int) -> dict:
    return {"requests": {"median": requests}, "load_s": {"median": requests / 2000}}


def test_a_slower_design_keeps_fewer_bodies_and_the_figure_counts_them():
    """before serves 500 requests and keeps 4 + 100 bodies, epoch 250 and 4 + 50. The
    model's epoch at the idle's end is its own run (the same as where before ran at epoch's
    pace), and what it gives back against before counts before's 50 more bodies (and the
    pages they pin under `off`). Broken variant: `idle_end_own_pace` off, the excess over an
    `off` at epoch's pace, which takes them out; the counters under load stay that excess
    either way."""
    summary = {"before": _run(500), "epoch": _run(250)}
    at_own = C.run_model("bun-serve", PARAMS, summary, ["epoch"])
    broken = C.run_model("bun-serve", PARAMS, summary, ["epoch"],
                         replace(C.MachineModel(), idle_end_own_pace=False))
    alone = C.run_model("bun-serve", PARAMS, {"before": _run(250), "epoch": _run(250)},
                        ["epoch"])
    assert at_own["epoch"]["rss_end"] == alone["epoch"]["rss_end"]
    given_back = at_own["before"]["rss_end"] - at_own["epoch"]["rss_end"]
    broken_back = broken["before"]["rss_end"] - broken["epoch"]["rss_end"]
    assert given_back - broken_back == at_own["before"]["rss_end"] - alone["before"]["rss_end"]
    assert given_back - broken_back >= 50 * LARGE
    assert at_own["epoch"]["all_discards_load"] == broken["epoch"]["all_discards_load"]
