"""`purgecheck simulate TRACE` on what `replay` reads (issue 29): a recording, a heaptrack
file and a call trace go through one conversion (purgecheck/simulate/program.py) to every
glibc version and every mimalloc design; the glibc side runs the replay's own ops, so its
system calls are those `replay --real` sees on the real glibc; a recording that lost its
end is a prefix, said in the table and in --json."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from model.glibc.versions import VERSIONS
from purgecheck.cli import main
from purgecheck.glibc.replay import replay
from purgecheck.record.run import ROOT, record
from purgecheck.simulate import glibc as glibc_sim
from purgecheck.simulate.mimalloc import DESIGNS, calls_of
from purgecheck.simulate.program import load_program

BUILD = ROOT / "reference_c" / "build"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
# a small python3 run with reallocs that grow a mapped block (mremap) and a list
PY = ("b = bytearray(300000)\n"
      "for i in range(20): b += bytes(20000)\n"
      "d = {str(i): [i] * (i % 7) for i in range(3000)}\n"
      "print(len(b), len(d))\n")


def cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim-programs")
    out = {}
    for name, cmd in (("threads", [str(BUILD / "recorded_threads"), "60"]),
                      ("python3", [PYTHON, "-c", PY])):
        rec = record(cmd, tmp / f"{name}.rec", stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
        assert rec.returncode == 0
        out[name] = rec.files[0]
    return out


@pytest.fixture(scope="module")
def real_replays(recordings):
    """`replay --real` of each recording, once for the module's tests."""
    return {name: replay(path, None, {}, {}, real=True) for name, path in recordings.items()}


def simulated_syscalls(path: Path, version: str, drop=()) -> dict[str, int]:
    program = load_program(path)

    def ops():
        return ((t, op) for t, op in program.timed_ops() if op.name not in drop)
    (run,) = glibc_sim.simulate_ops(path.name, ops, [version], idle_ms=0)
    return run.syscalls


@pytest.mark.parametrize("name", ["threads", "python3"])
def test_simulate_counts_the_system_calls_replay_real_sees_on_the_real_glibc(recordings,
                                                                            real_replays, name):
    rep = real_replays[name]
    assert rep.ok, rep.mismatches
    real = {k: v for k, v in rep.measured.counts.items() if v}
    assert simulated_syscalls(recordings[name], rep.installed) == real
    # resident memory beside the real driver's: every page the model says malloc writes
    # while not resident is a page the kernel faults in too (the model misses others: the
    # threads' stacks, realloc's copy), and both see some
    m = rep.memory
    assert 0 < m.model_faults <= m.real_minor_faults and m.model_peak_kb > 0
    if name == "python3":
        assert real.get("chunk_mremap", 0) >= 1  # a realloc of a mapped block was seen


def test_a_simulate_whose_glibc_side_drops_reallocs_disagrees_with_the_real_glibc(
        recordings, real_replays):
    """Broken variant: the glibc side leaves the reallocs out (as it refused them before)."""
    rep = real_replays["python3"]
    real = {k: v for k, v in rep.measured.counts.items() if v}
    assert simulated_syscalls(recordings["python3"], rep.installed, drop=("realloc",)) != real


def test_every_call_kind_reaches_both_sides(recordings):
    program = load_program(recordings["threads"])
    kinds = {op.name for _, op in program.timed_ops()}
    assert {"malloc", "free", "realloc", "calloc", "memalign", "start", "join"} <= kinds
    calls = list(calls_of(program.timed_ops()))
    assert {c.op for c in calls} == {"malloc", "free", "realloc"}
    assert len({c.thread for c in calls}) >= 2  # script threads: a slot is reused
    times = [c.t_ms for c in calls]
    assert times == sorted(times) and times[-1] > times[0]  # the recorded clock, in order


def test_a_recording_through_simulate_gives_every_version_and_design(capsys, recordings):
    rc, out, _ = cli(capsys, "simulate", str(recordings["threads"]), "--json",
                     "--idle-ms", "50")
    assert rc == 0
    doc = orjson.loads(out)
    rows = {(r["model"], r["design"]) for r in doc["runs"]}
    assert rows == {("glibc", v) for v in VERSIONS} | {("mimalloc", d) for d in DESIGNS}
    assert doc["trace"]["complete"] and doc["trace"]["prefix"] is None
    for r in doc["runs"]:
        assert r["counters"]["rss_peak"] > 0 and r["counters"]["rss_mb_s"] > 0
    glibc = {r["design"]: r for r in doc["runs"] if r["model"] == "glibc"}
    madvise = {v: r["syscalls"].get("heap_madvise", 0) for v, r in glibc.items()}
    assert madvise["2.21"] > madvise["2.23+"]  # seed 001: 2.21 madvises at every free
    rc, out, _ = cli(capsys, "simulate", str(recordings["threads"]), "--idle-ms", "50",
                     "--version", "2.23+", "--design", "epoch")
    assert rc == 0 and "2.23+" in out and "epoch" in out and "heap_new" in out
    assert "PREFIX" not in out


def test_a_killed_recording_is_simulated_as_a_prefix_that_says_so(capsys, recordings,
                                                                  tmp_path):
    """The same recording without its last quarter (no exit record): a prefix."""
    whole = recordings["threads"].read_bytes()
    cut = tmp_path / "cut.rec"
    cut.write_bytes(whole[:len(whole) // 4 // 32 * 32 * 3])
    rc, out, _ = cli(capsys, "simulate", str(cut), "--json", "--version", "2.23+",
                     "--idle-ms", "10")
    doc = orjson.loads(out)
    # cut where its threads' buffers are out of order, the recording has a gap; else it has
    # no exit record
    why = doc["trace"]["prefix"]
    assert rc == 0 and not doc["trace"]["complete"]
    assert "no exit record" in why or "has a gap at call" in why
    rc, out, _ = cli(capsys, "simulate", str(cut), "--version", "2.23+", "--idle-ms", "10")
    assert "PREFIX" in out and why.split(":")[0] in out
    rc, out, _ = cli(capsys, "replay", str(cut), "--json")  # replay says so too
    doc = orjson.loads(out)
    assert rc == 0 and not doc["complete"] and doc["prefix"] == why
    rc, out, _ = cli(capsys, "replay", str(cut), "--version", "2.23+")
    assert "PREFIX" in out
    rc, out, _ = cli(capsys, "replay", str(recordings["threads"]), "--json")
    assert orjson.loads(out)["complete"] and "PREFIX" not in out


def test_a_heaptrack_file_and_a_call_trace_with_realloc_reach_glibc(capsys, tmp_path):
    ht = tmp_path / "p.heaptrack.gz"
    with gzip.open(ht, "wt") as f:
        f.write("v 10100 3\nX prog\nI 1000 1000\na 40000 1\na 20 1\n+ 0\nc 5\n+ 1\n- 0\n"
                "c a\n+ 0\n- 1\n- 0\n")
    rc, out, _ = cli(capsys, "simulate", str(ht), "--json", "--idle-ms", "10")
    doc = orjson.loads(out)
    assert rc == 0 and doc["trace"]["kind"] == "heaptrack" and doc["trace"]["ops"] == 6
    assert {r["model"] for r in doc["runs"]} == {"glibc", "mimalloc"}
    calls = tmp_path / "r.calls"
    calls.write_text("0 1 malloc 1 200000\n1 1 realloc 1 400000\n2 2 malloc 2 50\n"
                     "3 2 free 2\n4 1 free 1\n")
    rc, out, _ = cli(capsys, "simulate", str(calls), "--json", "--version", "2.23+",
                     "--idle-ms", "10")
    doc = orjson.loads(out)
    assert rc == 0
    (run,) = doc["runs"]
    assert run["syscalls"]["chunk_mremap"] == 1  # the realloc of a mapped block
    assert run["syscalls"]["heap_new"] == 1  # thread 2, a thread of its own


def test_the_guides_table_of_a_real_program_is_what_simulate_prints(capsys):
    """docs/simulate-guide.md shows `purgecheck simulate tests/data/xz-T2.rec`: the same
    table, line for line, as the command prints now (a recording committed with the tests)."""
    trace = ROOT / "tests" / "data" / "xz-T2.rec"
    rc, out, _ = cli(capsys, "simulate", "tests/data/xz-T2.rec" if Path.cwd() == ROOT
                     else str(trace))
    assert rc == 0
    guide = (ROOT / "docs" / "simulate-guide.md").read_text()
    shown = guide.split("$ purgecheck simulate tests/data/xz-T2.rec\n", 1)[1].split("```")[0]
    rows = [ln.rstrip() for ln in out.splitlines() if ln.startswith("│")]
    assert len(rows) == len(VERSIONS) + len(DESIGNS)
    assert rows == [ln.rstrip() for ln in shown.splitlines() if ln.startswith("│")]


# a block grown by realloc past its neighbour: _int_realloc takes a new chunk and copies
MOVED = "0 malloc 1 100000\n0 malloc 2 16\n0 realloc 1 150000\n"


def copied_pages_resident() -> tuple[int, int]:
    """(resident pages, pages) of the range realloc's copy wrote in the moved block."""
    from model.glibc.resident import pages_within
    from purgecheck.formats.glibc_ops import parse_script
    from purgecheck.glibc.modelrun import run_model
    p = run_model(parse_script(MOVED), VERSIONS["2.23+"])
    new = p.blocks[1]
    lo, hi = pages_within(new.addr + 16, 100000)
    return p.resident.resident_in_pages(lo, hi), hi - lo


def test_realloc_copies_the_old_block_into_the_new_one_and_its_pages_fault():
    resident, pages = copied_pages_resident()
    assert pages >= 20 and resident == pages


def test_a_realloc_that_moves_without_copying_is_caught(monkeypatch):
    """Broken variant: the model's realloc moves the block but writes none of it (the model
    before issue 29, whose faults were a third of the real driver's on python3)."""
    from model.glibc import realloc
    monkeypatch.setattr(realloc, "copy_on_move", lambda p, old, new: None)
    resident, pages = copied_pages_resident()
    assert resident < pages


XZ = Path(__file__).resolve().parent / "data" / "xz-T2.rec"


def passes_agree(monkeypatch=None) -> None:
    """Every pass over a recording's stream (each glibc version and design reads one) gives
    the ops and conversion figures of a fresh conversion: the kept stream stands for it."""
    program = load_program(XZ)
    first = list(program.timed_ops())
    stats = vars(program.conversion).copy()
    assert program.kept is not None  # a short trace is kept after its first pass
    for _ in range(2):
        assert list(program.timed_ops()) == first
        assert vars(program.conversion) == stats
    fresh = load_program(XZ)
    fresh.kept = None
    assert list(fresh.make(fresh.conversion)) == first and vars(fresh.conversion) == stats


def test_the_kept_stream_of_a_trace_is_its_conversion_again():
    passes_agree()


def test_a_kept_stream_that_lost_an_op_is_caught(monkeypatch):
    """Broken variant: the pass keeps every op but the last."""
    from purgecheck.simulate import program as program_module
    keeping = program_module.Program._keeping

    def keeping_short(self, ops):
        yield from keeping(self, ops)
        if self.kept:
            self.kept.pop()
    monkeypatch.setattr(program_module.Program, "_keeping", keeping_short)
    with pytest.raises(AssertionError):
        passes_agree()
