"""Every figure of `purgecheck simulate` is as the manifest pins it (issue 29, 4): a change
made for speed must leave the specification's figures as they were. tests/simulate_figures.py
runs each case (every workload under every design and the options its callers use, every
glibc workload and version, `simulate TRACE --json` on a recording and a call trace, the
seeds' claims) and hashes its whole result, samples included; tests/data/
simulate_figures.json holds the hashes (`python tests/simulate_figures.py --write` after a
change of figures made on purpose). The fast tier runs a few cases, the slow one all."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import simulate_figures as figures  # noqa: E402

PINNED = orjson.loads(figures.MANIFEST.read_bytes())


def test_the_manifest_pins_every_case():
    assert sorted(PINNED) == sorted(figures.CASES)


@pytest.mark.parametrize("case", figures.FAST)
def test_the_figures_of_a_case_are_as_pinned(case):
    assert figures.digest(figures.CASES[case]()) == PINNED[case]


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in figures.CASES if c not in figures.FAST])
def test_the_figures_of_every_case_are_as_pinned(case):
    assert figures.digest(figures.CASES[case]()) == PINNED[case]


def test_a_changed_figure_changes_the_hash(monkeypatch):
    """Broken variant: a sample one byte off in the resident free memory."""
    from purgecheck.simulate import mimalloc
    sample = mimalloc.Simulation.live_resident_pages
    monkeypatch.setattr(mimalloc.Simulation, "live_resident_pages",
                        lambda self: sample(self) + (self.t > self.t0 + 100))
    case = "bun-serve/threads"
    assert figures.digest(figures.CASES[case]()) != PINNED[case]
