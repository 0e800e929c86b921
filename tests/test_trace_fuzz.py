"""Malformed traces given to `validate` and `diff`: one clear line naming the file, the line and
what was expected, exit 2, never a traceback.

The named cases are the kinds of bad input (bad JSON, a missing or unknown header, an unknown
version, a truncated last line, an unknown event, an event for a page or a thread that does
not exist, a clock going back where the header says it is monotone); the fuzzer makes bad
inputs by mutating good traces (a sequential one of the model and a linearized one) at
random, a few hundred in `make test` and 10,000 in the slow profile, and checks that each is
either bad input with a one-line message naming the file, or a verdict (a mutation may leave a
trace that is well formed).
"""

from __future__ import annotations

import io
import random

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.conformance import compare, compare_traces
from model.world import Options
from purgecheck.formats.ops import parse_script
from purgecheck.formats.trace import TraceError, model_trace, read_trace, write_trace
from purgecheck.formats.tracegen import generate
from purgecheck.validate import validate_stream


SCRIPT = """1 malloc a 262144
1 malloc b 262144
1 free b
clock 150
1 idle
1 pending
2 malloc c 262144
2 malloc d 262144
2 free d
2 park
scavenge
clock 120
scavenge
2 unpark
clock 200
1 idle
"""


def sequential_trace() -> bytes:
    buf = io.BytesIO()
    write_trace(buf, *model_trace(parse_script(SCRIPT, "fuzz.ops"), Options()))
    return buf.getvalue()


def linearized_trace() -> bytes:
    buf = io.BytesIO()
    generate(buf, 300, seed=7)
    return buf.getvalue()


GOOD = {"sequential": sequential_trace(), "linearized": linearized_trace()}


def validate_bytes(data: bytes, name: str = "bad.jsonl"):
    return validate_stream(io.BytesIO(data), name)


def diff_bytes(a: bytes, b: bytes, names: tuple[str, str] = ("bad.jsonl", "good.jsonl")):
    """`diff --traces` (compare_traces), checked against `compare` of the traces as dicts:
    the same bad input, or the same first divergence."""
    def fast():
        ta, tb = read_trace(io.BytesIO(a), names[0]), read_trace(io.BytesIO(b), names[1])
        return compare_traces(ta, tb)[0]

    def plain():
        ta, tb = read_trace(io.BytesIO(a), names[0]), read_trace(io.BytesIO(b), names[1])
        return compare(ta.header, ta.events, tb.header, tb.events)

    outcomes = []
    for run in (fast, plain):
        try:
            div = run()
            outcomes.append(div and (div.index, div.a, div.b, div.before, div.op))
        except TraceError as e:
            outcomes.append(e)
    assert str(outcomes[0]) == str(outcomes[1]), outcomes
    if isinstance(outcomes[0], TraceError):
        raise outcomes[0]
    return outcomes[0]


def lines_of(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def edit_event(data: bytes, pred, change) -> bytes:
    lines = lines_of(data)
    for i, line in enumerate(lines[1:], 1):
        ev = orjson.loads(line)
        if pred(ev):
            change(ev)
            lines[i] = orjson.dumps(ev)
            return join(lines)
    raise AssertionError("no such event")


def edit_header(data: bytes, change) -> bytes:
    lines = lines_of(data)
    header = orjson.loads(lines[0])
    change(header)
    lines[0] = orjson.dumps(header)
    return join(lines)


# -- the named kinds of bad input -----------------------------------------------------------------

def _unknown_version(h):
    h["version"] = 99


def _no_config_key(h):
    del h["config"]["interval_ms"]


def _not_linearized(h):
    del h["producer"]["linearized"]


NAMED = {
    "empty file": (lambda d: b"", "empty"),
    "bad JSON": (lambda d: d.replace(b'"ev":"sweep_begin"', b'"ev":sweep_begin', 1), "bad JSON"),
    "no header": (lambda d: join(lines_of(d)[1:]), "expected the trace header first"),
    "unknown header": (lambda d: edit_header(d, lambda h: h.update(format="other")),
                       "expected format 'purgecheck-trace'"),
    "unknown version": (lambda d: edit_header(d, _unknown_version), "version 99 is not known"),
    "config lacks a key": (lambda d: edit_header(d, _no_config_key), "config lacks interval_ms"),
    "truncated last line": (lambda d: d[:-7], "truncated last line"),
    "no end event": (lambda d: join(lines_of(d)[:-1]), "without its end event"),
    "unknown event": (lambda d: edit_event(d, lambda ev: ev["ev"] == "sweep_page",
                                           lambda ev: ev.update(ev="sweep_paje")),
                      "unknown event 'sweep_paje'"),
    "event lacks a field": (lambda d: edit_event(d, lambda ev: ev["ev"] == "idle",
                                                 lambda ev: ev.pop("epoch")),
                            "idle event lacks epoch"),
    "page that does not exist": (lambda d: edit_event(d, lambda ev: ev["ev"] == "sweep_page",
                                                      lambda ev: ev.update(page=77)),
                                 "page 77, which does not exist"),
}
SEQUENTIAL_ONLY = {
    "thread that does not exist": (lambda d: edit_event(d, lambda ev: ev["ev"] == "park",
                                                        lambda ev: ev.update(thread=9)),
                                   "thread 9, which does not exist"),
    "clock going back": (lambda d: edit_event(d, lambda ev: ev["ev"] == "clock",
                                              lambda ev: ev.update(now=3)),
                         "the clock went back"),
}
LINEARIZED_ONLY = {
    "tid that does not exist": (lambda d: edit_event(d, lambda ev: ev.get("tid") == 2,
                                                     lambda ev: ev.update(tid=42)),
                                "tid 42 is not a thread of this trace"),
    "lin missing": (lambda d: edit_event(d, lambda ev: ev["lin"] == 5,
                                         lambda ev: ev.pop("lin")), "expected integer lin"),
    "lin twice": (lambda d: edit_event(d, lambda ev: ev["lin"] == 5,
                                       lambda ev: ev.update(lin=4)), "lin 4 appears twice"),
    "lin lacking": (lambda d: edit_event(d, lambda ev: ev["lin"] == 5,
                                         lambda ev: ev.update(lin=10**6)), "lacks lin 5"),
    "clock going back": (lambda d: edit_event(d, lambda ev: ev.get("pc") == "read_clock"
                                              and ev["lin"] > 100,
                                              lambda ev: ev.update(value=3)),
                         "the clock went back"),
    "steps without linearized": (lambda d: edit_header(d, _not_linearized),
                                 "has no order the model can replay unless it is linearized"),
    "value of a wrong kind": (lambda d: edit_event(d, lambda ev: ev.get("pc") == "cas",
                                                   lambda ev: ev.update(value="yes")),
                              "expected true or false"),
}
CASES = [(kind, name) for kind in GOOD for name in NAMED] + \
    [("sequential", name) for name in SEQUENTIAL_ONLY] + \
    [("linearized", name) for name in LINEARIZED_ONLY]


def named(kind: str, name: str):
    return {**NAMED, **(SEQUENTIAL_ONLY if kind == "sequential" else LINEARIZED_ONLY)}[name]


@pytest.mark.parametrize("kind,name", CASES)
def test_named_bad_input_is_one_line_exit_2(tmp_path, capsys, kind, name):
    mutate, expected = named(kind, name)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(mutate(GOOD[kind]))
    assert main(["validate", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"purgecheck validate: {path}:"), err
    assert expected in err, err
    line = err.split(":")[2]
    assert line.isdigit()


@pytest.mark.parametrize("name", list(NAMED) + ["clock going back"])
def test_named_bad_input_to_diff_is_one_line_exit_2(tmp_path, capsys, name):
    mutate, expected = named("sequential", name)
    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    bad.write_bytes(mutate(GOOD["sequential"]))
    good.write_bytes(GOOD["sequential"])
    for args in ([str(bad), str(good)], [str(good), str(bad)]):
        assert main(["diff", "--traces", *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"purgecheck diff: {bad}:"), err
        assert expected in err, err


def test_unreadable_file_is_bad_usage(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err


# -- the fuzzer ----------------------------------------------------------------------------------

JUNK = [None, True, False, -1, 0, 1.5, 2 ** 63 - 1, "", "x", [], [1], {}, {"ev": "op"},
        "MOVING", -(1 << 63)]


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random change that may break the trace: lines, bytes, keys, values, the header."""
    lines = lines_of(data)
    i = rng.randrange(len(lines))
    op = rng.randrange(12)
    if op == 0:
        return data[:rng.randrange(len(data))]
    if op == 1:
        del lines[i]
    elif op == 2:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif op == 3:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == 4:
        lines[i] = rng.choice([b"", b"{", b"[]", b"null", b"\xff\xfe", b'{"ev":', b"42",
                               orjson.dumps(rng.choice(JUNK))])
    elif op == 5:
        pos = rng.randrange(len(data))
        return data[:pos] + rng.choice([bytes([rng.randrange(256)]), b"1" * 30, b"1e400"]) \
            + data[pos + 1:]
    else:
        try:
            obj = orjson.loads(lines[i])
        except orjson.JSONDecodeError:  # broken by an earlier mutation
            return join(lines[:i] + lines[i + 1:])
        if not isinstance(obj, dict):
            return join(lines[:i] + lines[i + 1:])
        target = obj if i or rng.random() < 0.5 else obj.get("config", obj)
        if not isinstance(target, dict) or not target:
            return join(lines[:i] + lines[i + 1:])
        key = rng.choice(list(target))
        if op == 6:
            del target[key]
        elif op == 7 and key == "ev":
            target[key] = rng.choice(["sweep", "advance_step", "end", "page_new", "zzz"])
        elif op == 8 and isinstance(target[key], int) and not isinstance(target[key], bool):
            value = target[key] + rng.choice([-1, 1, -1000, 1 << 40])
            target[key] = value if -(1 << 63) <= value < 1 << 63 else -1
        else:
            target[key] = rng.choice(JUNK)
        lines[i] = orjson.dumps(obj)
    return join(lines)


def check_one(data: bytes, seen: dict) -> None:
    """Bad input is a TraceError naming the file and a line; anything else is a verdict."""
    for command, run in (("validate", validate_bytes),
                         ("diff", lambda d: diff_bytes(d, GOOD["sequential"])),
                         ("diff", lambda d: diff_bytes(GOOD["sequential"], d,
                                                       ("good.jsonl", "bad.jsonl")))):
        try:
            run(data)
            seen[command, "verdict"] = seen.get((command, "verdict"), 0) + 1
        except TraceError as e:
            msg = str(e)
            assert msg.startswith("bad.jsonl:") and "\n" not in msg, msg
            assert msg.split(":")[1].isdigit(), msg
            seen[command, "bad"] = seen.get((command, "bad"), 0) + 1


def fuzz(n: int, seed: int) -> dict:
    rng = random.Random(seed)
    seen: dict = {}
    for k in range(n):
        data = GOOD["sequential" if k % 2 else "linearized"]
        for _ in range(rng.choice([1, 1, 2, 3])):
            data = mutate(data, rng) if data.count(b"\n") > 1 else data
        try:
            check_one(data, seen)
        except AssertionError:
            raise
        except Exception as e:  # a traceback where a one-line error was due
            raise AssertionError(f"input {k} (seed {seed}) raised {type(e).__name__}: {e}\n"
                                 f"{data[:2000]!r}") from e
    return seen


def test_fuzz_a_few_hundred_bad_inputs():
    seen = fuzz(300, seed=1)
    assert seen[("validate", "bad")] > 150 and seen[("diff", "bad")] > 100


@pytest.mark.slow
def test_fuzz_ten_thousand_bad_inputs():
    seen = fuzz(10_000, seed=2)
    assert seen[("validate", "bad")] > 5000
