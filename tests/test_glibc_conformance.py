"""The model of the installed glibc against the real library under strace (seed 001, digest
"Measured on glibc 2.36"). Every case runs at its quick scale here; the full scale (the
digest's 1024 iterations and more) is behind the slow marker."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from model.glibc.process import Process
from model.glibc.syscalls import CATEGORIES
from model.glibc.versions import VERSIONS
from purgecheck.glibc.compare import compare
from purgecheck.glibc.trace import (Call, Classifier, classify, driver_path, installed_release,
                                    parse_strace)
from purgecheck.glibc.workloads import CASES, WORKLOADS

pytestmark = pytest.mark.skipif(shutil.which("strace") is None,
                                reason="strace missing: `make setup` installs it")


def measured(case, quick: bool):
    cmp = compare(WORKLOADS[case.workload].script(quick=quick), case.name, case.env,
                  versions=[])
    assert cmp.measured.calls > 0
    return cmp


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_the_real_glibc_quick(case):
    cmp = measured(case, quick=True)
    assert cmp.ok, "\n".join(cmp.mismatches)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_the_real_glibc_full(case):
    cmp = measured(case, quick=False)
    assert cmp.ok, "\n".join(cmp.mismatches)


def test_digest_rows_are_what_glibc_does_here():
    """The digest's table at the seed's 1024 iterations, measured (a few tenths of a second)."""
    rows = {"bench-free/defaults": 0, "bench-free/fixed-128k": 1024, "bench-free/trim-64m": 0}
    for case in CASES:
        if case.name in rows:
            cmp = compare(WORKLOADS[case.workload].script(), case.name, case.env, versions=[])
            assert cmp.measured.counts["heap_madvise"] == rows[case.name], case.name
            assert cmp.ok, cmp.mismatches


def test_installed_release_is_a_version_number():
    major, minor = installed_release().split(".")[:2]
    assert int(major) == 2 and int(minor) >= 21


def test_a_broken_model_disagrees_with_glibc():
    """The conformance check can fail: 2.21's rule predicts madvises glibc 2.36 does not make."""
    case = next(c for c in CASES if c.name == "bench-free/defaults")
    p = compare(WORKLOADS[case.workload].script(quick=True), case.name, {}, versions=["2.21"])
    assert p.predicted["2.21"]["heap_madvise"] > 0
    assert p.measured.counts["heap_madvise"] == 0


def test_classifier_by_address():
    text = """\
10  brk(NULL) = 0x1000
10  getppid() = 1
10  brk(NULL) = 0x1000
10  brk(0x22000) = 0x22000
10  mmap(NULL, 8392704, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK, -1, 0) = 0x7f0000000000
11  mmap(NULL, 134217728, PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0) = 0x7e0002000000
11  munmap(0x7e0002000000, 33554432) = 0
11  mprotect(0x7e0004000000, 135168, PROT_READ|PROT_WRITE) = 0
11  madvise(0x7e0004021000, 65536, MADV_DONTNEED <unfinished ...>
10  brk(0x21000) = 0x21000
11  <... madvise resumed>) = 0
11  madvise(0x7f0000000000, 4096, MADV_DONTNEED) = 0
11  mmap(NULL, 200704, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7d0000000000
11  munmap(0x7d0000000000, 200704) = 0
11  munmap(0x7e0004000000, 67108864) = 0
10  getppid() = 1
10  brk(0x30000) = 0x30000
"""
    r = classify(parse_strace(text))
    got = {k: v for k, v in r.counts.items() if v}
    assert got == {"brk_query": 1, "brk_grow": 1, "brk_shrink": 1, "stack_mmap": 1,
                   "heap_new": 1, "heap_madvise": 1, "stack_madvise": 1, "chunk_mmap": 1,
                   "chunk_munmap": 1, "heap_delete": 1}
    assert r.ignored == 2 and not r.unclassified


def test_unknown_call_is_reported_not_dropped():
    cl = Classifier()
    call = Call(1, "madvise", ["0x1234000", "4096", "MADV_DONTNEED"], "0", "madvise(...)")
    assert cl.classify(call) is None


def test_model_categories_are_the_classifier_categories():
    p = Process(VERSIONS["2.23+"])
    assert set(p.count()) == set(CATEGORIES)


def test_driver_rejects_a_bad_script_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.ops"
    bad.write_text("1 start\n1 malloc 0 lots\n1 join\n")
    proc = subprocess.run([str(driver_path()), str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"{bad}:2: expected a size in bytes (0..1099511627776), got lots"
    bad.write_text("1 malloc 0 10\n")
    proc = subprocess.run([str(driver_path()), str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and ":1: the thread is not running" in proc.stderr
