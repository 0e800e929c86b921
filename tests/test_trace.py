"""The trace format: the model's traces validate, write and read back, compare in canonical
form, stream, and every kind of malformed input is one TraceError naming the line."""

from __future__ import annotations

import io

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import purgecheck.formats.trace as trace
from purgecheck.scenarios import SCENARIOS
from purgecheck.formats.trace import (EVENTS, TraceError, TraceValidator, canonical_line, model_trace,
                              read_stream_trace, read_trace, write_trace)


def _bytes(header: dict, events: list[dict]) -> bytes:
    buf = io.BytesIO()
    write_trace(buf, header, events)
    return buf.getvalue()


def _read_all(data: bytes, source: str = "t.jsonl") -> tuple[dict, list[dict]]:
    t = read_trace(io.BytesIO(data), source)
    return t.header, list(t.events)


@pytest.fixture(scope="module")
def park_trace():
    sc = SCENARIOS["park-handoff"]
    return model_trace(sc.ops(), sc.options)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_model_trace_is_valid_and_reads_back(name):
    sc = SCENARIOS[name]
    header, events = model_trace(sc.ops(), sc.options)
    assert {e["ev"] for e in events} <= set(EVENTS)
    assert _read_all(_bytes(header, events)) == (header, events)


def test_model_addresses_are_relative_to_the_page(park_trace):
    """The C regions lie elsewhere than the model's arena: both write offsets in the page."""
    _, events = park_trace
    reserved = {e["page"]: e for e in events if e["ev"] == "page_new"}
    discards = [e for e in events if e["ev"] == "discard"]
    assert discards
    for e in discards:
        page = reserved[e["page"]]
        assert 0 <= e["addr"] and e["addr"] + e["size"] <= page["reserved"] * page["block_size"]
        assert e["addr"] == e["k0"] * page["unit"]  # blocks start at the region: base 0
    assert all("addr" not in e for e in reserved.values())


def test_canonical_form_ignores_key_order_and_error_messages():
    a = {"ev": "malloc", "page": 1, "block": 2, "zero": False, "src": "free"}
    b = dict(reversed(list(a.items())))
    assert canonical_line(a) == canonical_line(b)
    assert canonical_line({"ev": "error", "line": 3, "msg": "x"}) == \
        canonical_line({"ev": "error", "line": 3, "msg": "worded otherwise"})
    assert canonical_line({"ev": "error", "line": 3, "msg": "x"}) != \
        canonical_line({"ev": "error", "line": 4, "msg": "x"})


def test_reader_streams(park_trace):
    """Events come out before a bad line further on is reached: the reader does not read the
    whole file first."""
    header, events = park_trace
    good = _bytes(header, events).splitlines(keepends=True)
    data = b"".join(good[:-1]) + b"{broken\n" * 3 + good[-1]
    monkey_batch = trace._BATCH
    trace._BATCH = 16
    try:
        t = read_trace(io.BytesIO(data), "s.jsonl")
        it = iter(t.events)
        first = [next(it) for _ in range(10)]
        assert first == events[:10]
        with pytest.raises(TraceError) as e:
            list(it)
    finally:
        trace._BATCH = monkey_batch
    assert e.value.line == len(good)  # the first broken line


def test_reader_is_the_same_across_chunk_boundaries(park_trace, monkeypatch):
    header, events = park_trace
    data = _bytes(header, events)
    monkeypatch.setattr(trace, "_CHUNK", 97)
    monkeypatch.setattr(trace, "_BATCH", 5)
    assert _read_all(data) == (header, events)


def test_stream_reader_takes_one_trace_of_many(park_trace):
    header, events = park_trace
    data = io.BytesIO(_bytes(header, events) * 2)
    assert read_stream_trace(data.readline, "pipe") == (header, events)
    assert read_stream_trace(data.readline, "pipe") == (header, events)
    with pytest.raises(EOFError):
        read_stream_trace(data.readline, "pipe")


def _mutate(park_trace, how):
    header, events = park_trace
    lines = _bytes(header, events).splitlines(keepends=True)
    return how(lines)


MALFORMED = {
    "bad JSON": (lambda ls: ls[:5] + [b'{"ev": "malloc",\n'] + ls[6:], 6, "bad JSON"),
    "no header": (lambda ls: ls[1:], 1, "expected the trace header"),
    "unknown version": (lambda ls: [ls[0].replace(b'"version":1', b'"version":9')] + ls[1:], 1,
                        "version 9 is not known"),
    "truncated last line": (lambda ls: ls[:-1] + [ls[-1][:-5]], None, "truncated last line"),
    "cut at a line": (lambda ls: ls[:40], 41, "without its end event"),
    "unknown page": (lambda ls: ls[:3] + [b'{"ev":"retire","page":42}\n'] + ls[3:], 4,
                     "page 42, which does not exist"),
    "unknown event": (lambda ls: ls[:3] + [b'{"ev":"teleport"}\n'] + ls[3:], 4,
                      "unknown event 'teleport'"),
    "missing field": (lambda ls: ls[:2] + [b'{"ev":"malloc","page":1}\n'] + ls[2:], 3,
                      "malloc event lacks block, src, zero"),
    "not an object": (lambda ls: ls[:2] + [b"[1, 2]\n"] + ls[2:], 3, "expected an event object"),
    "lin of a wrong kind": (lambda ls: ls[:2] + [ls[2].rstrip(b"}\n") + b',"lin":"x"}\n'] + ls[3:],
                            3, "got `str` - at `$.lin`"),
    "page null": (lambda ls: ls[:2] + [ls[2].replace(b'"page":1', b'"page":null')] + ls[3:], 3,
                  "got `null` - at `$.page`"),
    "count off": (lambda ls: ls[:3] + ls[4:], None, "the end event counts"),
    "after the end": (lambda ls: ls + [b'{"ev":"clock","now":5}\n'], None, "nothing after"),
    "empty": (lambda ls: [], 1, "empty file"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_traces_name_file_line_and_expectation(park_trace, case):
    how, line, words = MALFORMED[case]
    data = b"".join(_mutate(park_trace, how))
    with pytest.raises(TraceError) as e:
        _read_all(data, "bad.jsonl")
    assert e.value.source == "bad.jsonl" and words in e.value.msg
    n_lines = data.count(b"\n")
    assert e.value.line == (line if line is not None else e.value.line)
    assert 1 <= e.value.line <= n_lines + 1
    assert str(e.value).startswith(f"bad.jsonl:{e.value.line}: ")


def test_validator_checks_each_required_field_of_each_event():
    v = TraceValidator("x")
    v.check_header({"format": trace.FORMAT, "version": trace.VERSION,
                    "config": {k: 0 for k in trace.CONFIG_KEYS}}, 1)
    v.check_event({"ev": "page_new", "page": 1, "page_kind": "large", "block_size": 8,
                   "reserved": 1, "unit": 4096}, 2)
    for kind, fields in EVENTS.items():
        if kind in ("end", "page_new"):
            continue
        full = {"ev": kind, **{f: 1 for f in fields}}
        v.check_event(dict(full), 3)
        for f in fields:
            broken = {k: x for k, x in full.items() if k != f}
            with pytest.raises(TraceError, match=f"lacks {f}"):
                v.check_event(broken, 4)


def test_config_header_describes_the_run():
    from model.geometry import ARCH32
    from model.world import Options
    cfg = trace.config_of(Options(arch=ARCH32, os_page_size=16384, variant="clock"))
    assert cfg["page_kinds"]["large"] == 1 << 20 and cfg["os_page_size"] == 16384
    assert trace.options_of(cfg) == Options(arch=ARCH32, os_page_size=16384, variant="clock")


def test_ops_replay_from_a_trace(park_trace):
    sc = SCENARIOS["park-handoff"]
    assert trace.ops_of_events(park_trace[1]) == sc.ops()


def test_model_trace_ends_with_an_error_event_where_the_script_fails():
    from purgecheck.formats.ops import parse_script
    from model.world import Options
    ops = parse_script("1 malloc a 100\n1 reclaim a\n1 walk\n")  # a runtime condition
    _, events = model_trace(ops, Options())
    assert events[-1] == {"ev": "error", "line": 2,
                          "msg": "reclaim: the page of 'a' is not abandoned"}
    assert orjson.dumps(events)  # every field serialises


def _int_range_by_one_search(first: int, lines: list[bytes]) -> tuple[int, str] | None:
    """What _check_int_range answers, the slow way: _LONG_INT searched over the whole batch
    (the reader before it searched only the lines with a run of 19 digits)."""
    blob = b"\n".join(lines)
    for m in trace._LONG_INT.finditer(blob):
        if not trace.INT_RANGE[0] <= int(m.group()) <= trace.INT_RANGE[1]:
            return first + blob.count(b"\n", 0, m.start()), m.group().decode()[:20]
    return None


_WORDS = st.sampled_from([b"1" * 19, b"9" * 20, b"18446744073709551615", b"18446744073709551616",
                          b"-9223372036854775808", b"-9223372036854775809", b"-", b".", b"e",
                          b"x", b'"', b",", b" ", b"0", b"12", b"123456789012345678"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_WORDS, max_size=8).map(b"".join), min_size=1, max_size=12),
       st.integers(1, 10_000))
def test_int_range_check_finds_what_one_search_over_the_batch_finds(lines, first):
    v = TraceValidator("t.jsonl")
    want = _int_range_by_one_search(first, lines)
    try:
        trace._check_int_range(v, first, lines)
        got = None
    except TraceError as e:
        got = (e.line, e.msg.split("integer ", 1)[1].split("...", 1)[0])
        assert "outside the 64-bit range -2^63..2^64-1" in e.msg
    assert got == want
