"""The glibc model (seed 001): the seed's published figures for each version, the digest's
rules of the current glibc, and the settings from the environment."""

from __future__ import annotations

import pytest

from model.glibc import trim
from model.glibc.params import MallocPar, set_param, settings_from_environ
from model.glibc.process import Process
from model.glibc.versions import VERSIONS, version_for_release
from purgecheck.glibc.modelrun import run_model
from purgecheck.formats.glibc_ops import parse_script
from purgecheck.glibc.workloads import WORKLOADS

FIXED = {"mmap_threshold": 33554432, "trim_threshold": 131072}


def bench_free(version: str, settings=None, pages: int = 48, thread: int = 1, n: int = 1024):
    text = WORKLOADS["bench-free" if thread else "bench-free-main"].build(n)
    text = text.replace(str(48 * 4096), str(pages * 4096))
    return run_model(parse_script(text), VERSIONS[version], settings or {})


def madvise_calls(p: Process) -> int:
    c = p.count()
    return c["heap_madvise"] + c["stack_madvise"]


def test_seed_figure_2_21_bench_free_is_1024_madvise_calls():
    p = bench_free("2.21")
    assert p.count()["heap_madvise"] == 1023
    assert p.count()["stack_madvise"] == 1
    assert madvise_calls(p) == 1024  # seed: "this resulted in 1024 calls to madvise"


def test_seed_figure_rfc_bench_free_is_two_madvise_calls():
    p = bench_free("rfc-2015")
    assert madvise_calls(p) == 2  # seed: "With the patch applied, madvise is called twice"


@pytest.mark.parametrize("settings,heap_madvise,mmaps", [
    ({}, 0, 1),  # the first block is mmapped; its free raises trim_threshold
    (FIXED, 1024, 0),
    ({"mmap_threshold": 33554432, "trim_threshold": 67108864}, 0, 0),
    ({"mmap_threshold": 131072}, 0, 1024),
])
def test_digest_table_2_23_thread(settings, heap_madvise, mmaps):
    c = bench_free("2.23+", settings).count()
    assert (c["heap_madvise"], c["chunk_mmap"], c["chunk_munmap"]) == (heap_madvise, mmaps, mmaps)


@pytest.mark.parametrize("settings,shrinks", [({}, 0), (FIXED, 1024),
                                              ({"mmap_threshold": 33554432,
                                                "trim_threshold": 67108864}, 0)])
def test_digest_table_2_23_main_thread_brk(settings, shrinks):
    assert bench_free("2.23+", settings, thread=0).count()["brk_shrink"] == shrinks


def test_16_pages_never_trim_with_defaults():
    for thread in (0, 1):
        c = bench_free("2.23+", pages=16, thread=thread).count()
        assert c["heap_madvise"] == c["brk_shrink"] == c["chunk_mmap"] == 0


def test_dynamic_threshold_after_the_first_free():
    p = bench_free("2.23+", n=1)
    assert (p.mp.mmap_threshold, p.mp.trim_threshold) == (200704, 401408)  # digest


def test_any_setting_switches_the_dynamic_threshold_off():
    mp = MallocPar()
    assert set_param(mp, "top_pad", 0, None) and mp.no_dyn_threshold
    p = bench_free("2.23+", {"top_pad": 131072}, n=2)
    assert p.mp.mmap_threshold == 131072 and p.count()["chunk_mmap"] == 2


def test_2_21_caps_mmap_threshold_2_36_does_not():
    assert not set_param(MallocPar(), "mmap_threshold", 40_000_000, VERSIONS["2.21"].mmap_threshold_cap)
    assert set_param(MallocPar(), "mmap_threshold", 40_000_000, VERSIONS["2.23+"].mmap_threshold_cap)


def test_thread_arena_created_by_tcache_request_in_2_26_plus():
    p = Process(VERSIONS["2.23+"])
    p.start(1)
    p.malloc(1, 0, 24)
    arena = p.threads[1].arena
    seg = arena.segments[0]
    # heap: 640 + heap_info 48 + malloc_state 2200 + 16 + top_pad, rounded to pages
    assert seg.size == 135168
    assert p.threads[1].tcache_chunk.addr - seg.base == 2256  # measured: first block at 0xb70
    p.join(1)


def test_heap_deletion_ignores_trim_threshold():
    text = WORKLOADS["heap-delete"].build(600)
    p = run_model(parse_script(text), VERSIONS["2.23+"], {"trim_threshold": 1 << 30})
    c = p.count()
    assert c["heap_new"] == 2 and c["heap_delete"] == 1 and c["heap_madvise"] == 0


@pytest.mark.parametrize("top,pad,thr,rule21,rule22,rule23", [
    (300000, 131072, 131072, 167936, 167936, 167936),
    (200000, 131072, 401408, 65536, 0, 0),
    (300000, 131072, 401408, 167936, 0, 0),
    (135168, 131072, 0, 0, 0, 0),
])
def test_trim_rules_per_version(top, pad, thr, rule21, rule22, rule23):
    assert trim.heap_trim_extra_2_21(top, pad, thr) == rule21
    assert trim.heap_trim_extra_2_22(top, pad, thr) == rule22
    assert trim.heap_trim_extra_2_23(top, pad, thr) == rule23


def test_rfc_counters_halve_and_the_ratio():
    mt = trim.MadviseThrottle(99, 40)
    trim.rfc_count_shrink(mt)
    assert (mt.event_madvise, mt.event_large_malloc) == (50, 20)
    assert trim.rfc_ratio_allows(trim.MadviseThrottle(4, 2))  # 300 / 4 = 75 < 100, L > 1
    assert not trim.rfc_ratio_allows(trim.MadviseThrottle(3, 2))  # 100: balanced, deferred
    mt = trim.MadviseThrottle(0, 5)
    trim.rfc_count_growth(mt)
    assert mt.event_large_malloc == 5  # counted only while event_madvise != 0


def test_settings_from_environ_aliases_and_tunables():
    assert settings_from_environ({"MALLOC_TRIM_THRESHOLD_": "131072",
                                  "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=0x2000000:"
                                                    "glibc.elision.enable=1"}) == \
        {"trim_threshold": 131072, "mmap_threshold": 33554432}
    with pytest.raises(ValueError, match="MALLOC_TOP_PAD_: expected a number"):
        settings_from_environ({"MALLOC_TOP_PAD_": "lots"})
    with pytest.raises(ValueError, match="already set by MALLOC_TRIM_THRESHOLD_"):
        settings_from_environ({"MALLOC_TRIM_THRESHOLD_": "1",
                               "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=2"})


def test_version_for_release():
    assert version_for_release("2.36").name == "2.23+"
    assert version_for_release("2.22").name == "2.22"
    with pytest.raises(ValueError):
        version_for_release("2.19")
