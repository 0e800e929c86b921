"""Op scripts: the parser, its errors, the round trip, and docs/op-script.md kept in step.

The table of docs/op-script.md is checked against `purgecheck.formats.ops.SPECS`: the form of each op
is built here from its spec, so a new op without a row (or a row for an op that is gone)
fails this file. The examples of the doc are run on the model with every page invariant.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.invariants import check_page, load_registry
from purgecheck.formats.ops import (ADVANCE_STEPS, RANGES, SPECS, Op, OpScriptError, parse_line, parse_script,
                                    render_script)
from purgecheck.runner import HANDLERS, run_ops
from purgecheck.scenarios import SCENARIOS

DOC = Path(__file__).resolve().parent.parent / "docs" / "op-script.md"


def sample_args(spec) -> list[str]:
    return ["0x1000" if t is int else ADVANCE_STEPS[k] if kind == "step" else f"n{k}"
            for k, (t, kind) in enumerate(zip(spec.arg_types, spec.kinds))]


def doc_form(spec) -> str:
    """The form column of the op's row: `T` for a threaded op, then the op and its
    argument names in capitals."""
    return " ".join((["T"] if spec.threaded else []) + [spec.name]
                    + [a.upper() for a in spec.arg_names])


# -- parsing ---------------------------------------------------------------------------------

def test_parse_line_reads_thread_op_and_typed_args():
    op = parse_line("  2   realloc a b 0x20000   # grow", 7, "f.ops")
    assert op == Op(2, "realloc", ("a", "b", 0x20000), 7)
    assert parse_line("fail_discard 3") == Op(None, "fail_discard", (3,), 0)
    assert parse_line("1 malloc a 128_000").args == ("a", 128000)


@pytest.mark.parametrize("text", ["", "   ", "# only a comment", "\t# indented comment"])
def test_blank_lines_and_comments_are_no_op(text):
    assert parse_line(text) is None


def test_parse_script_keeps_the_source_line_numbers():
    ops = parse_script("# header\n\n1 malloc a 8\n  # note\n1 free a\n")
    assert [(op.line, op.name) for op in ops] == [(3, "malloc"), (5, "free")]


def test_every_op_renders_and_parses_back():
    for spec in SPECS.values():
        line = " ".join((["3"] if spec.threaded else []) + [spec.name] + sample_args(spec))
        op = parse_line(line, 1)
        assert op.thread == (3 if spec.threaded else None)
        assert [type(a) for a in op.args] == list(spec.arg_types)
        assert parse_line(op.render(), 1) == op


@st.composite
def scripts(draw):
    ops = []
    for _ in range(draw(st.integers(0, 12))):
        spec = draw(st.sampled_from(sorted(SPECS.values(), key=lambda s: s.name)))
        thread = draw(st.integers(0, 9)) if spec.threaded else None
        args = tuple(draw(st.integers(*RANGES[k])) if k in RANGES
                     else draw(st.sampled_from(ADVANCE_STEPS)) if k == "step"
                     else draw(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True))
                     for k in spec.kinds)
        ops.append(Op(thread, spec.name, args))
    return ops


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(scripts())
def test_render_script_round_trips(ops):
    back = [parse_line(line, n) for n, line in enumerate(render_script(ops).splitlines(), 1)]
    assert [(o.thread, o.name, o.args) for o in back] == [(o.thread, o.name, o.args) for o in ops]


def test_named_scenarios_round_trip():
    for sc in SCENARIOS.values():
        ops = sc.ops()
        back = parse_script(render_script(ops))
        assert [(o.thread, o.name, o.args) for o in back] == \
            [(o.thread, o.name, o.args) for o in ops], sc.name


# -- errors: one line naming the source, the line and what was expected ----------------------

@pytest.mark.parametrize("text,expect", [
    ("1 mallok a 8", "unknown operation 'mallok'; expected one of"),
    ("malloc a 8", "malloc needs a thread number first: '1 malloc name size'"),
    ("1 fail_discard 2", "fail_discard is global: write it without a thread"),
    ("1 malloc a", "malloc takes name size, got 1 argument(s)"),
    ("1 free a b", "free takes name, got 2 argument(s)"),
    ("1 walk now", "walk takes no arguments, got 1 argument(s)"),
    ("1 malloc a big", "malloc: expected integers for ['size']"),
    ("1 malloc a 010", "malloc: expected integers for ['size']"),
    ("fail_discard 1.5", "fail_discard: expected integers for ['count']"),
    ("7", "expected an operation after the thread number"),
])
def test_bad_lines_name_source_line_and_expectation(text, expect):
    with pytest.raises(OpScriptError) as e:
        parse_script(f"# first\n1 malloc ok 8\n{text}\n", source="bad.ops")
    assert e.value.source == "bad.ops" and e.value.line == 3
    assert str(e.value).startswith("bad.ops:3: ")
    assert expect in e.value.msg
    assert "\n" not in str(e.value)


def test_unknown_operation_lists_every_op():
    with pytest.raises(OpScriptError) as e:
        parse_line("1 nope", 1)
    assert all(name in e.value.msg for name in SPECS)


def test_runner_reports_an_unknown_name_at_its_line():
    with pytest.raises(OpScriptError) as e:
        run_ops(parse_script("1 malloc a 8\n\n1 free b\n", "run.ops"), source="run.ops")
    assert (e.value.source, e.value.line) == ("run.ops", 3)
    assert "no allocation named 'b'" in e.value.msg


def test_every_op_has_a_model_handler():
    assert sorted(set(SPECS) - set(HANDLERS)) == []
    with pytest.raises(OpScriptError, match="no handler"):
        run_ops([Op(1, "not-an-op", (), 4)])


# -- docs/op-script.md ------------------------------------------------------------------------

def doc_rows() -> dict[str, str]:
    """op -> form, from every table row of the doc that starts with an op in backquotes."""
    rows = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|", line)
        if m:
            assert m.group(1) not in rows, f"two rows for {m.group(1)}"
            rows[m.group(1)] = m.group(2)
    return rows


def test_doc_has_a_row_for_every_op():
    rows = doc_rows()
    missing = [name for name in SPECS if name not in rows]
    assert not missing, f"docs/op-script.md has no row for {missing}"
    for name, spec in SPECS.items():
        assert rows[name] == doc_form(spec), f"the row of {name} says {rows[name]!r}, " \
                                             f"the spec {doc_form(spec)!r}"


def test_doc_has_no_row_for_an_op_that_does_not_exist():
    stale = sorted(set(doc_rows()) - set(SPECS))
    assert not stale, f"docs/op-script.md describes ops that are not in SPECS: {stale}"


def test_doc_error_examples_are_what_the_parser_says():
    """The doc's sample errors are lines 3-6 of a my.ops with these lines in it."""
    inputs = {3: "1 mallok a 8", 4: "free a1", 5: "1 malloc a", 6: "1 malloc a big"}
    shown = re.findall(r"^(my\.ops:(\d+): .*)$", DOC.read_text(), re.M)
    assert sorted(int(n) for _, n in shown) == sorted(inputs)
    for text, n in shown:
        with pytest.raises(OpScriptError) as e:
            parse_line(inputs[int(n)], int(n), "my.ops")
        if text.endswith("..."):
            assert str(e.value).startswith(text[:-3])
        else:
            assert str(e.value) == text


def test_doc_examples_run_clean_on_the_model():
    load_registry()
    blocks = re.findall(r"```ops\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 3
    for n, block in enumerate(blocks, 1):
        failures = []

        def after(op, world):
            for page in world.pages.values():
                failures.extend((op.line, inv, why) for inv, why in check_page(page))

        run = run_ops(parse_script(block, f"example {n}"), after_step=after,
                      source=f"example {n}")
        assert not failures, f"example {n}: {failures[:3]}"
        assert any(e["ev"] == "discard" and e["ok"] for e in run.world.log), \
            f"example {n} discards nothing"


@pytest.mark.parametrize("line,msg", [
    ("1 malloc a -5", "malloc: size must be 0 or more, got -5"),
    ("scavenger -10", "scavenger: ms must be 0 or more, got -10"),
    ("-1 malloc a 5", "thread -1: thread numbers are 0 or more"),
])
def test_negative_sizes_counts_and_threads_are_refused(line, msg):
    with pytest.raises(OpScriptError) as e:
        parse_line(line, 4, "neg.ops")
    assert e.value.msg == msg and e.value.line == 4


def test_clock_may_step_back_as_an_op():
    assert parse_line("clock -30").args == (-30,)
