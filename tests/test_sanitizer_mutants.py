"""The C mutants only a sanitizer build reports (CF-SANITIZERS-CLEAN): epoch-plain-read is a
data race that TSan reports on the seed's concurrent test, and that no trace can show; the
`sanitizers` engine kills it in the kill matrix and holds on the clean reference."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from purgecheck.conformance import BUILD_DIR, CDriver, diff_script
from purgecheck.engines import Budget, load_engines
from purgecheck.mutants import MUTANTS
from purgecheck.mutants.matrix import KILLED, SURVIVED, judge
from purgecheck.engines.sanitizers import describe_report, run_sanitizers, run_tsan
from purgecheck.scenarios import SCENARIOS
from purgecheck.engines.validate import run_stress

SANITIZER_MUTANTS = sorted(n for n, m in MUTANTS.items() if "CF-SANITIZERS-CLEAN" in m.catches)


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True,
                   capture_output=True)
    load_engines()


def test_epoch_plain_read_is_registered_as_c_only():
    m = MUTANTS["epoch-plain-read"]
    assert SANITIZER_MUTANTS == ["epoch-plain-read"]
    assert m.patches == () and m.c_switch == "epoch_plain_read" and m.needs_concurrency


@pytest.mark.parametrize("scenario", ["sweepers", "park"])
def test_tsan_reports_the_plain_read_racing_with_the_increment(scenario):
    r = run_tsan(scenario, 100, "epoch_plain_read")
    assert r.status == "fail", r
    assert "data race" in r.detail
    assert "in mi_epoch_plain_read (sweep.c:" in r.detail  # the mutant's read ...
    # ... against the sweeper's add (the advance of reference_c/protocol.h, which epoch.c calls)
    assert "in mi_proto_epoch_advance (protocol.h:" in r.detail
    assert r.replay.endswith("--mutant epoch_plain_read")


@pytest.mark.parametrize("scenario", ["sweepers", "park"])
def test_tsan_is_clean_without_the_switch(scenario):
    r = run_tsan(scenario, 100, None)
    assert r.status == "hold", r.detail
    assert int(r.figure.split(", ")[1].split()[0]) >= 2  # the epoch moved: sweepers ran


def test_the_release_build_cannot_tell_it():
    """Why only a sanitizer can: the seed's checks hold and the sequential traces are equal."""
    with tempfile.TemporaryDirectory() as tmp:
        run = run_stress(Path(tmp), ms=100, interval=2, mutant="epoch_plain_read",
                         traced=False)
    assert run.returncode == 0 and not run.failed_checks, run.stderr
    sc = SCENARIOS["park-handoff"]
    with CDriver() as driver:
        assert diff_script(sc.build(), sc.options, driver, mutant="epoch-plain-read").equal


def test_the_engine_kills_it_and_holds_on_the_clean_reference():
    clean = run_sanitizers(Budget(quick=True))
    assert [r.status for r in clean] == ["hold", "hold"]
    broken = run_sanitizers(Budget(quick=True, mutant="epoch-plain-read"))
    assert [(r.invariant, r.status) for r in broken] == [("CF-SANITIZERS-CLEAN", "fail")]


def test_kill_matrix_cell():
    """What `purgecheck mutants` does for this cell (in-process here): killed; a mutant of
    the model alone leaves the C reference clean, so the engine holds."""
    assert judge(MUTANTS["epoch-plain-read"], "sanitizers", quick=True).verdict == KILLED
    assert judge(MUTANTS["age-lt-1"], "sanitizers", quick=True).verdict == SURVIVED


def test_describe_report_names_the_kind_and_each_access():
    stderr = ("==================\n"
              "WARNING: ThreadSanitizer: data race (pid=7)\n"
              "  Write of size 4 at 0x7b04 by thread T1:\n"
              "    #0 f /src/a.c:3 (x+0x1)\n\n"
              "  Previous read of size 4 at 0x7b04 by main thread (mutexes: write M0):\n"
              "    #0 g /src/b.c:9 (x+0x2)\n\n"
              "SUMMARY: ThreadSanitizer: data race /src/a.c:3 in f\n")
    assert describe_report(stderr) == ("data race; write of 4 bytes by thread T1 in f (a.c:3); "
                                       "previous read of 4 bytes by main thread in g (b.c:9)")
    assert describe_report("stress sweepers: every check held\n") is None
