"""`purgecheck diff`: exit 0 when model and C agree, 1 with the first divergence when they do
not, 2 with one line (file, line, what was expected) on bad input, never a traceback."""

from __future__ import annotations

import subprocess

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.conformance import BUILD_DIR


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)


SCRIPT = """\
1 malloc a0 262144
1 malloc a1 262144
1 malloc a2 262144
1 malloc a3 262144
1 free a1
2 free a2        # another thread: xthread_free
1 idle           # held: stamped in this epoch
clock 100
1 idle
clock 100
1 idle           # two epochs on: the holes go
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "s.ops"
    path.write_text(SCRIPT)
    return path


def test_equal_traces_exit_0(script, capsys):
    assert main(["diff", str(script)]) == 0
    assert capsys.readouterr().out.startswith("equal: ")


def test_a_c_mutant_is_reported_with_its_first_divergence(script, capsys):
    """age-lt-1 takes a page stamped one epoch ago: the first idle (line 7) walks it."""
    assert main(["diff", str(script), "--mutant", "age-lt-1", "--context", "2"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("first divergence at event ") and "line 7: 1 idle" in lines[0]
    assert lines[1].lstrip().startswith("model") and lines[2].lstrip().startswith("C --mutant")
    assert lines[3] == "the 2 events before it (equal in both):"
    assert "the model's state before line 7:" in out and "swept_state stamp(0)" in out
    assert out.rstrip().endswith(f"replay: purgecheck diff {script} --mutant age-lt-1")


def test_json_output(script, capsys):
    assert main(["diff", str(script), "--mutant", "stamp-never-written", "--json"]) == 1
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["equal"] is False and doc["divergence"]["a"]["ev"] == "stamp"
    assert doc["divergence"]["b"]["ev"] != "stamp"


def test_traces_kept_and_compared(script, tmp_path, capsys):
    assert main(["diff", str(script), "--keep", str(tmp_path / "ok")]) == 0
    assert main(["diff", str(script), "--mutant", "walk-keeps-stamp",
                 "--keep", str(tmp_path / "bad")]) == 1
    capsys.readouterr()
    assert main(["diff", "--traces", str(tmp_path / "ok/model.jsonl"),
                 str(tmp_path / "ok/c.jsonl")]) == 0
    assert main(["diff", "--traces", str(tmp_path / "ok/model.jsonl"),
                 str(tmp_path / "bad/c.jsonl")]) == 1
    out = capsys.readouterr().out
    assert "A (model)" in out and "B (reference_c)" in out and "state before line" in out


def test_designs_and_scenarios(capsys):
    assert main(["diff", "--scenario", "inline-hold", "--variant", "handoff-only"]) == 0
    assert main(["diff", "--scenario", "wraparound", "--mutant", "age_no_modulo"]) == 1


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([".venv/bin/purgecheck", "diff", *args], capture_output=True,
                          text=True, cwd=BUILD_DIR.parent.parent)


@pytest.fixture(scope="module")
def good_traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    assert main(["diff", "--scenario", "every-third", "--keep", str(d)]) == 0
    return d


def _variants(d):
    lines = (d / "c.jsonl").read_bytes().splitlines(keepends=True)
    return {
        "bad JSON": (lines[:4] + [b"{nope\n"] + lines[5:], ":5: bad JSON"),
        "no header": (lines[1:], ":1: expected the trace header first"),
        "unknown version": ([lines[0].replace(b'"version":1', b'"version":2')] + lines[1:],
                            ":1: trace format version 2 is not known"),
        "truncated": (lines[:-1] + [lines[-1].rstrip(b"\n")], "truncated last line"),
        "unknown page": (lines[:2] + [b'{"ev":"retire","page":77}\n'] + lines[2:],
                         ":3: retire event for page 77, which does not exist"),
    }


@pytest.mark.parametrize("case", ["bad JSON", "no header", "unknown version", "truncated",
                                  "unknown page"])
def test_malformed_trace_is_one_line_and_exit_2(good_traces, tmp_path, case):
    body, words = _variants(good_traces)[case]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(body))
    r = _run_cli("--traces", str(good_traces / "model.jsonl"), str(bad))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"purgecheck diff: {bad}") and words in r.stderr


@pytest.mark.parametrize("args,words", [
    (["missing.ops"], "cannot read missing.ops"),
    (["--scenario", "nope"], "unknown scenario 'nope'"),
    (["--scenario", "every-third", "--variant", "nope"], "unknown variant 'nope'"),
    (["--scenario", "every-third", "--mutant", "nope"], "unknown mutant 'nope'"),
    ([], "give an op script"),
    (["--scenario", "every-third", "--os-page", "5000"], "--os-page: expected a power of two"),
    (["--scenario", "every-third", "--offset", "3"], "--offset: expected a multiple of 8"),
])
def test_bad_usage_is_one_line_and_exit_2(args, words):
    r = _run_cli(*args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr, r.stderr


def test_bad_op_script_names_its_line(tmp_path):
    bad = tmp_path / "bad.ops"
    bad.write_text("1 malloc a 100\n1 mallok b 100\n")
    r = _run_cli(str(bad))
    assert r.returncode == 2 and f"{bad}:2: unknown operation 'mallok'" in r.stderr


def test_missing_driver_says_how_to_build_it(script, monkeypatch, tmp_path, capsys):
    import purgecheck.conformance as conformance
    monkeypatch.setattr(conformance, "BUILD_DIR", tmp_path)
    assert main(["diff", str(script)]) == 2
    assert "make -C reference_c" in capsys.readouterr().err
