"""The docs' examples are commands that run (issue 30): every `purgecheck ...` line of a code
block in docs/ and README.md, and of each command's --help examples, is parsed by the
command line and each name it gives (a workload, design, glibc version, variant, machine,
mutant, scenario, engine) is one the command takes: `simulate --version rfc`, refused by
the command, was in docs/simulate-guide.md. Cheap: nothing is run but the parser and the
name look-ups; a name that stands for the reader's own (my.ops, my-change) is listed below.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from purgecheck.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
# names in the examples that stand for the reader's own: a file, a mutant they add, a blob
READERS_OWN = {"my-change", "AXicY3Bk...", "my-app.js"}
COMMAND = re.compile(r"\s*(?:\$ )?(purgecheck \S.*)")


def example_lines() -> list[tuple[str, str]]:
    """(where, command line) of every example: the code blocks of the docs, the --help
    epilogs; a line's comment (after two spaces or #) is not part of it."""
    found = []
    for path in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        block = False
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("```"):
                block = not block
            elif block and (m := COMMAND.match(line)):
                found.append((f"{path.relative_to(ROOT)}:{n}", m.group(1)))
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        for line in (p.epilog or "").splitlines():
            if m := COMMAND.match(line):
                found.append((f"purgecheck {name} --help", m.group(1)))
    return [(where, re.split(r"\s{2,}", text)[0]) for where, text in found]


def names_taken() -> dict[tuple[str, str], set[str]]:
    """(command, argument) -> the names the command takes there, from where it reads them."""
    from model.variants import VARIANTS
    from purgecheck.engines import load_engines
    from purgecheck.fuzz import machine_names
    from purgecheck.glibc.workloads import WORKLOADS as GLIBC_SCRIPTS
    from purgecheck.measure.designs import DESIGNS as MEASURED
    from purgecheck.measure.workloads import WORKLOADS as MEASURED_WORKLOADS
    from purgecheck.mutants import MUTANTS
    from purgecheck.scenarios import SCENARIOS
    from purgecheck.simulate import glibc_versions, glibc_workloads
    from purgecheck.simulate.mimalloc import DESIGNS, FLOOR
    from purgecheck.simulate.workloads import WORKLOADS

    engines, mutants, variants = set(load_engines()), set(MUTANTS), set(VARIANTS)
    return {
        ("check", "engine"): engines, ("mutants", "engine"): engines,
        ("mutants", "only"): mutants, ("fuzz", "mutant"): mutants, ("diff", "mutant"): mutants,
        ("fuzz", "machine"): set(machine_names()), ("fuzz", "variant"): variants | {"all"},
        ("scenario", "variant"): variants, ("diff", "variant"): variants,
        ("scenario", "name"): set(SCENARIOS), ("diff", "scenario"): set(SCENARIOS),
        ("simulate", "version"): set(glibc_versions()),
        ("simulate", "design"): {*DESIGNS, FLOOR},
        ("simulate", "workload"): {*WORKLOADS, *glibc_workloads()},
        ("glibc", "workload"): set(GLIBC_SCRIPTS),
        ("measure", "workload"): set(MEASURED_WORKLOADS), ("measure", "design"): set(MEASURED),
    }


def is_a_file(name: str) -> bool:
    """A positional argument that names a file of the reader's (my.ops, py.rec, cc.rec.4242)."""
    return "." in name or "/" in name


EXAMPLES = example_lines()


def test_the_examples_are_found():
    where = {w.split(":")[0] for w, _ in EXAMPLES}
    assert len(EXAMPLES) > 60 and "docs/simulate-guide.md" in where
    assert any(w.endswith("--help") for w in where)


@pytest.mark.parametrize("where,line", EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_a_documented_command_is_one_the_command_line_takes(where, line):
    check_example(line)


def words(line: str) -> list[str]:
    """The command's own words: up to a shell operator (> out, && next, | pipe, ;) or a
    continuation backslash (the next line carries on the example's options)."""
    lexer = shlex.shlex(line.rstrip("\\ "), posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    out = []
    for word in lexer:
        if word and set(word) <= set("<>&|;()"):
            break
        out.append(word)
    return out


def check_example(line: str) -> None:
    argv = words(line)[1:]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = build_parser().parse_args(argv)
    except SystemExit as e:
        assert not e.code, f"{line}: {err.getvalue().strip().splitlines()[-1]}"
        return  # --help, --version
    for (command, attr), known in names_taken().items():
        if args.command != command or getattr(args, attr, None) is None:
            continue
        given = getattr(args, attr)
        for name in given if isinstance(given, list) else [given]:
            if name in READERS_OWN or (attr in ("workload", "name") and is_a_file(name)):
                continue
            assert name in known, f"{line}: {attr} {name!r} is not one of {sorted(known)}"


def test_a_refused_name_in_an_example_is_caught():
    """The example the issue found, as it was: the check fails on it."""
    with pytest.raises(AssertionError, match="version 'rfc'"):
        check_example("purgecheck simulate bench-free --version 2.21 --version rfc")
    with pytest.raises(AssertionError, match="--nope"):
        check_example("purgecheck simulate bench-free --nope")
