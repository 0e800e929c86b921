"""The calls real programs make beyond malloc and free (realloc, calloc, the aligned calls,
malloc_trim), on the glibc model and on the real glibc: the same system calls in every
category and every block at the same address (tests/data/glibc_calls.ops); each rule, broken,
is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

import model.glibc.mtrim as mtrim_module
import model.glibc.process as process_module
import model.glibc.system as system_module
from model.glibc.constants import request2size
from model.glibc.malloc import int_free, int_malloc
from model.glibc.versions import VERSIONS
from purgecheck.glibc.compare import compare
from purgecheck.glibc.replay import script_address_difference

SCRIPT = Path(__file__).parent / "data" / "glibc_calls.ops"
V = VERSIONS["2.23+"]


def text() -> str:
    return SCRIPT.read_text()


def test_every_call_agrees_with_glibc_in_counts_and_addresses():
    cmp = compare(text(), str(SCRIPT), {})
    assert cmp.mismatches == []
    counts = cmp.measured.counts
    assert counts["chunk_mremap"] == 2 and counts["main_madvise"] >= 1
    assert counts["heap_new"] == 1 and counts["chunk_mmap"] == 2
    assert script_address_difference(text(), V) is None


def never_grows_in_place(p, av, t, c, nb):
    new = int_malloc(p, av, nb, t)
    int_free(p, av, c, t)
    return new


def original_realloc_unless_growing(p, av, t, c, nb):
    if c.size < nb:
        return never_grows_in_place(p, av, t, c, nb)
    return ORIGINAL_REALLOC(p, av, t, c, nb)


ORIGINAL_REALLOC = process_module.int_realloc


def calloc_through_tcache(self, tid, block, size):
    return self.malloc(tid, block, size)


def memalign_ignoring_alignment(p, av, t, alignment, size):
    return int_malloc(p, av, request2size(size), t)


@pytest.mark.parametrize("patch", [
    lambda mp: mp.setattr(process_module, "int_realloc", original_realloc_unless_growing),
    lambda mp: mp.setattr(process_module.Process, "calloc", calloc_through_tcache),
    lambda mp: mp.setattr(process_module, "int_memalign", memalign_ignoring_alignment),
], ids=["realloc-never-grows-in-place", "calloc-from-tcache", "memalign-unaligned"])
def test_a_broken_call_rule_puts_a_block_elsewhere(monkeypatch, patch):
    patch(monkeypatch)
    diff = script_address_difference(text(), V)
    assert diff is not None and diff.real != diff.model


@pytest.mark.parametrize("patch,category", [
    (lambda mp: mp.setattr(system_module, "mremap_chunk", lambda p, c, nb: None),
     "chunk_mremap"),
    (lambda mp: mp.setattr(mtrim_module, "SIZEOF_MALLOC_CHUNK", 1 << 40), "main_madvise"),
], ids=["no-mremap", "trim-without-madvise"])
def test_a_broken_call_rule_changes_the_system_calls(monkeypatch, patch, category):
    patch(monkeypatch)
    cmp = compare(text(), str(SCRIPT), {})
    assert any(m.startswith(f"{category}:") for m in cmp.mismatches), cmp.mismatches


def test_addresses_need_a_script_without_repeat_blocks():
    with pytest.raises(ValueError, match="unroll the repeat blocks"):
        script_address_difference("repeat 2\n0 malloc 0 10\n0 free 0\nend\n", V)
