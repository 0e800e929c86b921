"""Every input a clear answer on every command (issue 30): the classes found by hand.

Options checked before any work (addresses, databases, empty strings, options that need
another, where a recording goes); work bounded by what the input asks for (the simulator's
series, the resident-page model's ranges); files read to their end or refused (cut gzip and
zstd streams, heaptrack files answered as heaptrack files, devices and directories named as
such, short excerpts of long lines). The generated inputs are tests/test_bad_input_commands.py.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import threading

import pytest

from model.glibc import resident
from model.glibc.constants import PAGESIZE
from model.glibc.resident import DROPPING_CALLS, REGION_PAGES, ResidentLimit, ResidentPages
from purgecheck.formats.alloc_trace import MAGIC, encode
from tests.test_bad_input import hang_guard, run


def one_line(argv: list[str], expected: str) -> str:
    rc, _, err = run(argv)
    lines = [line for line in err.strip().splitlines() if line.startswith("purgecheck")]
    assert rc == 2 and len(lines) == 1 and expected in lines[0], (argv, rc, err[-2000:])
    assert "Traceback" not in err
    return lines[0]


# -- 1. options checked before any work ------------------------------------------------------

@pytest.mark.parametrize("argv,expected", [
    (["fuzz", "--campaign", "--scheduler", "localhost"], "--scheduler 'localhost': no port"),
    (["fuzz", "--campaign", "--scheduler", "tcp://127.0.0.1"], "'tcp://127.0.0.1': no port"),
    (["fuzz", "--campaign", "--scheduler", "tcp://:8786"], "'tcp://:8786': no host"),
    (["fuzz", "--campaign", "--scheduler", "http://h:8786"], "the scheme 'http'"),
    (["fuzz", "--campaign", "--scheduler", "tcp://h:99999"], "port '99999' is not 1..65535"),
    (["fuzz", "--campaign", "--scheduler", "tcp://[::1:8786"], "no port"),
    (["check", "--scheduler", ""], "an empty string"),
    (["mutants", "--scheduler", "tcp://h:x"], "port 'x'"),
    (["fuzz", "--campaign", "--time", ""], "--time ''"),
    (["fuzz", "--db", ""], "--db '': expected WHERE"),
    (["fuzz", "--mutant", ""], "--mutant '': expected M"),
    (["scenario", "--file", " "], "--file ' '"),
    (["glibc", "run", ""], "WORKLOAD ''"),
    (["fuzz", "--db", "http://example.org/db"], "a http:// URL"),
    (["fuzz", "--db", "/proc/no/such"], "--db /proc/no/such: cannot make that directory"),
    (["docs", "--out", ""], "--out '': expected DIR"),
    (["diff", "--scenario", "every-third", "--keep", ""], "--keep ''"),
    (["simulate", "bun-serve", "--scale", "0.5"], "--scale scales the seeds' loads"),
    (["simulate", "--seeds", "--design", "epoch"], "--design does not go with --seeds"),
    (["simulate", "--seeds", "--sample-ms", "5"], "--sample-ms does not go with --seeds"),
    (["glibc", "run", "x.ops", "--scale", "5", "--no-trace"], "--scale sizes a named workload"),
    (["check", "--in-process", "--workers", "2"], "--workers sizes the cluster"),
    (["mutants", "--workers", "1", "--scheduler", "tcp://127.0.0.1:1"],
     "--workers sizes the cluster"),
    (["mutants", "--kills", "0", "--pool"], "--kills must be at least 1"),
])
def test_a_bad_option_is_one_line_before_any_work(argv, expected):
    one_line(argv, expected)


def test_mutants_on_a_pool_of_a_given_size_runs(capsys, tmp_path, monkeypatch, clean_cells_once):
    """`mutants --pool --workers N` ended in an UnboundLocalError: --workers was checked
    against the scheduler's address before the address was read. A cell of the cheapest
    deterministic engine, glibc's, its clean run the session's (age-lt-1 on the scenarios and
    validate engines was 10 s of CPU for the same option)."""
    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path))  # the matrix saves its cells
    from purgecheck.cli import main
    assert main(["mutants", "--pool", "--workers", "1", "--only", "glibc-split-remainder-lost",
                 "--engine", "glibc", "--quick", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["survivors"] == [] and {c["verdict"] for c in doc["cells"]} == {"killed"}, doc
    assert "glibc-split-remainder-lost x glibc: killed" in err  # progress: stderr, with --json too


def test_an_empty_word_after_record_dashes_is_the_programs_own(tmp_path):
    rc, out, err = run(["record", "-o", str(tmp_path / "t.rec"), "--", "/bin/sh", "-c",
                        'test "$0" = ""', ""])
    assert rc == 0 and "exit status 0" in out, err


def test_the_scheduler_in_the_environment_is_checked_as_the_option(monkeypatch):
    monkeypatch.setenv("PURGECHECK_SCHEDULER", "foo:bar")
    one_line(["check", "--engine", "scenarios", "--quick"], "$PURGECHECK_SCHEDULER 'foo:bar'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_scheduler_is_reported_also_when_one_engine_runs():
    """Nothing listens: one connect, refused at once (Dask's own retries for its timeout)."""
    port = free_port()
    one_line(["check", "--engine", "scenarios", "--quick", "--scheduler",
              f"tcp://127.0.0.1:{port}"], "nothing answers there")


def test_a_port_that_accepts_and_never_answers_does_not_hang():
    """Dask's handshake waits for the peer's first message without a deadline; ours has one
    (HANDSHAKE_S), so this is an answer within the hang guard, not a hang."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        port = server.getsockname()[1]
        one_line(["fuzz", "--campaign", "--time", "5s", "--scheduler",
                  f"tcp://127.0.0.1:{port}"], "gave no Dask handshake within")
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        server.close()


@pytest.mark.parametrize("out,expected", [
    ("DIR", "a directory (expected a file name)"),
    ("", "-o/--output '': expected TRACE"),
    ("DIR/missing/x.rec", "no directory"),
])
def test_record_refuses_where_its_trace_cannot_go_before_the_program_runs(tmp_path, out,
                                                                            expected):
    marker = tmp_path / "ran"
    out = out.replace("DIR", str(tmp_path))
    one_line(["record", "-o", out, "--", "/bin/sh", "-c", f"touch {marker}"], expected)
    assert not marker.exists()  # the program never ran


def test_record_tells_a_program_that_cannot_run_from_a_missing_one(tmp_path):
    script = tmp_path / "prog"
    script.write_text("echo hi\n")
    one_line(["record", "-o", str(tmp_path / "t.rec"), "--", str(script)], "not executable")
    one_line(["record", "-o", str(tmp_path / "t.rec"), "--", str(tmp_path / "nope")],
             "no such program")
    one_line(["record", "-o", str(tmp_path / "t.rec"), "--", str(tmp_path)], "a directory")


@pytest.mark.parametrize("cut,expected", [(40, "cut inside its header"),
                                          (100, "cut inside its program headers")])
def test_record_names_an_elf_whose_headers_are_cut(tmp_path, cut, expected):
    elf = tmp_path / "cut"
    elf.write_bytes(open("/bin/true", "rb").read(cut))
    elf.chmod(0o755)
    one_line(["record", "-o", str(tmp_path / "t.rec"), "--", str(elf)], expected)


# -- 2. work bounded by what the input asks for ------------------------------------------------

def write_recording(path, records) -> None:
    with open(path, "wb") as f:
        f.write(encode(0, 1, "start", a=1234, r=MAGIC))
        for i, (kind, a, r, flags) in enumerate(records, 1):
            f.write(encode(i, 1, kind, a=a, r=r, flags=flags))
        f.write(encode(len(records) + 1, 1, "end"))


ADDR = 0x7f00_0000_0000


@pytest.mark.parametrize("records", [
    [("malloc", 1 << 62, ADDR, 0), ("free", ADDR, 0, 0)],  # one chunk of 2^62 bytes
    [("memalign", 1 << 20, ADDR, 63), ("free", ADDR, 0, 0)],  # alignment 2^63
], ids=["size-2^62", "alignment-2^63"])
def test_a_huge_recorded_range_is_one_range_not_2_to_the_50_pages(tmp_path, records):
    """The munmap of the chunk drops its pages: the regions that hold pages are visited, not
    the 2^36 regions the range spans (it looped for hours before)."""
    trace = tmp_path / "huge.rec"
    write_recording(trace, records)
    rc, out, err = run(["replay", str(trace), "--version", "2.23+"])
    assert rc == 0, err
    assert "chunk_munmap" in out and "chunk_mmap" in out


def test_a_malloc_trim_before_any_allocation_gives_nothing_back(tmp_path):
    """Found by the slow tier of tests/test_bad_input_commands.py: the model's main arena has
    no top chunk before its first allocation (glibc's initial top has size 0), and
    malloc_trim read its size (a traceback)."""
    trace = tmp_path / "trim.rec"
    write_recording(trace, [("malloc_trim", 100, 0, 0), ("malloc", 100, ADDR, 0)])
    rc, out, err = run(["replay", str(trace), "--version", "2.23+"])
    assert rc == 0 and "brk_shrink" not in out and "main_madvise" not in out, err


def test_a_heap_write_past_the_models_limit_is_refused_with_it(tmp_path):
    """mmap turned off (M_MMAP_MAX 0) and a calloc of 2^62 bytes: the heap's write of it is
    refused with the limit, naming the record."""
    trace = tmp_path / "calloc.rec"
    write_recording(trace, [("mallopt", (-4) & (2**64 - 1), 0, 0),
                            ("calloc", 1 << 62, ADDR, 0), ("free", ADDR, 0, 0)])
    line = one_line(["replay", str(trace), "--version", "2.23+"], "record 2")
    assert "1 TiB" in line and str(trace) in line
    with pytest.raises(ResidentLimit):
        ResidentPages().write(ADDR, resident.MAX_WRITE_BYTES + 1)


class Intervals:
    """The reference of a drop: the pages as a set, a range tested page by page only among
    the pages held (so that a range of 2^50 pages is cheap here too)."""

    def __init__(self) -> None:
        self.pages: set[int] = set()
        self.back: set[int] = set()

    def write(self, addr: int, length: int) -> None:
        new = set(range(addr // PAGESIZE, (addr + length + PAGESIZE - 1) // PAGESIZE))
        self.back -= new - self.pages
        self.pages |= new

    def drop(self, category: str, addr: int, length: int) -> int:
        lo, hi = (addr + PAGESIZE - 1) // PAGESIZE, (addr + length) // PAGESIZE
        gone = {p for p in self.pages if lo <= p < hi}
        self.pages -= gone
        if DROPPING_CALLS[category]:
            self.back |= gone
        else:
            self.back = {p for p in self.back if not lo <= p < hi}
        return len(gone)


# pages in regions far apart (a region is 64 MiB), and drops from a page to 2^62 bytes
SPOTS = [ADDR + k * (REGION_PAGES * PAGESIZE) * m for k, m in ((0, 1), (1, 1), (3, 7), (5, 1000))]
DROPS = [(ADDR, 1 << 62), (ADDR + PAGESIZE, 1 << 40), (ADDR + REGION_PAGES * PAGESIZE, 8192),
         (ADDR - (1 << 30), 1 << 45)]


def drops_agree() -> None:
    """Pages written in regions far apart, given back by madvise (kept as discarded), some
    written again, then unmapped by huge ranges: the counts and the discarded pages agree."""
    fast, ref = ResidentPages(), Intervals()

    def same() -> None:
        assert fast.pages == len(ref.pages)
        assert fast.given_back() == ref.back

    for spot in SPOTS:
        fast.write(spot, 3 * PAGESIZE)
        ref.write(spot, 3 * PAGESIZE)
    for category, rewritten in (("heap_madvise", SPOTS[:2]), ("chunk_munmap", SPOTS)):
        for addr, length in DROPS:
            with hang_guard():
                assert fast.drop(category, addr, length) == ref.drop(category, addr, length)
            same()
        for spot in rewritten:
            fast.write(spot, 3 * PAGESIZE)
            ref.write(spot, 3 * PAGESIZE)
        same()


def test_a_drop_of_a_huge_range_agrees_with_the_page_by_page_reference():
    drops_agree()


def test_a_drop_that_forgets_the_discarded_pages_is_caught(monkeypatch):
    """Broken variant: a munmap clears only the resident pages of its range, so pages
    discarded before it still count as discarded (a later write there would be a refault of
    memory the process no longer has)."""
    kept = resident.ResidentPages.drop

    def unmap_keeping_discarded(self, category, addr, length):
        if DROPPING_CALLS.get(category, True):
            return kept(self, category, addr, length)
        discarded = {r: bytes(s) for r, s in self.regions.items()}
        gone = kept(self, category, addr, length)
        for region, states in discarded.items():
            now = self.regions.setdefault(region, bytearray(REGION_PAGES))
            for m in re.finditer(bytes([resident.GIVEN_BACK]) + b"+", states):
                now[m.start():m.end()] = states[m.start():m.end()]
        return gone
    monkeypatch.setattr(resident.ResidentPages, "drop", unmap_keeping_discarded)
    with pytest.raises(AssertionError):
        drops_agree()


def test_the_series_of_a_long_run_is_thinned_not_grown_without_bound(monkeypatch):
    """A trace whose two calls are 10^12 ms apart, sampled every 1 us (10^15 steps): the
    series keeps at most MAX_SAMPLES samples (here 1,000, to keep the test short), in order,
    the last at the end of the idle."""
    from purgecheck.formats.calls import Call
    from purgecheck.simulate import mimalloc
    from purgecheck.simulate.mimalloc import simulate
    from purgecheck.simulate.workloads import Workload

    MAX_SAMPLES = 1000
    monkeypatch.setattr(mimalloc, "MAX_SAMPLES", MAX_SAMPLES)

    w = Workload("far", "two calls far apart", lambda: iter(()), "park", 5.0)
    calls = [Call(0.0, 1, "malloc", 1, 100), Call(1e12, 1, "free", 1)]
    with hang_guard():
        r = simulate(w, "epoch", sample_ms=0.001, calls=calls)
    times = [s.t_ms for s in r.samples]
    assert len(times) <= MAX_SAMPLES + 2 and times == sorted(times)
    assert times[-1] >= 1e12 + 5 - 1e-3 and r.counters["allocations"] == 1


def test_thinning_keeps_the_series_in_order_and_copies_equal_computed_samples(monkeypatch):
    """A sample after nothing ran is a copy of the one before; with every sample computed
    (the copy switched off) the series is the same, and with a copy whenever the program
    made no call (the background's sweeps at idle forgotten) it is not: the check can fail."""
    from purgecheck.simulate import mimalloc
    from purgecheck.simulate.workloads import make_workload

    w = make_workload("bun-serve", requests=300, idle_ms=600)

    def series():
        return [(s.t_ms, s.resident, s.free_resident, s.discards)
                for s in mimalloc.simulate(w, "epoch", sample_ms=1.0).samples]
    copied = series()
    monkeypatch.setattr(mimalloc, "MAX_SAMPLES", 100)
    thinned = series()
    assert len(thinned) <= 101 and [t for t, *_ in thinned] == sorted(t for t, *_ in thinned)
    assert thinned[-1] == copied[-1]
    monkeypatch.setattr(mimalloc, "MAX_SAMPLES", 20_000)
    real = mimalloc.Simulation._sample

    def computed(self):
        self.sampled_after = -1
        real(self)
    monkeypatch.setattr(mimalloc.Simulation, "_sample", computed)
    assert series() == copied

    def after_calls_only(self):  # broken variant: unchanged unless the program called
        calls = (self.allocations, len(self.ptrs))
        if self.samples and getattr(self, "calls_seen", None) == calls:
            self.samples.append(mimalloc.replace(self.samples[-1], t_ms=self.t - self.t0))
            return
        self.calls_seen = calls
        computed(self)
    monkeypatch.setattr(mimalloc.Simulation, "_sample", after_calls_only)
    assert series() != copied


@pytest.mark.parametrize("argv,expected", [
    (["simulate", "buffer-loop", "--set", "seconds=36000", "--set", "step_ms=0.001"],
     "more than 10,000,000"),
    (["simulate", "ebizzy", "--set", "seconds=36000", "--set", "record_ms=0.0001"],
     "more than 100,000,000"),
    (["simulate", "ebizzy", "--set", "grow=1048576"], "the last record would be"),
    (["simulate", "bun-serve", "--sample-ms", "1e-300"], "0.001 .. 1e9"),
])
def test_a_workload_that_cannot_finish_is_refused_up_front_with_its_limit(argv, expected):
    one_line(argv, expected)


# -- 3. every file read to its end or refused ------------------------------------------------

HEAPTRACK = "v 10100 3\nX prog\nI 1000 10\n" + "".join(
    f"a {i:x} 1\n+ {i - 1:x}\n- {i - 1:x}\n" for i in range(1, 3000))


def test_a_cut_gzip_stream_is_an_error_naming_the_file_and_the_offset(tmp_path):
    whole = gzip.compress(HEAPTRACK.encode())
    cut = tmp_path / "cut.heaptrack.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    line = one_line(["replay", str(cut)], "the gzip stream is cut short")
    assert str(cut) in line and f"compressed byte {len(whole) // 2:,}" in line


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs zstd")
def test_a_cut_zstd_stream_is_an_error_not_a_shorter_program(tmp_path):
    text = tmp_path / "h.txt"
    text.write_text(HEAPTRACK)
    whole = tmp_path / "h.zst"
    subprocess.run(["zstd", "-q", "-f", str(text), "-o", str(whole)], check=True)
    assert run(["replay", str(whole)])[0] == 0
    cut = tmp_path / "cut.zst"
    data = whole.read_bytes()
    cut.write_bytes(data[:len(data) - 5])
    line = one_line(["replay", str(cut)], "the zstd stream ends at byte")
    assert str(cut) in line


@pytest.mark.parametrize("target,expected", [(os.devnull, "not a regular file"),
                                             ("DIR", "a directory")])
def test_a_device_or_a_directory_is_not_no_such_file(tmp_path, target, expected):
    target = target.replace("DIR", str(tmp_path))
    one_line(["replay", target], expected)
    one_line(["simulate", target], expected)


@pytest.mark.parametrize("line", ["+ -99999999999999999999", "+ -1", "+ 0x0", "a -5 1"])
def test_a_heaptrack_number_is_unsigned_hexadecimal(tmp_path, line):
    """Found by the slow tier: int(w, 16) took '-9999...' and the replay indexed with it."""
    path = tmp_path / "neg.heaptrack.gz"
    path.write_bytes(gzip.compress(f"v 10100 3\nX p\nI 1 1\na 10 1\n{line}\n".encode()))
    one_line(["replay", str(path)], "expected hexadecimal numbers after")


def test_the_bad_script_path_is_named_not_the_trace(tmp_path):
    trace = tmp_path / "t.rec"
    write_recording(trace, [("malloc", 100, ADDR, 0)])
    line = one_line(["replay", str(trace), "--script", str(tmp_path / "no" / "x.ops")],
                    "--script")
    assert str(tmp_path / "no" / "x.ops") in line


@pytest.mark.parametrize("argv,text", [
    (["scenario", "--file", "FILE"], "x" * 5_000_000 + "\n"),
    (["glibc", "run", "FILE", "--no-trace"], "0 malloc 1 " + "9" * 5_000_000 + "\n"),
    (["glibc", "run", "FILE", "--no-trace"], "0 " + "m" * 5_000_000 + " 1 2\n"),
    (["simulate", "FILE"], "0 1 " + "m" * 5_000_000 + "\n"),
])
def test_an_error_quotes_a_short_excerpt_of_a_long_line(tmp_path, argv, text):
    bad = tmp_path / "long.txt"
    bad.write_text(text)
    rc, _, err = run([str(bad) if a == "FILE" else a for a in argv])
    assert rc == 2 and len(err) < 600 and str(bad) in err, err[:800]  # not 5 MB
