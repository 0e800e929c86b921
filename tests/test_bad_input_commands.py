"""Every input a clear answer on every command (issue 30, the generated half): damaged
recordings and heaptrack files for `replay`, damaged call traces for `simulate`, damaged glibc
op scripts for `glibc run`, and option values for `fuzz`, `check`, `mutants`, `record` and
`simulate`, each built from a valid input mutated by field, byte, truncation and huge
numbers, the way tests/test_bad_input.py does it for op scripts.

The rule: exit 0, 1 or 2; never a traceback; an exit 2 is one line naming the file or the
option; never a hang (tests/test_bad_input.py's hang guard: no answer within 60 s on a small
input is a failure); a compressed stream cut short is never a result (exit 2), since a
replay of part of it would look like a whole, shorter program. A few dozen cases a test run
in `make test`, thousands in the slow tier (`pytest -m slow tests/test_bad_input_commands.py`).
The option values are drawn so that none is both valid and expensive: a scheduler address
never resolves (`.invalid` hosts), a run that is accepted is a second's work.
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import struct
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from purgecheck.formats.alloc_trace import KIND, MAGIC, RECORD, encode
from tests.test_bad_input import BYTES, HUGE, assert_clear, run

SETTINGS = dict(derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
FAST, SLOW = 40, 2_000


def tiers(fn, fast: int = FAST, **strategies):
    """The fast tier (derandomized, `fast` examples) and the slow one (SLOW examples) of the
    property `fn` over `strategies`."""
    quick = settings(max_examples=fast, **SETTINGS)(given(**strategies)(fn))
    slow = settings(max_examples=SLOW, **SETTINGS)(given(**strategies)(fn))
    return quick, pytest.mark.slow(slow)


# -- recordings (purgecheck record's format) ---------------------------------------------------

ADDR = 0x5555_6000_0000


def valid_recording() -> list[tuple]:
    """(kind, thread, a, r, flags) records of a small two-thread program that exits."""
    recs = [("start", 1, 4242, MAGIC, 0), ("malloc", 1, 100, ADDR, 0),
            ("thread_new", 2, 0, 0, 0), ("malloc", 2, 5000, ADDR + 0x1000, 0),
            ("calloc", 1, 300, ADDR + 0x3000, 0), ("realloc_old", 1, ADDR, 0, 0),
            ("realloc", 1, 200, ADDR + 0x4000, 0), ("memalign", 2, 64, ADDR + 0x5000, 6),
            ("free", 2, ADDR + 0x1000, 0, 0), ("free", 1, ADDR + 0x4000, 0, 0),
            ("malloc", 1, 1 << 20, ADDR + 0x100000, 0), ("free", 1, ADDR + 0x100000, 0, 0),
            ("thread_exit", 2, 0, 0, 0), ("end", 1, 0, 0, 0)]
    return recs


FIELD = st.sampled_from([0, 1, 7, 1 << 20, 1 << 40, 1 << 62, 1 << 63, (1 << 64) - 1, ADDR,
                         ADDR + 0x1000, 12345])


@st.composite
def damaged_recording(draw) -> bytes:
    recs = valid_recording()
    fixed = True  # the check bytes are recomputed (a record well formed, its values wrong)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(recs) - 1))
        how = draw(st.sampled_from(["a", "r", "flags", "kind", "thread", "drop", "dup",
                                    "swap"]))
        kind, thread, a, r, flags = recs[i]
        if how == "a":
            recs[i] = (kind, thread, draw(FIELD), r, flags)
        elif how == "r":
            recs[i] = (kind, thread, a, draw(FIELD), flags)
        elif how == "flags":
            recs[i] = (kind, thread, a, r, draw(st.integers(0, 255)))
        elif how == "kind":
            recs[i] = (draw(st.sampled_from(sorted(KIND))), thread, a, r, flags)
        elif how == "thread":
            recs[i] = (kind, draw(st.sampled_from([0, 3, 65535])), a, r, flags)
        elif how == "drop" and len(recs) > 1:
            del recs[i]
        elif how == "dup":
            recs.insert(i, recs[i])
        else:
            j = draw(st.integers(0, len(recs) - 1))
            recs[i], recs[j] = recs[j], recs[i]
    data = bytearray(b"".join(encode(n, t, k, a=a, r=r, flags=f)
                              for n, (k, t, a, r, f) in enumerate(recs)))
    for _ in range(draw(st.integers(0, 2))):  # raw bytes: the check byte catches these
        k = draw(st.integers(0, len(data) - 1))
        data[k] = draw(st.integers(0, 255))
        fixed = False
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    del fixed
    return bytes(data)


def check_replay(path, extra: tuple[str, ...] = ()) -> int:
    rc, _, err = run(["replay", str(path), "--version", "2.23+", *extra])
    assert_clear(rc, err, (str(path),))
    return rc


def _recording(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("rec") / "gen.rec"
    path.write_bytes(data)
    check_replay(path)


test_damaged_recordings, test_damaged_recordings_slow = \
    tiers(_recording, data=damaged_recording())


def test_the_valid_recording_replays():
    """The base of the mutations is a program the replay takes (so mutants start valid)."""
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ok.rec"
        path.write_bytes(b"".join(encode(n, t, k, a=a, r=r, flags=f)
                                  for n, (k, t, a, r, f) in enumerate(valid_recording())))
        assert check_replay(path) == 0
        assert struct.calcsize("<4Q") == RECORD


# -- heaptrack files: damaged text, cut or damaged compressed streams ---------------------

HEAPTRACK_LINES = ["v 10100 3", "X python3 -c 'a", "b'", "I 1000 10", "s 1 main", "t 1 0",
                   "a 40 1", "+ 0", "a 1000 1", "+ 1", "c 10", "- 0", "+ 0", "- 1", "- 0",
                   "a 100000 1", "+ 2", "- 2"]


@st.composite
def damaged_heaptrack(draw) -> tuple[bytes, bool]:
    """(the file's bytes, whether its compressed stream was cut short)."""
    lines = list(HEAPTRACK_LINES)
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["field", "byte", "drop", "dup", "truncate"]))
        words = lines[i].split(" ")
        if how == "field":
            words[draw(st.integers(0, len(words) - 1))] = draw(
                HUGE | st.sampled_from(["ffffffffffffffffffff", "-1", "z", "0"]))
            lines[i] = " ".join(words)
        elif how == "byte":
            k = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:k] + draw(BYTES) + lines[i][k:]
        elif how == "drop":
            del lines[i]
        elif how == "dup":
            lines.insert(i, lines[i])
        else:
            lines[i] = lines[i][:draw(st.integers(0, len(lines[i])))]
    text = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    zstd = shutil.which("zstd") is not None and draw(st.booleans())
    if zstd:
        data = subprocess.run(["zstd", "-q", "-c"], input=text, capture_output=True,
                              check=True).stdout
    else:
        data = gzip.compress(text, mtime=0)
    cut = False
    how = draw(st.sampled_from(["whole", "whole", "cut", "flip"]))
    if how == "cut":
        data, cut = data[:draw(st.integers(4, len(data) - 1))], True
    elif how == "flip":
        k = draw(st.integers(4, len(data) - 1))
        data = data[:k] + bytes([data[k] ^ draw(st.integers(1, 255))]) + data[k + 1:]
    return data, cut


def _heaptrack(tmp_path_factory, case) -> None:
    data, cut = case
    path = tmp_path_factory.mktemp("ht") / "gen.heaptrack.gz"
    path.write_bytes(data)
    rc = check_replay(path)
    if cut:  # a short stream is never a (shorter) result
        assert rc == 2


test_damaged_heaptrack_files, test_damaged_heaptrack_files_slow = \
    tiers(_heaptrack, case=damaged_heaptrack())


# -- call traces (simulate) and glibc op scripts (glibc run) --------------------------------

CALLS = ["# T_MS THREAD OP NAME SIZE", "0.000 1 malloc 7 262144", "0.360 1 free 7",
         "0.360 1 loop", "1.500 2 malloc 9 4096", "1.600 2 realloc 9 65536", "2.0 2 free 9"]
GLIBC = ["1 start", "1 malloc 1 100", "1 malloc 2 200000", "0 mallopt trim_threshold 4096",
         "1 free 1", "1 memalign 3 64 100", "1 free 2", "0 trim 0", "1 free 3", "1 join"]
TIMES = st.sampled_from(["1e12", "1e308", "inf", "-0", "0.000001", "nan", "1e-300"])


@st.composite
def mutated_lines(draw, base: list[str]) -> str:
    lines = list(base)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["field", "time", "byte", "drop", "dup", "truncate"]))
        words = lines[i].split(" ")
        if how in ("field", "time"):
            j = 0 if how == "time" else draw(st.integers(0, len(words) - 1))
            words[j] = draw(TIMES if how == "time" else
                            HUGE | st.text(alphabet="abc019-.", max_size=5))
            lines[i] = " ".join(words)
        elif how == "byte":
            k = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:k] + draw(BYTES) + lines[i][k:]
        elif how == "drop" and len(lines) > 1:
            del lines[i]
        elif how == "dup":
            lines.insert(i, lines[i])
        else:
            lines[i] = lines[i][:draw(st.integers(0, len(lines[i])))]
    return "\n".join(lines) + "\n"


def _calls(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("calls") / "gen.calls"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    rc, _, err = run(["simulate", str(path), "--design", "epoch", "--idle-ms", "50"])
    assert_clear(rc, err, (str(path),))


test_damaged_call_traces, test_damaged_call_traces_slow = \
    tiers(_calls, text=mutated_lines(CALLS))


def _glibc_script(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("glibc") / "gen.ops"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    rc, _, err = run(["glibc", "run", str(path), "--no-trace", "--version", "2.23+"])
    assert_clear(rc, err, (str(path),))


test_damaged_glibc_scripts, test_damaged_glibc_scripts_slow = \
    tiers(_glibc_script, text=mutated_lines(GLIBC))


# -- option values ---------------------------------------------------------------------------

# addresses that never reach a scheduler: refused by their form, or a host that cannot resolve
ADDRESS = st.builds(lambda s, h, p: f"{s}{h}{p}",
                    st.sampled_from(["tcp://", "tls://", "http://", "", "udp://", "ws://",
                                     "inproc://", "tcp:/"]),
                    st.sampled_from(["", "h.invalid", "[::1", "a b", "x.invalid:9:", "@"]),
                    st.sampled_from(["", ":0", ":65536", ":x", ":-1", ":8786", ":1" * 3,
                                     ":99999999999999999999"]))
WORDS = HUGE | st.sampled_from(["", " ", "-", "0", "1", "2.5", "1e-300", "inf", "/dev/null",
                                "/proc/no/such", "http://x/", "redis://127.0.0.1:1/0"])


SECONDS = st.sampled_from(["", "-1", "nan", "inf", "1e99", "x", "0.01", "36001", "1_0e-3"])


@st.composite
def option_case(draw) -> list[str]:
    which = draw(st.sampled_from(["fuzz-campaign", "fuzz", "check", "mutants", "simulate",
                                  "record"]))
    if which == "fuzz-campaign":
        argv = ["fuzz", "--campaign", "--time", draw(WORDS | st.just("1s")),
                "--scheduler", draw(ADDRESS)]
        if draw(st.booleans()):
            argv += ["--workers", draw(st.sampled_from(["0", "-1", "1", "x"]))]
    elif which == "fuzz":  # accepted: one example of one step
        argv = ["fuzz", "--machine", draw(st.sampled_from(["page", "nope", ""])),
                "--examples", draw(st.sampled_from(["1", "0", "-1", "x"])), "--steps", "1",
                "--db", draw(WORDS | st.just("DIR"))]
    elif which == "check":
        argv = ["check", "--engine", draw(st.sampled_from(["scenarios", "nope", ""])),
                "--quick", "--scheduler", draw(ADDRESS)]
    elif which == "mutants":
        argv = ["mutants", "--only", "age-lt-1", "--engine", "validate", "--quick",
                "--scheduler", draw(ADDRESS),
                "--timeout", draw(st.sampled_from(["0", "-5", "nan", "10"]))]
    elif which == "simulate":  # accepted: a tenth of a second of buffer loop
        argv = ["simulate", "buffer-loop", "--set", "seconds=0.05", "--design", "epoch"]
        for flag in draw(st.lists(st.sampled_from(["--idle-ms", "--sample-ms", "--park-after",
                                                   "--scale", "--plot", "--set"]),
                                  min_size=1, max_size=3, unique=True)):
            if flag == "--set":  # a longer loop is valid and minutes of work: not drawn
                argv += [flag, "seconds=" + draw(SECONDS)]
            else:
                argv += [flag, draw(WORDS | TIMES | st.just("DIR"))]
    else:  # accepted: `true` recorded
        argv = ["record", "-o", draw(WORDS | st.sampled_from(["DIR", "DIR/x.rec",
                                                              "DIR/no/x.rec"])),
                "--", draw(st.sampled_from(["true", "/nonexistent", "DIR", "/dev/null"]))]
    return argv


def _options(tmp_path_factory, argv: list[str]) -> None:
    where = str(tmp_path_factory.mktemp("opt"))
    argv = [a.replace("DIR", where) for a in argv]
    with contextlib.chdir(where):  # a relative --db 0 or -o 1 is made there, not in the tree
        rc, _, err = run(argv)
    named = [a for a in argv if len(a) >= 2 and a != "--"] + ["''"]  # a flag or a value given
    assert_clear(rc, err, tuple(named))


test_option_values, test_option_values_slow = tiers(_options, 60, argv=option_case())
