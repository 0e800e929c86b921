"""`purgecheck fuzz` and the `fuzz` engine of `purgecheck check`: exit 0 when every invariant
held, 1 under a mutant (with the program and a replay command that replays exactly that
program), 2 on bad usage; JSON for CI; the example database under the state directory; the
profiles. DESIGN.md: "Every failure is replayable: it prints the seed, the Hypothesis
reproduction, or the op script, and one command that replays it."
"""

from __future__ import annotations

import shlex

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.fuzz import run_machine, state_dir
from purgecheck.reports.store import project_root
from stateful_tests.profiles import profile_settings

SEED = "5"
QUICK = ["--profile", "ci", "--seed", SEED, "--no-shrink"]
# The mutants the machines must kill, each with the machine that kills it.
MUTANT_MACHINES = [("purged-left-on-list", "page"), ("unit-next-to-live", "page"),
                   ("free-is-zero-kept", "page"), ("unpurge-all-skipped", "page"),
                   ("no-hold-inline", "page"), ("age-lt-1", "epoch"),
                   ("park-done-first", "park")]


def fuzz(capsys, *args: str) -> tuple[int, dict | str, str]:
    rc = main(["fuzz", *args])
    out, err = capsys.readouterr()
    return rc, (orjson.loads(out) if "--json" in args else out), err


@pytest.fixture(autouse=True)
def own_state_dir(tmp_path, monkeypatch):
    """Each test gets an empty state directory (the example database lives there)."""
    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path / ".purgecheck"))
    return tmp_path


def test_clean_model_exits_0_with_a_table_per_machine(capsys):
    rc, out, _ = fuzz(capsys, "--machine", "page", "--machine", "epoch", "--machine", "park",
                      "--examples", "20", *QUICK)
    assert rc == 0
    for machine in ("page", "epoch", "park"):
        assert f"fuzz: {machine} machine" in out
    assert "3 held, 0 failed" in out


@pytest.mark.parametrize("mutant,machine", MUTANT_MACHINES)
def test_each_mutant_makes_fuzz_exit_1(capsys, mutant, machine):
    rc, doc, _ = fuzz(capsys, "--machine", machine, "--mutant", mutant, "--examples", "600",
                      "--json", *QUICK)
    assert rc == 1 and doc["ok"] is False
    (run,) = doc["runs"]
    assert run["mutant"] == mutant and run["failure"]["invariant"] != "MODEL-RAN"
    assert f"--mutant {mutant}" in run["failure"]["replay"]


def test_a_failure_prints_its_program_and_a_replay_that_replays_exactly_it(capsys):
    rc, doc, _ = fuzz(capsys, "--machine", "page", "--variant", "no-hold", "--examples", "200",
                      "--json", "--profile", "ci", "--seed", SEED)
    assert rc == 1
    failure = doc["runs"][0]["failure"]
    assert failure["program"].startswith("state = PageMachine_no_hold()")
    assert failure["reproduce_failure"].startswith("@reproduce_failure(")
    words = shlex.split(failure["replay"])
    assert words[:2] == ["purgecheck", "fuzz"] and "--replay" in words
    # The replay runs exactly the shrunk program: one example, the same failure and steps.
    rc, again, _ = fuzz(capsys, *words[2:], "--json")
    assert rc == 1
    replayed = again["runs"][0]
    assert replayed["examples"] == 1
    assert replayed["failure"]["invariant"] == failure["invariant"]
    assert replayed["failure"]["program"] == failure["program"]
    # The same program under the design the seed chose fails nothing.
    blob = words[words.index("--replay") + 1]
    rc, out, _ = fuzz(capsys, "--machine", "page", "--replay", blob)
    assert rc == 0 and "did not fail" in out


def test_text_report_shows_the_program_and_the_replay_command(capsys):
    rc, out, _ = fuzz(capsys, "--machine", "park", "--mutant", "park-done-first",
                      "--examples", "600", "--profile", "ci", "--seed", SEED)
    assert rc == 1
    assert "FAIL HD-GOES-WITHIN-TWO" in out and "state.settle()" in out
    assert "replay: purgecheck fuzz --machine park --mutant park-done-first --steps 30 --replay " \
        in out


def test_variant_all_reports_which_invariant_each_design_broke(capsys):
    rc, doc, _ = fuzz(capsys, "--machine", "epoch", "--variant", "all", "--examples", "300",
                      "--json", *QUICK)
    assert rc == 1
    broke = {r["variant"]: r["failure"] and r["failure"]["invariant"] for r in doc["runs"]}
    assert broke["epoch"] is None and broke["clock"] is None
    assert broke["no-hold"] in ("HD-YOUNG-KEPT", "HD-INTERVAL")
    assert broke["handoff-only"] in ("HD-YOUNG-KEPT", "HD-INTERVAL")
    assert broke["two-untouched"] == "HD-INTERVAL"


def test_minutes_runs_batches_of_new_seeds_until_the_time_is_spent(capsys):
    rc, doc, _ = fuzz(capsys, "--machine", "epoch", "--minutes", "0.01", "--seed", SEED,
                      "--json", "--profile", "ci")
    assert rc == 0
    (run,) = doc["runs"]
    assert run["examples"] >= 50 and run["seconds"] >= 0.6 - 0.1


def test_found_failures_are_saved_and_tried_first_next_time(capsys, own_state_dir):
    first = run_machine("page", "no-hold", profile="dev", examples=200, seed=1)
    assert not first.ok and first.found_after > 1
    saved = state_dir() / "hypothesis"
    assert saved.is_dir() and any(saved.rglob("*"))
    again = run_machine("page", "no-hold", profile="dev", examples=200, seed=2)
    assert not again.ok and again.found_after == 1  # the saved example, replayed first


def test_state_dir_is_the_project_state_directory(own_state_dir, monkeypatch):
    assert state_dir() == own_state_dir / ".purgecheck"
    monkeypatch.delenv("PURGECHECK_STATE_DIR")
    assert state_dir() == project_root() / ".purgecheck"


def test_profiles():
    ci, dev, nightly = (profile_settings(p, state_dir()) for p in ("ci", "dev", "nightly"))
    assert ci.derandomize and ci.database is None
    assert not dev.derandomize and dev.database is not None
    assert nightly.max_examples > dev.max_examples > ci.max_examples
    assert nightly.stateful_step_count >= dev.stateful_step_count >= ci.stateful_step_count


@pytest.mark.parametrize("args,expected", [
    (["--machine", "nope"], "unknown machine 'nope'"),
    (["--variant", "nope"], "unknown variant 'nope'"),
    (["--mutant", "nope", "--machine", "page"], "unknown mutant 'nope'"),
    (["--examples", "0"], "--examples must be positive"),
    (["--replay", "AXic"], "give one --machine"),
    (["--machine", "page", "--replay", "not a blob!"], "is not a blob printed by a failure"),
])
def test_bad_usage_is_one_line_and_exit_2(capsys, args, expected):
    rc, _, err = fuzz(capsys, *args)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and lines[0].startswith("purgecheck fuzz:")


def test_help_teaches_with_examples(capsys):
    with pytest.raises(SystemExit) as e:
        main(["fuzz", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "purgecheck fuzz --machine page --mutant" in out and "--replay" in out


def test_check_engine_holds_and_catches_every_rejected_design(capsys):
    assert main(["check", "--engine", "fuzz", "--quick", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    rows = doc["results"]
    designs = {r["engine"]: r for r in rows if r["engine"].startswith("fuzz:")}
    assert set(designs) == {"fuzz:no-hold", "fuzz:handoff-only", "fuzz:two-untouched"}
    assert all(r["status"] == "refuted-as-expected" for r in designs.values())
    held = {r["invariant"] for r in rows if r["engine"] == "fuzz"}
    assert {"PG-COUNT", "EP-NO-SHORT-EPOCH", "HD-GOES-WITHIN-TWO", "FZ-ZALLOC-ZERO"} <= held
