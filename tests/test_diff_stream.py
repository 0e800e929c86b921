"""`diff --traces` on two trace files (purgecheck.conformance.compare_traces): lines that are
byte for byte the same are checked once, for A, and B's reader takes up A's state; the
outcome is always the one `compare` gives on the traces read as dicts."""

from __future__ import annotations

import io

import orjson
import pytest

import purgecheck.formats.trace as trace
from purgecheck.conformance import compare, compare_traces
from purgecheck.scenarios import SCENARIOS
from purgecheck.formats.trace import TraceError, Trace, model_trace, read_trace, write_trace
from purgecheck.formats.tracegen import generate


def _bytes(header: dict, events: list[dict]) -> bytes:
    buf = io.BytesIO()
    write_trace(buf, header, events)
    return buf.getvalue()


def _sequential() -> bytes:
    sc = SCENARIOS["park-handoff"]
    return _bytes(*model_trace(sc.ops(), sc.options))


def _linearized() -> bytes:
    buf = io.BytesIO()
    generate(buf, 2000, seed=3)
    return buf.getvalue()


TRACES = {"sequential": _sequential(), "linearized": _linearized()}


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _both(a: bytes, b: bytes):
    """compare_traces and compare on the same two files: their outcomes, which must agree."""
    ta, tb = read_trace(io.BytesIO(a), "a.jsonl"), read_trace(io.BytesIO(b), "b.jsonl")
    fast, count = compare_traces(ta, tb, context=3)
    ta, tb = read_trace(io.BytesIO(a), "a.jsonl"), read_trace(io.BytesIO(b), "b.jsonl")
    plain = compare(ta.header, ta.events, tb.header, tb.events, context=3)
    assert (fast is None) == (plain is None)
    if fast is not None:
        assert (fast.index, fast.a, fast.b, fast.before, fast.op) == \
            (plain.index, plain.a, plain.b, plain.before, plain.op)
    return fast, count


def _reordered(line: bytes) -> bytes:
    """The same event with its keys in another order: equal in canonical form, other bytes."""
    return orjson.dumps(dict(reversed(list(orjson.loads(line).items()))))


def _edit(lines: list[bytes], i: int, **change) -> list[bytes]:
    ev = orjson.loads(lines[i])
    ev.update(change)
    return lines[:i] + [orjson.dumps(ev)] + lines[i + 1:]


@pytest.fixture(params=[False, True], ids=["batches", "small-batches"])
def small(request, monkeypatch):
    """Also with tiny chunks and batches, so that the batches of A and B fall differently."""
    if request.param:
        monkeypatch.setattr(trace, "_CHUNK", 97)
        monkeypatch.setattr(trace, "_BATCH", 5)


@pytest.mark.parametrize("kind", list(TRACES))
def test_equal_traces_are_equal_and_counted(kind, small):
    data = TRACES[kind]
    n = len(_lines(data)) - 2
    header = orjson.loads(_lines(data)[0])
    header["producer"] = {"name": "other"}  # not compared: the headers differ in bytes
    other = _join([orjson.dumps(header)] + _lines(data)[1:])
    assert _both(data, data) == (None, n)
    assert _both(data, other) == (None, n)


@pytest.mark.parametrize("kind", list(TRACES))
def test_lines_that_differ_only_in_bytes_are_equal(kind, small):
    lines = _lines(TRACES[kind])
    some = [lines[0]] + [_reordered(x) if i % 7 == 3 else x for i, x in enumerate(lines[1:])]
    assert _both(TRACES[kind], _join(some))[0] is None


@pytest.mark.parametrize("kind", list(TRACES))
@pytest.mark.parametrize("where", [0.01, 0.5, 0.99])
def test_a_changed_event_is_the_first_divergence(kind, where, small):
    lines = _lines(TRACES[kind])
    i = max(1, int(len(lines) * where))
    while orjson.loads(lines[i])["ev"] in ("end", "page_new", "clock", "error"):
        i -= 1
    changed = _edit(lines, i, mark=1)  # one more field: compared too
    div, _ = _both(TRACES[kind], _join(changed))
    assert div is not None and div.index == i - 1 and div.b["mark"] == 1
    assert div.before == [orjson.loads(x) for x in lines[max(1, i - 3):i]]


@pytest.mark.parametrize("kind", list(TRACES))
def test_a_trace_that_goes_on_or_stops_short(kind, small):
    lines = _lines(TRACES[kind])
    n = len(lines) - 2
    end = orjson.loads(lines[-1])
    longer = lines[:-1] + [lines[-2], orjson.dumps({**end, "events": n + 1})]
    shorter = lines[:-2] + [orjson.dumps({**end, "events": n - 1})]
    for a, b in ((lines, longer), (longer, lines), (lines, shorter), (shorter, lines)):
        div, _ = _both(_join(a), _join(b))
        assert div is not None and div.index == min(len(a), len(b)) - 2
        assert (div.a is None) == (len(a) < len(b)) and (div.b is None) == (len(b) < len(a))


def test_b_takes_up_the_pages_a_has_read(monkeypatch):
    """B's lines after a stretch equal to A's name a page made in that stretch: B's reader
    knows it only by taking up A's state. Shown to matter: without it, B is refused."""
    monkeypatch.setattr(trace, "_BATCH", 16)  # the change is batches after the start
    lines = _lines(TRACES["sequential"])
    last = len(lines) - 2
    b = _join(_edit(lines, last, mark=1))
    div, _ = _both(TRACES["sequential"], b)
    assert div is not None and div.index == last - 1
    monkeypatch.setattr(Trace, "caught_up", lambda self, other: None)
    with pytest.raises(TraceError, match="which does not exist"):
        compare_traces(read_trace(io.BytesIO(TRACES["sequential"]), "a.jsonl"),
                       read_trace(io.BytesIO(b), "b.jsonl"))


@pytest.mark.parametrize("side", ["a", "b"])
def test_bad_input_after_equal_lines_names_its_file_and_line(side, small):
    lines = _lines(TRACES["sequential"])
    i = len(lines) - 5
    bad = _join(lines[:i] + [b'{"ev":"retire","page":77}'] + lines[i:])
    a, b = (bad, TRACES["sequential"]) if side == "a" else (TRACES["sequential"], bad)
    with pytest.raises(TraceError) as e:
        compare_traces(read_trace(io.BytesIO(a), "a.jsonl"),
                       read_trace(io.BytesIO(b), "b.jsonl"))
    assert str(e.value) == f"{side}.jsonl:{i + 1}: retire event for page 77, which does not " \
                           f"exist (no page_new for it before this line)"


@pytest.mark.parametrize("how,words", [
    (lambda d: d[:-3], "truncated last line"),  # the end event cut short
    (lambda d: _join(_edit(_lines(d), 1500, page=33)), "page 33, which does not exist"),
])
def test_a_bad_file_given_twice_is_bad_input(how, words):
    """Equal lines are checked once, not skipped: a broken trace against itself is refused."""
    bad = how(TRACES["linearized"])
    with pytest.raises(TraceError, match=f"a.jsonl:.*{words}"):
        compare_traces(read_trace(io.BytesIO(bad), "a.jsonl"),
                       read_trace(io.BytesIO(bad), "b.jsonl"))
