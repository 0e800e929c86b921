"""The docs' examples run (issue 30, 6): every `purgecheck ...` example of docs/, README.md and
the --help epilogs (tests/test_doc_examples.py finds them and checks their names) is run here,
in the order the docs give them, in a folder with the reader's files the examples name (an op
script, a call trace, a SQL script, ...), and must exit as the docs say: 0, or the code listed
in EXITS with why. The examples make test cannot run (minutes of work, the real Bun, a
scheduler on the reader's host) are listed in NOT_RUN, each with where it is run instead; a
new example is run unless it is listed there.

They run in-process (the command line's `main`), a shell's `>`, `&&` and `;` taken as a shell
would: a run of all of them costs about a second of parsing and a few of work each.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from purgecheck.cli import main
from test_doc_examples import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent

# pattern (re.search on the example) -> why make test does not run it, and what does
NOT_RUN = {
    r"^purgecheck check\b": "the main job, minutes: `make check` runs it, tests/test_first_hour.py "
                            "one engine",
    r"^purgecheck fuzz\b": "fuzzing for its budget (minutes): tests/test_fuzz_machines.py runs "
                           "each machine at a small one",
    r"^purgecheck measure (?!--list$)": "the real Bun, tens of seconds a design: "
                                        "tests/test_measure.py",
    r"^purgecheck mutants (?!--list$)": "the kill matrix, minutes: `make check` runs it",
    r"^purgecheck prove(?! --list$)": "every proof or twin named, a minute or more: `make "
                                      "check`, tests/test_proofs_*.py",
    r"^purgecheck docs(?! --help)": "regenerates every page, a minute: `make check` and "
                                    "tests/test_docs.py",
    r"^purgecheck simulate --seeds": "every seed table, minutes: tests/test_claims.py",
    r"^purgecheck simulate bun-serve( --json)?$": "every design on the full workload: "
                                                  "tests/test_simulate.py at a small scale",
    r"cc\.rec\.4242": "4242 stands for the pid of the reader's own recording",
    r"xz -T2 -1 -c big\.file|xz\.rec": "xz on a file of the reader's: tests/test_record.py "
                                       "records xz -T2",
}
# example -> the exit code the docs show, and why it is not 0
EXITS = {
    "purgecheck scenario inline-hold --variant handoff-only":
        (1, "the guide shows a design that breaks the hold: the scenario fails"),
}
# the reader's files the examples name, made before they run
SQL = "create table t(x); insert into t values (1), (2); select sum(x) from t;\n"
PROGRAM = "import json\nprint(len(json.dumps(list(range(10**4)))))\n"
SOURCE = "int square(int x) { return x * x; }\n"


def not_run(line: str) -> str | None:
    return next((why for pattern, why in NOT_RUN.items() if re.search(pattern, line)), None)


def call_format_example() -> str:
    """The call trace the guide shows under "The call format": the reader's my.calls."""
    text = (ROOT / "docs" / "simulate-guide.md").read_text()
    section = text[text.index("## The call format"):]
    return section.split("```")[1].lstrip("\n")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A working folder with the reader's files: my.ops and fork.ops (an op script), traces
    of the model and the C reference (A.jsonl, B.jsonl, run.jsonl), my.calls, script.sql, prog.py, model.c, and the project's tests/ (the guide replays
    tests/data/xz-T2.rec from the project's root)."""
    d = tmp_path_factory.mktemp("examples")
    with contextlib.chdir(d):
        assert run_line("purgecheck scenario every-third --script > my.ops") == [0]
        assert run_line("purgecheck diff my.ops --keep kept/") == [0]
    (d / "fork.ops").write_text((d / "my.ops").read_text())
    for name, kept in (("A.jsonl", "model"), ("B.jsonl", "c"), ("run.jsonl", "c")):
        (d / name).write_text((d / "kept" / f"{kept}.jsonl").read_text())
    (d / "my.calls").write_text(call_format_example())
    (d / "script.sql").write_text(SQL)
    (d / "prog.py").write_text(PROGRAM)
    (d / "model.c").write_text(SOURCE)
    (d / "tests").symlink_to(ROOT / "tests")
    return d


def run_line(line: str) -> list[int]:
    """Run an example as a shell would (`a && b`, `a; b`, `a > file`): the exit code of
    each command run, `purgecheck` ones in-process, others (python3 ...) not supported."""
    lexer = shlex.shlex(line.rstrip("\\ "), posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    words = list(lexer)
    codes: list[int] = []
    command: list[str] = []
    for word in words + [";"]:
        if word not in (";", "&&"):
            command.append(word)
            continue
        codes.append(run_command(command))
        command = []
        if word == "&&" and codes[-1] != 0:
            break
    return codes


def run_command(words: list[str]) -> int:
    out_file = None
    if ">" in words:
        i = words.index(">")
        words, out_file = words[:i], words[i + 1]
    assert words[0] == "purgecheck", f"not a purgecheck command: {words}"
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(words[1:])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if out_file:
        Path(out_file).write_bytes(raw.getvalue())
    return code or 0


def runnable() -> list[tuple[str, str]]:
    """(where, line) of the examples make test runs: each line once, in the docs' order."""
    seen: dict[str, str] = {}
    for where, line in EXAMPLES:
        if line.rstrip().endswith("\\"):
            continue  # carries on in the next line: an example of options, not a command
        if not_run(line) is None and line not in seen:
            seen[line] = where
    return [(where, line) for line, where in seen.items()]


def test_every_example_runs_or_says_why_not():
    ran, skipped = runnable(), [line for _, line in EXAMPLES if not_run(line)]
    assert len(ran) >= 50 and skipped, (len(ran), len(skipped))
    for pattern in NOT_RUN:  # a reason for no example is out of date
        assert any(re.search(pattern, line) for _, line in EXAMPLES), pattern
    for line in EXITS:
        assert line in {l for _, l in ran}, f"EXITS names an example that is not run: {line}"


def test_the_examples_run_as_the_docs_show(folder):
    """One test for all of them: they run in order (record makes py.rec, replay reads it)."""
    wrong = []
    with contextlib.chdir(folder):
        for where, line in runnable():
            expected = EXITS.get(line, (0, ""))[0]
            codes = run_line(line)
            if codes[-1] != expected or any(codes[:-1]):
                wrong.append(f"{where}: {line!r} exited {codes}, the docs show {expected}")
    assert not wrong, "\n".join(wrong)


def test_a_broken_example_is_caught(folder):
    """The example the examples' run found (docs/guide.md gave a proof's name that is an
    invariant's): run, it exits 2, as a wrong example must be seen to."""
    with contextlib.chdir(folder):
        assert run_line("purgecheck scenario no-such-scenario") == [2]
        assert run_line("purgecheck invariants > inv.txt && purgecheck scenario nope") == [0, 2]
        assert "EP-NO-SHORT-EPOCH" in Path("inv.txt").read_text()
