"""`purgecheck glibc run | compare | list`: exit codes, JSON, help with examples, bad input as
one line naming the file and line, settings from --env and from the environment."""

from __future__ import annotations

import shutil

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.engines import load_engines

needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace missing")


def cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv", [["glibc", "--help"], ["glibc", "run", "--help"],
                                  ["glibc", "compare", "--help"]])
def test_help_teaches_with_examples(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "purgecheck glibc run bench-free --env MALLOC_MMAP_THRESHOLD_=33554432" in out
    assert "purgecheck glibc compare bench-free" in out


@needs_strace
def test_run_fixed_thresholds_json(capsys):
    rc, out, _ = cli(capsys, "glibc", "run", "bench-free", "--quick", "--json",
                     "--env", "MALLOC_MMAP_THRESHOLD_=33554432",
                     "--env", "MALLOC_TRIM_THRESHOLD_=131072")
    doc = orjson.loads(out)
    assert rc == 0 and doc["ok"]
    assert doc["predicted"]["heap_madvise"] == doc["measured"]["heap_madvise"] == 160
    assert doc["invariant_checks"] > 0 and not doc["failures"]


@needs_strace
def test_settings_from_the_environment_reach_model_and_glibc(capsys, monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=33554432:"
                                         "glibc.malloc.trim_threshold=131072")
    rc, out, _ = cli(capsys, "glibc", "run", "bench-free-main", "--quick", "--json")
    doc = orjson.loads(out)
    assert rc == 0 and doc["measured"]["brk_shrink"] == doc["predicted"]["brk_shrink"] == 64


@needs_strace
def test_run_with_mallopt_in_the_script(capsys, tmp_path):
    script = tmp_path / "m.ops"
    script.write_text("0 mallopt mmap_threshold 33554432\n0 mallopt trim_threshold 131072\n"
                      "1 start\nrepeat 20\n  1 malloc 0 196608  # seed 001's block\n"
                      "  1 free 0\nend\n1 join\n")
    rc, out, _ = cli(capsys, "glibc", "run", str(script))
    assert rc == 0
    assert "heap_madvise                 20           20" in out


@needs_strace
def test_compare_table_and_json(capsys):
    rc, out, _ = cli(capsys, "glibc", "compare", "bench-free", "--quick")
    assert rc == 0
    assert "model rfc-2015" in out and "glibc 2." in out and "agrees" in out
    rc, out, _ = cli(capsys, "glibc", "compare", "bench-free", "--json")
    doc = orjson.loads(out)
    assert doc["predicted"]["2.21"]["heap_madvise"] == 1023
    assert doc["predicted"]["rfc-2015"]["heap_madvise"] == 1
    assert doc["ok"] and doc["measured"]["heap_madvise"] == 0


def test_model_only_run_of_another_version(capsys):
    rc, out, _ = cli(capsys, "glibc", "run", "bench-free", "--version", "2.21", "--no-trace")
    assert rc == 0 and "heap_madvise               1023" in out


def test_a_failed_invariant_prints_a_replay(capsys):
    from purgecheck.mutants import MUTANTS, applied
    with applied(MUTANTS["glibc-top-coalesce-skipped"]):
        rc, _, err = cli(capsys, "glibc", "run", "lifo", "--quick", "--no-trace")
    assert rc == 1
    assert "GL-NO-FREE-NEIGHBOURS" in err
    assert "replay: purgecheck glibc run lifo --quick" in err


@pytest.mark.parametrize("text,message", [
    ("1 start\n1 malloc x 5\n1 join\n", ":2: expected a block id (0..16777215), got 'x'"),
    ("1 start\n1 mallopt arena_max 1\n1 join\n", ":2: mallopt: expected one of"),
    ("repeat 3\n0 malloc 1 5\n", ":1: repeat without end"),
    ("1 malloc 1 5\n", ":1: 1 malloc 1 5: thread 1 is not running: start it first"),
    ("0 start\n", ":1: thread 0 is the main thread"),
])
def test_bad_script_is_one_line_exit_2(capsys, tmp_path, text, message):
    script = tmp_path / "bad.ops"
    script.write_text(text)
    rc, out, err = cli(capsys, "glibc", "run", str(script), "--no-trace")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and f"{script}{message}" in err


@pytest.mark.parametrize("argv,message", [
    (["glibc", "run", "no-such-workload"], "unknown workload 'no-such-workload'"),
    (["glibc", "run", "bench-free", "--env", "MALLOC_ARENA_MAX=1"], "--env 'MALLOC_ARENA_MAX=1'"),
    (["glibc", "run", "bench-free", "--env", "MALLOC_TOP_PAD_=x"], "MALLOC_TOP_PAD_: expected a"),
    (["glibc"], "expected a subcommand"),
])
def test_bad_usage_exit_2(capsys, argv, message):
    rc, _, err = cli(capsys, *argv)
    assert rc == 2 and message in err and err.count("\n") == 1


def test_list_names_workloads_and_cases(capsys):
    rc, out, _ = cli(capsys, "glibc", "list")
    assert rc == 0 and "bench-free-main" in out and "bench-free/fixed-128k" in out


def test_script_prints_the_op_script(capsys):
    rc, out, _ = cli(capsys, "glibc", "run", "bench-free", "--script", "--scale", "3")
    assert rc == 0 and out.splitlines()[:3] == ["1 start", "repeat 3", f"  1 malloc 0 {48 * 4096}"]


@needs_strace
def test_engine_is_in_check(capsys, engines_run_once):
    # the engine's quick run is the session's (test_cluster_matrix's in-process table reads it)
    assert "glibc" in load_engines()
    rc, out, _ = cli(capsys, "check", "--engine", "glibc", "--quick", "--json")
    doc = orjson.loads(out)
    assert rc == 0
    ids = {r["invariant"] for r in doc["results"]}
    assert {"GL-TRIM-RULE", "GL-STRACE-CONFORMANCE", "GL-RFC-COUNTERS"} <= ids
