"""The `purgecheck` command line: exit codes, JSON for CI, help that teaches, bad input as one
line, and a replay command when a check fails.

DESIGN.md: "Bad input gets a clear one-line error naming the file, the line and what was
expected, and a non-zero exit; never a traceback". Most cases call `purgecheck.cli.main` in
process (fast, and a mutant can be applied around it); one runs the real program.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from model.invariants import load_registry
from purgecheck.cli import COMMANDS, main
from purgecheck.engines import load_engines
from purgecheck.mutants import MUTANTS, applied
from purgecheck.formats.ops import parse_script
from purgecheck.scenarios import SCENARIOS

load_engines()
REGISTRY = load_registry()
PAGE_INVARIANTS = sorted(i.id for i in REGISTRY.values()
                         if i.scope == "page" and i.predicate is not None)
ROOT = Path(__file__).resolve().parent.parent


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- check ------------------------------------------------------------------------------------

# The table and the JSON of one run of the engine (tests/conftest.py, engines_run_once); the
# JSON test also stands for the smoke test that was (every page invariant held, by id). With
# --quick: the scenarios engine runs the same checks at either budget, and the quick run is
# the one test_docs and test_first_hour ask for (one run in the session, not three).
def test_check_scenarios_holds(capsys, engines_run_once):
    rc, out, _ = cli(capsys, "check", "--engine", "scenarios", "--quick")
    assert rc == 0
    assert " passed, 0 failed" in out
    for inv in PAGE_INVARIANTS:
        assert inv in out


def test_a_run_kept_once_is_not_given_to_a_run_under_a_mutant(engines_run_once):
    """engines_run_once keys its runs by the mutants applied: a clean run kept first is not
    what a run under a mutant gets (keyed by the engine and the budget alone, the broken
    variant, the mutant's run would read all held)."""
    from purgecheck.engines import Budget

    glibc = load_engines()["glibc"]
    budget = Budget(quick=True)
    assert all(r.status == "hold" for r in glibc.run(budget))
    with applied(MUTANTS["glibc-split-remainder-lost"]):
        assert any(r.status == "fail" for r in glibc.run(budget))


def test_check_json_has_a_result_per_page_invariant(capsys, engines_run_once):
    rc, out, _ = cli(capsys, "check", "--engine", "scenarios", "--quick", "--json")
    assert rc == 0
    doc = orjson.loads(out)
    assert doc["ok"] is True and doc["command"] == "check"
    by_id = {r["invariant"]: r for r in doc["results"] if r["engine"] == "scenarios"}
    for inv in PAGE_INVARIANTS:
        assert by_id[inv]["status"] == "hold"
        assert int(by_id[inv]["figure"].split()[0].replace(",", "")) > 0


def test_failed_check_exits_1_and_prints_a_replay_that_reproduces(capsys, engines_run_once):
    # the engine runs once under the mutant (the table's check); the JSON is of that run
    with applied(MUTANTS["huge-purges"]):
        rc, out, _ = cli(capsys, "check", "--engine", "scenarios", "--quick")
        assert rc == 1
        assert "FAIL PG-HUGE-NEVER-PURGE" in out
        replay = [line.split("replay:", 1)[1].split() for line in out.splitlines()
                  if "replay:" in line]
        assert ["purgecheck", "scenario", "huge-never"] in replay
        # The replay command fails the same way while the rule is broken ...
        rc, _, err = cli(capsys, "scenario", "huge-never")
        assert rc == 1 and "PG-HUGE-NEVER-PURGE" in err
        rc, out, _ = cli(capsys, "check", "--engine", "scenarios", "--quick", "--json")
        doc = orjson.loads(out)
        assert rc == 1 and doc["ok"] is False
        failed = [r for r in doc["results"] if r["status"] == "fail"]
        assert failed and all(r["replay"] and r["detail"] for r in failed)
    # ... and passes once it is whole again.
    assert cli(capsys, "scenario", "huge-never")[0] == 0


# -- invariants -------------------------------------------------------------------------------

def test_invariants_json_lists_the_registry(capsys):
    rc, out, _ = cli(capsys, "invariants", "--json")
    assert rc == 0
    rows = orjson.loads(out)
    assert sorted(r["id"] for r in rows) == sorted(REGISTRY)
    for r in rows:
        assert r["statement"] and r["clause"] and r["implements"] and r["scope"]
    assert sorted(r["id"] for r in rows if r["scope"] == "page") == PAGE_INVARIANTS


def test_invariants_table(capsys):
    rc, out, _ = cli(capsys, "invariants", "--verbose")
    assert rc == 0
    assert all(inv in out for inv in PAGE_INVARIANTS)


# -- scenario ---------------------------------------------------------------------------------

def test_scenario_list_names_every_scenario(capsys):
    rc, out, _ = cli(capsys, "scenario", "--list")
    assert rc == 0
    listed = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert listed == list(SCENARIOS)


def test_scenario_every_third_prints_its_timeline(capsys):
    rc, out, err = cli(capsys, "scenario", "every-third")
    assert rc == 0 and "FAIL" not in err
    assert "1 walk" in out and "discard" in out


def test_scenario_script_round_trips(capsys):
    for name, sc in SCENARIOS.items():
        rc, out, _ = cli(capsys, "scenario", name, "--script")
        assert rc == 0
        back = parse_script(out)
        assert [(o.thread, o.name, o.args) for o in back] == \
            [(o.thread, o.name, o.args) for o in sc.ops()], name


def test_scenario_file_runs_and_json_events_parse(capsys, tmp_path):
    script = tmp_path / "mine.ops"
    script.write_text("# keep one of three\n1 malloc a 131072\n1 malloc b 131072\n"
                      "1 malloc c 131072\n1 free b\n2 free c\n1 walk\n")
    rc, out, _ = cli(capsys, "scenario", "--file", str(script))
    assert rc == 0 and "walk" in out
    rc, out, _ = cli(capsys, "scenario", "--file", str(script), "--json")
    assert rc == 0
    events = [orjson.loads(line) for line in out.splitlines()]
    assert {e["line"] for e in events} <= {2, 3, 4, 5, 6, 7}
    assert any(e["ev"] == "discard" and e["ok"] for e in events)


# -- bad usage: exit 2, one line on stderr, no traceback ------------------------------------

BAD_SCRIPTS = {
    "unknown op": ("1 malloc a 8\n1 mallok b 8\n", 2, "unknown operation 'mallok'"),
    "missing thread": ("1 malloc a 8\n\nfree a\n", 3, "free needs a thread number"),
    "wrong argument count": ("# c\n1 malloc a\n", 2, "malloc takes name size"),
    "non-integer size": ("1 malloc a 8k\n", 1, "expected integers for ['size']"),
    "unknown name": ("1 malloc a 8\n1 free b\n", 2, "no allocation named 'b'"),
    "clock back on a monotone clock": ("1 malloc a 8\nclock -30\n", 2,
                                       "clock: a monotone clock cannot go back 30 ms"),
}


def assert_one_line_usage_error(rc: int, err: str, *expect: str) -> None:
    assert rc == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for text in expect:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize("case", sorted(BAD_SCRIPTS))
def test_bad_op_script_file_names_file_and_line(capsys, tmp_path, case):
    text, line, expect = BAD_SCRIPTS[case]
    path = tmp_path / "bad.ops"
    path.write_text(text)
    rc, _, err = cli(capsys, "scenario", "--file", str(path))
    assert_one_line_usage_error(rc, err, f"{path}:{line}:", expect)


def test_op_script_that_is_not_text(capsys, tmp_path):
    path = tmp_path / "binary.ops"
    path.write_bytes(b"1 malloc a 8\n\xff\xfe\x00\x01")
    rc, _, err = cli(capsys, "scenario", "--file", str(path))
    assert_one_line_usage_error(rc, err, f"{path}:2:", "UTF-8")


@pytest.mark.parametrize("argv,expect", [
    (["scenario", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
    (["scenario"], "name a scenario"),
    (["scenario", "--file", "/nonexistent/x.ops"], "cannot read /nonexistent/x.ops"),
    (["check", "--engine", "no-such-engine"], "unknown engine 'no-such-engine'"),
])
def test_bad_usage_is_one_line(capsys, argv, expect):
    rc, _, err = cli(capsys, *argv)
    assert_one_line_usage_error(rc, err, expect)


def test_the_installed_program_reports_bad_input_without_a_traceback(tmp_path):
    path = tmp_path / "bad.ops"
    path.write_text("1 malloc a 8\n1 malloc b\n")
    proc = subprocess.run([sys.executable, "-m", "purgecheck", "scenario", "--file", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert_one_line_usage_error(proc.returncode, proc.stderr, f"{path}:2:")
    ok = subprocess.run([sys.executable, "-m", "purgecheck", "scenario", "offset-192"],
                        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0, ok.stderr


# -- help ------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_each_command_teaches_with_examples(capsys, command):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert "example" in out.lower()
    assert f"purgecheck {command}" in out


def test_top_level_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert all(command in out for command in COMMANDS)


def test_the_parser_is_built_without_importing_hypothesis():
    """Every command builds every command's parser: `purgecheck fuzz`'s needs only the names
    of the profiles and drivers, and Hypothesis (a tenth of a second) is imported when a
    machine runs."""
    import subprocess
    import sys

    code = ("import sys\nfrom purgecheck.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nprint('hypothesis' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[-1] == "False"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_alone_parses_as_among_all(command):
    """`purgecheck COMMAND ...` builds that command's parser alone (the others' modules are
    not imported: docs/record.md, fifteenth round); its help, the one place where a parser
    shows itself whole, is the same as among all the commands'."""
    from purgecheck.cli import build_parser

    def help_of(parser) -> str:
        sub = next(a for a in parser._actions if a.dest == "command")
        return sub.choices[command].format_help()
    assert help_of(build_parser(command)) == help_of(build_parser())


def test_a_command_imports_no_other_command():
    """`purgecheck replay ...` loads the replay command's module and no other command's; the
    top level's help loads them all (its list of commands)."""
    code = ("import sys\nfrom purgecheck.cli import main, COMMANDS\n"
            "for argv in (['replay', '--help'], ['--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "    print('loaded', sorted(c for c in COMMANDS\n"
            "                           if f'purgecheck.commands.{c}' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.splitlines()
    loaded = [line for line in out if line.startswith("loaded ")]
    # the replay command uses one helper of the glibc command's (collect_env) when it runs,
    # not when its parser is built
    assert loaded == ["loaded ['replay']", f"loaded {sorted(COMMANDS)}"]
