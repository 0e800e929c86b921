"""purgecheck measure: the pinned Bun's install refuses what it cannot verify; the /proc and
strace readers on recorded text; the real Bun at a small scale, asserting only directions that
hold on a loaded machine (lower bounds); the comparison's bands and verdicts on figures given
here; the command line's bad usage."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.measure import bun as bunmod
from purgecheck.measure import probe, turns
from purgecheck.measure.compare import compare, within
from purgecheck.measure.designs import design_env, parse_option
from purgecheck.measure.run import measure_once
from purgecheck.measure.workloads import workload_params

SIMULATIONS_ONCE = True  # each full-size simulation once for the session (tests/conftest.py)
DATA = os.path.join(os.path.dirname(__file__), "data", "real-bun-small.json")


# -- the install: pinned version, integrity checked ------------------------------------------

def _tarball(content: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/bin/bun")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _registry(monkeypatch, integrity: str, tarball: bytes):
    def get(url, timeout=120):
        if url.endswith("/1.4.4"):
            return json.dumps({"dist": {"integrity": integrity,
                                        "tarball": "https://registry.example/bun.tgz"}}).encode()
        return tarball
    monkeypatch.setattr(bunmod, "_get", get)


def test_install_refuses_a_registry_whose_integrity_is_not_the_pinned_one(monkeypatch, tmp_path):
    _registry(monkeypatch, "sha512-AAAA", _tarball(b"#!/bin/sh\n"))
    with pytest.raises(bunmod.BunMissing, match="not the pinned"):
        bunmod.install(tmp_path / "b", quiet=True)
    assert not (tmp_path / "b" / "bun").exists()


def test_install_refuses_a_tarball_whose_bytes_differ_from_the_pinned_hash(monkeypatch, tmp_path):
    _registry(monkeypatch, bunmod.BUN_INTEGRITY, _tarball(b"#!/bin/sh\necho 1.4.4\n"))
    with pytest.raises(bunmod.BunMissing, match="tarball's sha512"):
        bunmod.install(tmp_path / "b", quiet=True)
    assert not (tmp_path / "b" / "bun").exists()


def test_the_integrity_is_the_base64_sha512_of_the_bytes():
    data = b"bun"
    assert bunmod._sha512_integrity(data) == \
        "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def test_the_installed_bun_is_the_pinned_version():
    assert bunmod.installed_version(bunmod.find_bun()) == bunmod.BUN_VERSION


def test_a_bun_path_that_is_not_a_bun_is_refused_in_one_line(tmp_path, capsys):
    script = tmp_path / "bun"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    assert main(["measure", "bun-serve", "--bun", str(script)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--version` failed" in err[0]
    assert main(["measure", "bun-serve", "--bun", str(tmp_path / "none")]) == 2


def test_no_bun_installed_says_how_to_get_one(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bunmod, "BUN_PATH", tmp_path / "bun")
    monkeypatch.delenv("PURGECHECK_BUN", raising=False)
    assert main(["measure", "bun-serve"]) == 2
    assert "make setup" in capsys.readouterr().err


# -- the readers -------------------------------------------------------------------------------

STRACE = """\
4242  1764752400.100000 madvise(0x7f0000000000, 262144, MADV_DONTNEED) = 0
4243  1764752400.200000 madvise(0x7f0000100000, 16384, MADV_DONTNEED <unfinished ...>
4242  1764752400.200100 madvise(0x7f0000200000, 4096, MADV_WILLNEED) = 0
4243  1764752400.200200 <... madvise resumed>) = 0
4242  1764752400.300000 madvise(0x7f0000300000, 65536, MADV_FREE) = 0
4242  1764752400.400000 madvise(0x7f0000400000, 65536, MADV_DONTNEED) = -1 EINVAL (Invalid argument)
"""


def test_strace_madvise_lines_are_counted_by_advice_and_time():
    calls = probe.parse_strace(STRACE)
    assert [c.advice for c in calls] == ["MADV_DONTNEED", "MADV_DONTNEED", "MADV_WILLNEED",
                                         "MADV_FREE"]
    assert probe.discards(calls, 0, 1764752400.25) == (2, 262144 + 16384)
    assert probe.discards(calls, 1764752400.25, 2e9) == (1, 65536)
    assert [c.tid for c in calls] == [4242, 4243, 4242, 4242]


# Three threads of a Bun.serve without the hold (shape of a strace log of 2026-12-03): the
# scavenger's sweep at .100 gives three runs back within a millisecond, its next at .150; the
# main thread 4242 and a JIT worker 4250 discard in between.
SWEEPS = """\
4244  1764752400.100000 madvise(0x7f0000000000, 262144, MADV_DONTNEED) = 0
4244  1764752400.100300 madvise(0x7f0000080000, 524288, MADV_DONTNEED) = 0
4242  1764752400.100400 madvise(0x7f0000400000, 65536, MADV_DONTNEED) = 0
4244  1764752400.100600 madvise(0x7f0000200000, 262144, MADV_DONTNEED) = 0
4250  1764752400.120000 madvise(0x7f0000500000, 8192, MADV_DONTNEED) = 0
4250  1764752400.120100 madvise(0x7f0000600000, 131072, MADV_DONTNEED) = 0
4244  1764752400.150000 madvise(0x7f0000300000, 4096, MADV_DONTNEED) = 0
4244  1764752400.900000 madvise(0x7f0000300000, 262144, MADV_DONTNEED) = 0
"""
NAMES = {4242: "bun", 4244: "mi-scavenger", 4250: "JITWorker"}


def test_a_sweep_is_one_threads_calls_less_than_a_millisecond_apart():
    calls = probe.parse_strace(SWEEPS)
    # the scavenger: .100 (three calls), .150, .900; the main thread and the JIT worker one each
    assert probe.sweeps(calls, 0.001) == 5
    # a grouping that ignores the thread would fold the main thread's call into the scavenger's
    assert probe.sweeps([c for c in calls if c.tid == 4244], 0.001) == 3
    assert probe.sweeps(calls, 1.0) == 3


def test_the_discards_under_load_are_told_apart_by_thread():
    from purgecheck.measure.run import _discards_by_thread
    f = _discards_by_thread(probe.parse_strace(SWEEPS), 1764752400.5, 4242, NAMES)
    assert (f["discards_load_scavenger"], f["discards_load_loop"],
            f["discards_load_others"]) == (3, 1, 1)  # 64 KiB or more, before the end of the load
    assert f["discard_kib_per_call_load"] == (256 + 512 + 64 + 256 + 128) / 5
    assert f["discarding_sweeps_load"] == 3  # the scavenger's 4 KiB call is not one of them
    assert f["scavenger_sweeps_load"] == 2  # ... but it is one of the scavenger's sweeps


def test_a_count_that_one_run_lacks_is_the_spread_of_the_runs_that_have_it():
    from purgecheck.measure.report import summary_of
    runs = [{"design": "before", "figures": {"requests": r, **({"loop_turns": t} if t else {})}}
            for r, t in ((10, 5), (20, None), (30, 9))]
    s = summary_of(runs)["before"]
    assert s["requests"]["n"] == 3 and s["loop_turns"] == {"min": 5, "median": 7, "max": 9,
                                                           "n": 2}


# `perf stat --per-thread -x, -e ... -p 32640` of a Bun.serve under load (2026-12-03), cut
PERF = """# started on Thu Dec  3 11:41:20 2026

bun-32640,2701,,syscalls:sys_enter_epoll_pwait2,956961362,100.00,,
HeapHelper-32641,0,,syscalls:sys_enter_epoll_pwait2,39512397,100.00,,
mi-scavenger-32642,0,,syscalls:sys_enter_epoll_pwait2,10315197,100.00,,
bun-32640,3,,syscalls:sys_enter_epoll_wait,956961362,100.00,,
bun-32650,99,,syscalls:sys_enter_epoll_pwait2,956961362,100.00,,
HeapHelper-32641,3442,,syscalls:sys_enter_futex,39512397,100.00,,
bun-32640,2470,,syscalls:sys_enter_futex,956961362,100.00,,
mi-scavenger-32642,66,,syscalls:sys_enter_futex,10315197,100.00,,
"""


def test_the_loops_turns_are_the_main_threads_epoll_waits_and_the_scavengers_its_futex_calls():
    t = turns.parse_perf_per_thread(PERF, 32640)
    assert t == turns.Turns(loop_turns=2704, scavenger_passes=66)  # not thread 32650's 99
    assert turns.parse_perf_per_thread(PERF, 1) is None  # the main thread not counted
    assert turns.parse_perf_per_thread("", 32640) is None


def test_proc_readings_of_this_process():
    s = probe.read_stat(os.getpid())
    r = probe.read_rollup(os.getpid())
    assert s.minflt > 0 and s.utime_ms >= 0
    assert r["rss"] > 0 and 0 < r["anonymous"] <= r["rss"]
    assert probe.read_stat(2 ** 22 + 1) is None  # above pid_max's default: no such process


def test_a_users_mimalloc_setting_never_leaks_into_a_design(monkeypatch):
    monkeypatch.setenv("MIMALLOC_PURGE_HOLES", "0")
    env = design_env("default")
    assert "MIMALLOC_PURGE_HOLES" not in env
    env = design_env("epoch", {"purge_holes_min_interval": "50"})
    assert env["MIMALLOC_PURGE_HOLES_LARGE_FLOOR"] == "0"
    assert env["MIMALLOC_PURGE_HOLES_MIN_INTERVAL"] == "50"


@pytest.mark.parametrize("text", ["purge_holes", "nope=1", "purge_holes=-1", "purge_delay=x"])
def test_a_bad_option_is_refused(text):
    with pytest.raises(ValueError, match="--option"):
        parse_option(text)


# -- the real Bun, small: directions that hold on a loaded machine ------------------------------

@pytest.fixture(scope="module")
def serve_runs():
    # idle_s 4: on a quiet machine the default and no-hold reach their floor about 1 s into
    # the idle (975 and 986 ms on 2026-12-04), which a 2 s idle left little room for at load
    # 14 (the test of what is given back at idle failed there once); the idle costs little CPU
    w, p = workload_params("bun-serve", {"load_s": "2", "idle_s": "4"})
    return {d: measure_once(bunmod.find_bun(), w, p, d).figures
            for d in ("default", "no-hold", "before")}


def test_without_the_hold_the_real_bun_discards_and_refaults_many_times_the_default(serve_runs):
    """Per request: without the hold the server serves fewer requests in the same 2 s, and
    both designs pay the same start-up discards, so the totals are not comparable (a CI run
    on 2 cores busy with the suite gave 369 against 85 calls: 4.3x in total). Measured here
    per request, the two are 10 to 30 times apart on a quiet machine. The discards fall with
    the load (the loop parks less often, so fewer sweeps): a helper's run at load 8 gave 0.153
    against 0.0563 a request, 2.7x, and failed the 3x this test asked then. So the discards
    are asked to be twice the default's, and the faults, which every discarded page pays
    back whenever the sweeps come, five times."""
    nohold, default = serve_runs["no-hold"], serve_runs["default"]
    assert nohold["requests"] > 100 and default["requests"] > 100
    per_request = {d: f["discards_load"] / f["requests"] for d, f in serve_runs.items()}
    assert per_request["no-hold"] >= 2 * per_request["default"], per_request
    assert nohold["faults_per_request"] >= 5 * default["faults_per_request"]


def test_the_collector_frees_many_request_bodies_at_once(serve_runs):
    """js/collections.js counts the collections: Bun's collector freed 24 to 25 bodies per
    collection on 2026-12-03 under every design (the model took 3 before it was counted)."""
    for figures in serve_runs.values():
        assert figures["collections"] >= 1
        assert figures["requests_per_collection"] >= 4


def test_the_collector_passes_over_a_body_now_and_then_and_frees_it_later(serve_runs):
    """js/collections.js: a body that a collection passed over and a later one freed. On
    2026-12-03 one per collection, freed at a fuller collection every 700 to 1,100 requests;
    in 2 s of a loaded machine at least one run of three sees such a collection."""
    assert any(f.get("survivors_per_collection", 0) > 0 for f in serve_runs.values())
    for f in serve_runs.values():
        if "requests_per_late_collection" in f:
            assert f["requests_per_late_collection"] > f["requests_per_collection"]


def test_the_real_bun_with_purging_off_gives_nothing_of_the_large_pages_back_at_idle(serve_runs):
    """At the end of the load the 16 bodies in flight are freed: 4 MiB of free blocks in
    large pages at least, which purging off keeps and the unit without the hold gives back.
    Not against the default: its floor keeps 4 MiB of recently used large pages for 256
    epochs (a CI run on 2 busy cores found 17.0 MB before against 15.3 default). Seen in
    one pair of runs of three at most (below); a `_kept_more` never true fails after three
    pairs (tried by hand)."""
    before, nohold, default = serve_runs["before"], serve_runs["no-hold"], serve_runs["default"]
    # (the idle's discards are no measure of it: before's were 0.5 to 8.5 MB beside two CPU
    # hogs, the collector's and the arena's own). A failure at load 14 in CI left no message:
    # this one carries every figure compared and what the idle did, so the log alone tells
    # whether the bodies were not freed (no collection) or freed and kept (no sweep).
    seen = _figures_seen(serve_runs, ("anon_mb_load_end", "anon_mb_idle_end", "discards_idle",
                                      "discarded_mb_idle", "ms_to_floor", "requests",
                                      "collections"))
    # Whether the bodies' large pages still hold live blocks when the load ends is the
    # scheduler's: a CI run beside one CPU hog (load 4.7) served 1,071 requests under no-hold
    # against 3,535 before, and before gave 4.4 MB back at idle (whole pages emptied, the
    # arena's purge, which purging off keeps), 13.3 MB against no-hold's 13.8. So a pair of
    # runs where purging off kept less is measured again, twice at most: the claim is that
    # some pair of three shows it, and it fails when the two designs behave alike.
    pairs = [(before, nohold)]
    while not _kept_more(*pairs[-1]) and len(pairs) < 3:
        w, p = workload_params("bun-serve", {"load_s": "2", "idle_s": "4"})
        pairs.append(tuple(measure_once(bunmod.find_bun(), w, p, d).figures
                           for d in ("before", "no-hold")))
    again = [(round(b["anon_mb_idle_end"], 1), round(n["anon_mb_idle_end"], 1))
             for b, n in pairs[1:]]
    assert _kept_more(*pairs[-1]), \
        f"purging off kept no more than 3 MB over no-hold at the idle's end in " \
        f"{len(pairs)} pairs of runs: {seen}; the others' (before, no-hold) idle ends: {again}"
    assert default["anon_mb_idle_end"] < default["anon_mb_load_end"], \
        f"the default gave nothing back in the idle: {seen}"


def _kept_more(before: dict, nohold: dict) -> bool:
    return before["anon_mb_idle_end"] > nohold["anon_mb_idle_end"] + 3


def test_the_real_loop_turns_several_times_in_the_idle_and_the_window_is_the_idles(serve_runs):
    """perf's second window (purgecheck/measure/run.py) counts the main thread's epoll waits
    from the end of the load to the end of the idle: on 2026-12-04 9 to 13 in 3 s of idle of
    the nothing-kept server (strace had found 11), the runtime's timers. At least 2 in 4 s:
    fails on a count of 0 (the model's one park through the idle); at most 400: fails on a
    window that counts the load's turns too (thousands in 2 s of load)."""
    for d, f in serve_runs.items():
        if "loop_turns" not in f:
            pytest.skip("perf did not count the load's turns here")
        assert 2 <= f["loop_turns_idle"] <= 400, _figures_seen(serve_runs, (
            "loop_turns", "loop_turns_idle", "scavenger_passes_idle"))


def _figures_seen(runs: dict[str, dict], keys: tuple[str, ...]) -> str:
    """`keys` of each design's figures and the machine's load, for an assertion's message."""
    per_design = "; ".join(f"{d}: " + ", ".join(f"{k} {_num(f.get(k))}" for k in keys)
                           for d, f in runs.items())
    return f"{per_design}; load average {os.getloadavg()[0]:.1f}"


def _num(v) -> str:
    return "absent" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)


def test_typed_arrays_leave_their_free_memory_resident_only_with_purging_off():
    w, p = workload_params("typed-arrays", {"allocations": "1200", "idle_s": "1"})
    figs = {d: measure_once(bunmod.find_bun(), w, p, d).figures for d in ("before", "epoch")}
    assert figs["before"]["anon_mb_idle_end"] > figs["epoch"]["anon_mb_idle_end"] + 20
    assert figs["epoch"]["anon_mb_idle_end"] < figs["epoch"]["anon_mb_load_end"]


def test_the_command_measures_and_its_json_has_every_run(tmp_path):
    out = tmp_path / "m.json"
    assert main(["measure", "buffer-loop", "--set", "seconds=0.5", "--set", "idle_s=0.3",
                 "--design", "epoch", "--repeats", "2", "--out", str(out)]) == 0
    doc = orjson.loads(out.read_bytes())
    assert len(doc["runs"]) == 2 and doc["summary"]["epoch"]["requests"]["n"] == 2
    assert doc["summary"]["epoch"]["requests"]["min"] > 10
    assert doc["machine"]["cpus"] == os.cpu_count()


# -- the comparison: bands and verdicts on figures given here ---------------------------------

def _summary(values: dict[str, dict[str, list[float]]]) -> dict:
    from purgecheck.measure.report import spread
    return {d: {k: spread(v) for k, v in figs.items()} for d, figs in values.items()}


def _figs(requests, discards, mb, faults, anon):
    return {"requests": requests, "load_s": [2.0] * len(requests), "discards_load": discards,
            "discarded_mb_load": mb, "faults_per_request": faults, "anon_mb_idle_end": anon}


def test_the_bands():
    assert within(100, 199, "factor", 2) and not within(100, 201, "factor", 2)
    assert within(100, 51, "factor", 2) and not within(100, 49, "factor", 2)
    assert not within(100, 0, "factor", 2)  # a zero side is never inside a factor band
    assert within(10, 12.5, "relative", 0.25) and not within(10, 12.6, "relative", 0.25)


def test_a_comparison_judges_the_excess_over_before_against_the_model():
    summary = _summary({
        "before": _figs([4000, 4100], [20, 22], [30, 31], [1.0, 1.1], [30, 31]),
        "no-hold": _figs([3000, 3100], [1500, 1600], [800, 900], [20, 22], [10, 11]),
        "epoch": _figs([4000, 4100], [21, 23], [30, 32], [1.0, 1.2], [12, 13])})
    model = {"before": {"all_large_discards_load": 0, "all_discarded_bytes_load": 0,
                        "refaults_per_request": 0, "rss_end": 20 << 20},
             "no-hold": {"all_large_discards_load": 100, "all_discarded_bytes_load": 60 << 20,
                         "refaults_per_request": 15.0, "rss_end": 1 << 20},
             "epoch": {"all_large_discards_load": 0, "all_discarded_bytes_load": 0,
                       "refaults_per_request": 0.0, "rss_end": 2 << 20}}
    params = {"body": 262144, "kept": 0, "keep_every": 1000, "connections": 16, "idle_s": 1}
    c = compare("bun-serve", params, summary, model)
    v = {(r.design, r.figure): r.verdict for r in c.rows}
    assert v[("no-hold", "discards_load")] == "outside band"  # 100 against 1530
    assert v[("no-hold", "faults_per_request")] == "within band"  # 15 against 20
    assert v[("epoch", "discards_load")] == "within noise"  # 1 more call, inside the spread
    assert v[("epoch", "mb_given_back_idle")] == "within band"  # 18 against 18
    assert c.model_params["before"]["requests"] == 4050 and c.model_params["no-hold"]["requests"] == 3050
    assert c.model_params["epoch"]["inflight"] == 16
    assert c.order["discards_load"]["same"]


def test_designs_in_another_order_on_the_model_are_reported():
    summary = _summary({
        "before": _figs([4000] * 2, [20] * 2, [30] * 2, [1.0] * 2, [30] * 2),
        "no-hold": _figs([3000] * 2, [1500] * 2, [800] * 2, [20] * 2, [10] * 2),
        "epoch": _figs([4000] * 2, [200] * 2, [90] * 2, [2.0] * 2, [12] * 2)})
    zero = {"all_large_discards_load": 0, "all_discarded_bytes_load": 0, "refaults_per_request": 0,
            "rss_end": 0}
    model = {"before": zero, "no-hold": {**zero, "all_large_discards_load": 10},
             "epoch": {**zero, "all_large_discards_load": 50}}
    c = compare("bun-serve", {"body": 1, "kept": 0, "keep_every": 1, "connections": 1,
                              "idle_s": 1}, summary, model)
    assert not c.order["discards_load"]["same"]


# -- a recorded measurement: the seed tables and --compare without running Bun ----------------

def test_the_seed_tables_from_a_recorded_measurement_show_its_medians(capsys, tmp_path):
    # Without the recording's bun-serve-nothing-kept: the server's code path again (its idle
    # table, kept=0), a fifth of the test's 21 s of CPU; the buffer loop's inline sweeps stay
    whole = orjson.loads(open(DATA, "rb").read())
    recorded = {w: whole["workloads"][w] for w in ("typed-arrays", "bun-serve", "buffer-loop")}
    three = tmp_path / "three-workloads.json"
    three.write_bytes(orjson.dumps({**whole, "workloads": recorded}))
    assert main(["measure", "--seed-tables", "--from", str(three), "--json",
                 "--model-runs", "1"]) == 0  # one model run: the test's CPU as it was
    doc = orjson.loads(capsys.readouterr().out)
    [loop] = [t for t in doc["tables"] if t.startswith("the loop of 256 KiB buffers")]
    assert any(c["design"] == "handoff-only" and c["model"] is not None
               for c in doc["tables"][loop])
    cells = {(c["figure"], c["design"]): c for c in doc["tables"]["at idle: typed-arrays"]}
    assert cells[("anon_mb", "epoch")]["real"] == \
        recorded["typed-arrays"]["summary"]["epoch"]["anon_mb_idle_end"]["median"]
    assert cells[("anon_mb", "epoch")]["seed"] == [53.9, 53.9]
    assert cells[("anon_mb", "before")]["model"] == cells[("anon_mb", "before")]["real"]
    assert cells[("free_resident_mb", "epoch")]["real"] is None  # a black box cannot show it
    load = {(c["figure"], c["design"]): c for c in doc["tables"]["under load: bun-serve"]}
    assert load[("discards", "clock")]["real"] is None  # no option expresses the clock rule
    assert load[("discards", "clock")]["model"] is not None


@pytest.mark.parametrize("argv, words", [
    (["measure"], "name a workload"),
    (["measure", "nope"], "unknown workload"),
    (["measure", "bun-serve", "--set", "load_s=0"], "load_s must be in"),
    (["measure", "bun-serve", "--set", "load_s"], "expected NAME=VALUE"),
    (["measure", "bun-serve", "--set", "conns=3"], "has no parameter"),
    (["measure", "bun-serve", "--design", "clock"], "unknown design"),
    (["measure", "bun-serve", "--repeats", "0"], "--repeats"),
    (["measure", "bun-serve", "--option", "nope=1"], "--option"),
    (["measure", "bun-serve", "--record"], "--record"),
    (["measure", "bun-serve", "--from", "x.json"], "--from"),
    (["measure", "--seed-tables", "--from", "/nonexistent.json"], "--from"),
    (["measure", "bun-serve", "--model-runs", "2"], "--model-runs"),
    (["measure", "--seed-tables", "--model-runs", "0"], "--model-runs"),
    (["measure", "--seed-tables", "--design", "epoch"], "--seed-tables"),
    (["measure", "bun-serve", "--out", ""], "--out"),
    (["measure", "bun-serve", "--out", "/nonexistent/dir/x.json"], "--out"),
    (["measure", "--add-to", "docs/data/real-bun.json"], "--seed-tables"),
    (["measure", "--seed-tables", "--add-to", "/nonexistent.json"], "--add-to"),
    (["measure", "bun-serve", "--add-to", "docs/data/real-bun.json", "--set", "load_s=2"],
     "--set"),
    (["measure", "--seed-tables", "--add-to", "docs/data/real-bun.json", "--record"], "--record"),
])
def test_bad_usage_is_one_line_and_exit_2(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


# -- a program of the user's ---------------------------------------------------------------

def test_a_users_program_is_measured_and_stopped_though_it_never_reads_stdin(tmp_path, capsys):
    script = tmp_path / "app.js"
    script.write_text("console.log('load-start');\n"
                      "const a = []; for (let i = 0; i < 50; i++) a.push(new Uint8Array(300000).fill(1));\n"
                      "console.log('load-end 50');\n"
                      "setInterval(() => a.length, 1 << 30);\n")
    assert main(["measure", "--script", str(script), "--set", "idle_s=0.2", "--design", "before",
                 "--repeats", "1", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    figs = doc["summary"]["before"]
    assert figs["requests"]["median"] == 50
    assert figs["anon_mb_load_end"]["median"] > 14  # 50 x 300 kB written, alive at the end


def test_a_users_program_without_the_load_lines_is_refused_before_running(tmp_path, capsys):
    script = tmp_path / "app.js"
    script.write_text("console.log('hello')\n")
    assert main(["measure", "--script", str(script)]) == 2
    assert "load-start" in capsys.readouterr().err
    assert main(["measure", "--script", str(tmp_path / "none.js")]) == 2


def test_the_claims_carry_the_recorded_real_figures_per_20_s_of_load():
    from purgecheck.measure.seedtables import claim_reals
    from purgecheck.simulate.claims import seed_claims
    record = orjson.loads(open(DATA, "rb").read())
    reals = claim_reals(record)
    s = record["workloads"]["bun-serve"]["summary"]
    per20 = 20 / s["before"]["load_s"]["median"]
    assert reals["load-no-hold"]["no-hold discards"] == \
        pytest.approx(s["no-hold"]["discards_load"]["median"] * per20)
    assert reals["load-no-hold"]["no-hold discarded"] == \
        pytest.approx(s["no-hold"]["discarded_mb_load"]["median"] * per20 / 1024)
    assert "clock discards" not in reals["load-epoch-vs-clock"]  # no option for the clock
    claims = {c.id: c for c in seed_claims(scale=0.02, glibc=False, real=reals)}
    assert claims["load-no-hold"].figure("no-hold discards").real == \
        reals["load-no-hold"]["no-hold discards"]
    assert claims["idle-bun-serve"].figure("epoch free at idle end").real is None


def test_the_real_bun_page_counts_the_verdicts_and_the_orderings():
    from purgecheck.docs.real_bun_page import count_line
    from purgecheck.measure.compare import Comparison, WorkloadComparison
    rows = [Comparison("w", "no-hold", "discards_load", 10.0, 1.0, 12.0, "x2", v)
            for v in ("within band", "within band", "outside band", "within noise")]
    wc = WorkloadComparison("w", {}, {}, rows, {"a": {"same": True}, "b": {"same": False}})
    assert count_line([wc, WorkloadComparison("v", {}, {})]) == (
        "Of the 4 compared figures, 2 are inside the band, 1 within the real noise and 1 "
        "outside; the designs come in the same order on both sides in 1 of the 2 orderings.")
