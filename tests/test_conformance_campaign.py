"""The differential campaign (stateful_tests.differential.run_campaign): scripts drawn from the
differential fuzzer's alphabet by a seeded random source, no Hypothesis, so several times the
scripts per second; each run reports which ops and event kinds it reached. `make test` runs
it at a tiny size and shows that it finds each broken rule issue 20 added, at a fixed seed,
within a few hundred scripts; the slow tier runs the campaign of 100,000 scripts over four
seeds, which must end with no divergence."""

from __future__ import annotations

import subprocess

import pytest

from test_reference_c_fuzz import assert_failure_replays

from purgecheck.conformance import BUILD_DIR, CDriver
from purgecheck.mutants import MUTANTS
from stateful_tests.differential import random_example, run_campaign


@pytest.fixture(scope="module")
def driver():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)
    with CDriver() as d:
        yield d


def test_a_campaign_script_is_the_same_every_time():
    assert random_example(3, 17) == random_example(3, 17)
    assert random_example(3, 17) != random_example(3, 18)


def test_a_clean_campaign_agrees_and_reaches_every_op_and_event_kind(driver):
    run = run_campaign(driver, 150, seed=0)
    assert run.examples == 150 and run.divergences == 0, run.failures[:1]
    assert run.coverage.missing() == ([], []), run.coverage.summary()
    assert run.coverage.summary().startswith("ops ")


# The broken rules added with issue 20 (each has a C switch and a model twin), and the script
# of seed 0 that first shows each: the campaign must find each within LIMIT scripts.
LIMIT = 400


@pytest.mark.parametrize("mutant", ["rebuild-keeps-order", "fork-child-keeps-moving",
                                    "clock-back-not-due", "purged-straddler-live",
                                    "age-signed32"])
def test_the_campaign_finds_each_new_broken_rule_and_the_failure_replays(
        driver, mutant, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path))
    assert MUTANTS[mutant].c_switch
    run = run_campaign(driver, LIMIT, seed=0, mutant=mutant, stop=True)
    assert run.divergences == 1, f"{mutant} not found in {LIMIT} scripts"
    assert_failure_replays(run.failure, tmp_path, capsys)


@pytest.mark.slow
def test_a_campaign_of_100000_scripts_over_four_seeds_has_no_divergence(driver):
    for seed in (101, 102, 103, 104):
        run = run_campaign(driver, 25_000, seed=seed)
        assert run.divergences == 0, run.failures
        assert run.coverage.missing() == ([], []), run.coverage.summary()
