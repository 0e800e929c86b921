"""Differential fuzzing, model against C: Hypothesis op scripts over several pages and
threads on the virtual clock (derandomized here), under every design of the seed, with the
residency of every page compared after every sweep (and after every op in one run)."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, given, settings

from model.variants import VARIANTS
from purgecheck.cli import main
from purgecheck.conformance import BUILD_DIR, CDriver
from stateful_tests.differential import check_example, differential_examples, run_fuzz

CI = settings(max_examples=60, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def driver():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)
    with CDriver() as d:
        yield d


def test_model_and_c_agree_on_generated_scripts(driver):
    @CI
    @given(differential_examples())
    def one(example):
        options, text = example
        check_example(driver, options, text)

    one()


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_design_agrees_on_generated_scripts(driver, variant):
    @settings(CI, max_examples=15)
    @given(differential_examples(variant=variant))
    def one(example):
        options, text = example
        check_example(driver, options, text)

    one()


def test_residency_agrees_after_every_op(driver):
    @settings(CI, max_examples=20)
    @given(differential_examples(max_ops=25))
    def one(example):
        options, text = example
        check_example(driver, options, text, observe="all")

    one()


def test_the_fuzzer_catches_a_c_mutant_and_the_failure_replays(driver, tmp_path, monkeypatch,
                                                              capsys):
    """With the stamp never written on the C side, fuzzing finds a script whose traces
    differ; the script is saved and the printed command replays the divergence."""
    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path))
    run = run_fuzz(driver, examples=100, seed=0, mutant="stamp-never-written")
    assert run.failure is not None and "first divergence at event" in run.failure
    assert_failure_replays(run.failure, tmp_path, capsys)


def assert_failure_replays(failure: str, saved_under, capsys) -> None:
    """The failure's replay command names the script saved under `saved_under`, shows the
    divergence again, and without the mutant the clean C agrees on the same script."""
    replay = failure.rsplit("replay: ", 1)[1].split()
    assert replay[:2] == ["purgecheck", "diff"] and replay[2].startswith(str(saved_under))
    assert main(replay[1:]) == 1
    assert "first divergence" in capsys.readouterr().out
    i = replay.index("--mutant")
    assert main(replay[1:i] + replay[i + 2:]) == 0  # the clean C agrees on the same script


def _draw_with_random_warning_as_error(strategy) -> None:
    import warnings

    from hypothesis.errors import HypothesisDeprecationWarning

    from purgecheck.cluster.client import RANDOM_IN_STRATEGY

    @settings(CI, max_examples=30)
    @given(strategy)
    def one(example):
        pass

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=RANDOM_IN_STRATEGY,
                                category=HypothesisDeprecationWarning)
        one()


def test_the_generator_leaves_the_global_random_alone():
    """The Dask tasks silence Hypothesis's warning about the global `random` moving during a
    draw (the worker's own threads move it: purgecheck.cluster.client.foreign_random_allowed);
    here, with no other thread, the generator must not move it. A strategy that draws from
    `random` is caught (the second half)."""
    import random

    from hypothesis import strategies as st
    from hypothesis.errors import HypothesisDeprecationWarning
    _draw_with_random_warning_as_error(differential_examples())
    broken = st.integers(0, 9).map(lambda n: n + random.random())
    with pytest.raises(HypothesisDeprecationWarning, match="random"):
        _draw_with_random_warning_as_error(broken)
