"""`purgecheck prove`: the table, --json, --only, --mutants (a twin that is not refuted fails),
bad usage, DOT output; the prove engine of `check`; CrossHair finds the broken contract."""

from __future__ import annotations

import json
import re

import pytest

from proofs import crosshair_contracts
from proofs.core import Outcome
from purgecheck.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_prove_only_json(capsys):
    rc, out, _ = run(capsys, "prove", "--quick", "--only", "age", "--only", "hold", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["ok"] and doc["command"] == "prove"
    assert {r["engine"] for r in doc["results"]} == {"z3:age", "z3:hold"}
    assert all(r["status"] == "proved" for r in doc["results"])


def test_prove_table_names_property_engine_result_time(capsys):
    """One line per result within 100 columns by default (the figure cut), the figure whole
    with --verbose."""
    from proofs.explorer_configs import load_manifest
    states = f"{load_manifest()['bare-2']['states']:,} states"
    rc, out, _ = run(capsys, "prove", "--quick", "--only", "explore-bare-2")
    assert rc == 0
    assert "EP-NO-SHORT-EPOCH" in out and "explorer:explore-bare-2" in out and "bounded" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    rc, out, _ = run(capsys, "prove", "--quick", "--only", "explore-bare-2", "--verbose")
    assert rc == 0 and states in out


def test_mutants_are_refuted_and_shown(capsys, monkeypatch):
    """A Z3 twin's trace and an explorer twin's path, as --mutants shows them: the broken
    advance whose bounded model check is the cheaper of the two (no-cas-exclusion's twin is
    refuted in tests/test_proofs_z3.py); --verbose, so that the longer names leave the result
    whole. The check itself is test_proofs_z3's, once a session (session_cache.shared_bmc)."""
    from proofs import advance_z3

    import session_cache

    monkeypatch.setattr(advance_z3, "bmc", session_cache.shared_bmc(advance_z3.bmc))
    rc, out, _ = run(capsys, "prove", "--quick", "--mutants", "--verbose", "--only",
                     "start-before-increment", "--only", "explore-start-before-increment")
    assert rc == 0
    assert out.count("refuted-as-expected") == 2
    assert "shortest violating trace" in out and "shortest path" in out


def test_a_twin_that_is_not_refuted_fails(capsys, monkeypatch):
    from proofs import catalogue
    twins = catalogue.twins

    def fake(quick):
        out = twins(quick)
        t = out[0]
        return [type(t)(t.name, t.proof, t.invariants, t.engine,
                        lambda q: Outcome("proved", "nothing found"), t.summary)]
    monkeypatch.setattr(catalogue, "twins", fake)
    rc, out, _ = run(capsys, "prove", "--quick", "--mutants", "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["results"][0]["status"] == "not-refuted"


def test_bad_only_is_one_line_exit_2(capsys):
    rc, out, err = run(capsys, "prove", "--only", "no-such-proof")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "no such proof or twin" in err


def test_list_names_proofs_and_twins(capsys):
    rc, out, _ = run(capsys, "prove", "--list", "--quick")
    assert rc == 0
    for name in ("unit", "walk", "age", "advance", "hold", "contracts", "explore-bare-1",
                 "no-cas-exclusion", "start-before-increment", "stale-read-1"):
        assert name in out


def test_dot_of_an_explorer_counterexample(capsys, tmp_path):
    path = tmp_path / "cex.dot"
    rc, _, _ = run(capsys, "prove", "--quick", "--mutants", "--only",
                   "explore-start-before-increment", "--dot", str(path))
    assert rc == 0
    text = path.read_text()
    assert text.startswith("digraph") and "EP-RECORDED-NOT-BEFORE-REAL" in text


def test_crosshair_falsifies_the_broken_contract():
    out = crosshair_contracts.run_broken(True)
    assert out.status == "refuted"
    # the counterexample is one with current - stamped >= 2^32 (which one depends on what Z3
    # was asked before in this process; the verdict does not)
    call = re.search(r"age_without_modulo\((\d+), (\d+)\)", out.detail)
    assert call and int(call[1]) - int(call[2]) >= 2 ** 32, out.detail


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # z3's __del__
def test_crosshair_runs_apart_from_this_process_z3_state(monkeypatch):
    """The case of a `make check` that failed: after other proofs in the same Dask worker,
    CrossHair stopped inside Z3 (`Z3Exception: b'unreachable'`) and a twin was reported
    unknown. CrossHair now runs in an interpreter of its own: a main Z3 context broken in
    this process does not reach it; run here, the same search fails."""
    import z3.z3 as z3mod

    from proofs import crosshair_broken
    from proofs.crosshair_run import check_here
    from purgecheck.engines.crosshair_apart import check_apart

    def broken_main_ctx():
        raise z3mod.Z3Exception(b"unreachable")

    monkeypatch.setattr(z3mod, "main_ctx", broken_main_ctx)
    fn = [crosshair_broken.age_without_modulo]
    assert check_apart(fn, 20).status == "refuted"
    here = check_here(fn, 20)
    assert here.status == "unknown" and "unreachable" in here.detail, here


def test_crosshair_checks_the_mutated_model_in_its_own_process():
    """The mutants applied around the call are applied again, by name, in CrossHair's
    process: the model's age without the modulo falsifies the contracts that call it."""
    import proofs.crosshair_run
    import purgecheck.engines.prove  # noqa: F401  the prove engine installs the runner
    from purgecheck.engines.crosshair_apart import check_apart
    from purgecheck.mutants import MUTANTS, applied
    assert proofs.crosshair_run.RUNNER is check_apart  # the prove engine installed it
    with applied(MUTANTS["age-no-modulo"]):
        out = crosshair_contracts.run_contracts(True)
    assert out.status == "refuted" and "young(" in out.detail, out


def test_crosshair_contracts_are_reported_as_not_falsified_not_proved():
    out = crosshair_contracts.run_contracts(True)
    assert out.status == "bounded", out.detail
    assert "not falsified in 50 paths" in out.figure  # a count of paths, not seconds
    assert len(crosshair_contracts.contract_names(crosshair_contracts.__file__)) >= 6


@pytest.mark.slow
def test_check_runs_the_prove_engine(capsys):
    rc, out, _ = run(capsys, "check", "--engine", "prove", "--quick", "--json")
    doc = json.loads(out)
    assert rc == 0, [r for r in doc["results"] if r["status"] not in
                     ("proved", "bounded", "refuted-as-expected")]
    statuses = {r["status"] for r in doc["results"]}
    assert statuses <= {"proved", "bounded", "refuted-as-expected"}
    assert "refuted-as-expected" in statuses and "proved" in statuses


def test_prove_engine_is_registered():
    from purgecheck.engines import load_engines
    assert "prove" in load_engines()
