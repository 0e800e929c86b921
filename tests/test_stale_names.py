"""Stale names (docs/op-script.md, "Stale names"): a name whose block was freed and handed out
again points at the new owner's block, on both sides. Kept as regression cases: the
differential fuzzer (seed 7 after 4,401 scripts; seed 20261201 with 60 ops a script after
2,090) found the C reference resizing in place a block that a stale free had freed, where the
model reports a double free; the C realloc now checks that its block is live first
(reference_c/alloc.c mi_check_live)."""

from __future__ import annotations

import subprocess

import pytest

from purgecheck.conformance import BUILD_DIR, CDriver, diff_script
from purgecheck.formats.trace import model_trace
from purgecheck.formats.ops import parse_script
from model.world import Options

# b3 is handed a's block (block 0) again; a stale free of a frees it; b3's realloc then finds
# its block on local_free.
STALE_THEN_REALLOC = """\
1 malloc a 131072
1 malloc keep 131072
1 free a
1 collect
1 malloc b 131072
1 malloc b2 131072
1 malloc b3 131072
1 free a
1 realloc b3 c {size}
"""
# The same through another thread: the stale free is a cross-thread push, and the realloc of
# the new owner is by its owner.
STALE_XTHREAD = """\
1 malloc a 262144
1 malloc keep 262144
2 free a
1 collect
1 malloc b 262144
1 malloc b2 262144
1 malloc b3 262144
2 free a
1 realloc b3 c 262144
1 free b3
1 malloc d 262144
"""
# The differential fuzzer's own script, shrunk (stateful_tests.differential.run_fuzz, seed 7,
# 40 ops a script, Hypothesis 6 of this checkout: example 957): n0_1's block is handed to n9
# at line 11, the stale free at line 21 frees it, n9's realloc at line 23 was resized in place.
FUZZ_SEED_7 = """\
1 malloc n0_0 1000
1 malloc n0_1 1000
1 free n0_1
1 malloc n2 1000
clock 1
clock 1
1 park
1 unpark
clock 1
1 malloc n8 1000
1 malloc n9 1000
1 malloc n10 1000
1 idle
1 idle
2 malloc n13_0 1000
2 malloc n13_1 1000
1 malloc n14 1000
1 malloc n15 1000
1 malloc n16 1000
clock 1
1 free n0_1
1 idle
1 realloc n9 n20 1000
"""
# name -> (script, the line of the stale free, the line of the new owner's realloc)
CASES = {"in-place": (STALE_THEN_REALLOC.format(size=131072), 8, 9),
         "moving": (STALE_THEN_REALLOC.format(size=600000), 8, 9),
         "cross-thread": (STALE_XTHREAD, 8, 9),
         "fuzz-seed-7": (FUZZ_SEED_7, 21, 23)}


@pytest.fixture(scope="module")
def driver():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)
    with CDriver() as d:
        yield d


def events_of_line(events: list[dict], line: int) -> list[str]:
    """The kinds of the events an op wrote, in order (the op event itself left out)."""
    out, current = [], None
    for ev in events:
        if ev["ev"] == "op":
            current = ev["line"]
        elif current == line:
            out.append(ev["ev"])
    return out


@pytest.mark.parametrize("case", CASES)
def test_a_stale_name_means_the_same_on_both_sides(driver, case):
    text, stale_free, realloc = CASES[case]
    result = diff_script(text, Options(), driver, observe="all")
    assert result.equal, result.divergence
    _, events = result.model
    # the stale free frees the new owner's block ...
    assert "free" in events_of_line(events, stale_free)
    assert "double_free" not in events_of_line(events, stale_free)
    # ... so the new owner's realloc is a double free that allocates nothing
    assert "double_free" in events_of_line(events, realloc)
    assert not {"realloc", "malloc", "extend", "page_new"} & set(events_of_line(events, realloc))


def test_the_comparison_sees_a_realloc_that_skips_the_check(driver, monkeypatch):
    """A broken model that resizes a block without checking it is live (what the C did)
    diverges from the C reference at the realloc."""
    import model.heap as heap

    def unchecked(world, h, ptr, size):
        page = world.pages[ptr.page]
        if page.block_size // 2 <= size <= page.block_size:
            page.emit("realloc", block=ptr.block, inplace=True)
            return ptr
        raise AssertionError("only the in-place case is broken here")

    monkeypatch.setattr(heap, "mi_realloc", unchecked)
    import purgecheck.runner as runner
    monkeypatch.setattr(runner, "mi_realloc", unchecked)
    text = CASES["in-place"][0]
    model = model_trace(parse_script(text), Options(), "sweeps", "<stale>")
    result = diff_script(text, Options(), driver, model_cached=model)
    assert not result.equal
    assert result.divergence.op["op"] == "realloc"
    assert result.divergence.a["ev"] == "realloc" and result.divergence.b["ev"] == "double_free"
