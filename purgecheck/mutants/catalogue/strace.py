"""Mutants of the glibc model that only strace conformance catches (GL-STRACE-CONFORMANCE).

They leave every arena as it was and change only the system calls the model predicts, so no
arena invariant can see them: the real glibc, traced with strace, is the judge (seed 001,
digest "Rules": after shrink_heap "`size` shrinks, `mprotect_size` does not"). Loaded with the
rest of the catalogue by purgecheck/mutants/__init__.py.
"""

from __future__ import annotations

from model.glibc import system
from purgecheck.mutants.patching import Patch, mutant


def _regrow_mprotects(p, seg, diff, grow_heap=system.grow_heap) -> bool:
    """Broken: a thread heap that regrows into pages it had before a shrink_heap (below
    mprotect_size, still PROT_READ|WRITE) is predicted to mprotect them again; glibc makes no
    system call there, so seed 001's shrink/regrow loop is predicted one mprotect per cycle."""
    size, opened = seg.size, seg.mprotect_size
    grown = grow_heap(p, seg, diff)  # the original (a default: `applied` rebinds globals)
    if grown and seg.mprotect_size == opened:
        p.emit("mprotect", "heap_mprotect", seg.base + size, seg.size - size)
    return grown


mutant("glibc-regrow-mprotects", "glibc: a heap regrowing into pages it had before a shrink "
       "is predicted to mprotect them again", ("GL-STRACE-CONFORMANCE",),
       Patch("model.glibc.system", "grow_heap", _regrow_mprotects),
       seen_by_one="only the glibc engine runs the glibc model, and of its checks only strace "
       "against the real glibc sees this one: the arena is as it was, only a system call "
       "more is predicted")
