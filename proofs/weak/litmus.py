"""The classic litmus tests, the oracles of proofs.weak.memory (issue 31).

Each test is a few straight-line threads, a weak outcome, and whether RC11 allows it, as the
literature gives it: the RC11 paper (Lahav, Vafeiadis, Kang, Hur, Dreyer, "Repairing
sequential consistency in C/C++11", PLDI 2017), the promising semantics (Kang et al., POPL
2017) and the herd/GenMC litmus collections. A memory model passes an oracle when the weak
outcome is reachable exactly when the literature says it is allowed.

LB is the one test where RC11 and C11 part: RC11 forbids the relaxed LB outcome (po U rf is
acyclic), C11 allows it and ARMv8 hardware shows it. The model has no load buffering, so it
forbids LB whatever the orderings; the oracle records RC11's verdict.

RSEQ-PO is the release sequence of a same-thread later write: RC11 (and C11 before C++20)
keep it in the release sequence (forbidden), C++20 dropped it (allowed). The model follows
RC11.
"""

from __future__ import annotations

from dataclasses import dataclass

from proofs.weak import explorer as ex
from proofs.weak import memory as mm
from proofs.weak.memory import ACQ, ACQ_REL, REL, RLX, SC


@dataclass(frozen=True)
class Litmus:
    name: str
    threads: tuple  # per thread a tuple of ops (see compile_thread)
    weak: tuple  # the weak outcome: ((name, value), ...) over registers and final values
    allowed: bool  # RC11's verdict on the weak outcome
    note: str = ""

    def locations(self) -> tuple[str, ...]:
        locs = []
        for ops in self.threads:
            for op in ops:
                if op[0] != "F" and op[1] not in locs:
                    locs.append(op[1])
        for name, _ in self.weak:
            if not name.startswith("r") and name not in locs:
                locs.append(name)
        return tuple(sorted(locs))


def compile_thread(ops: tuple, locs: tuple, regs: list[str]):
    """A straight-line thread. Ops: ("W", loc, value, order), ("R", loc, reg, order),
    ("F", order), ("FAA", loc, delta, order, reg), ("CAS", loc, expected, new, order,
    fail_order, reg). Registers are thread-local slots after the pc."""
    def slot(reg):
        return 1 + regs.index(reg)

    def setreg(r, reg, value):
        k = slot(reg)
        return (r[0] + 1,) + r[1:k] + (value,) + r[k + 1:]

    def nxt(r):
        return (r[0] + 1,) + r[1:]

    def prog(r):
        if r[0] >= len(ops):
            return None
        op = ops[r[0]]
        kind = op[0]
        if kind == "W":
            return ex.Store(locs.index(op[1]), op[2], op[3], nxt)
        if kind == "R":
            return ex.Load(locs.index(op[1]), op[3], lambda r, v, reg=op[2]: setreg(r, reg, v))
        if kind == "F":
            return ex.Fence(op[1], nxt)
        if kind == "FAA":
            return ex.fetch_add(locs.index(op[1]), op[2], op[3],
                                lambda r, old, ok, reg=op[4]: setreg(r, reg, old))
        if kind == "CAS":
            return ex.cas(locs.index(op[1]), op[2], op[3], op[4], op[5],
                          lambda r, old, ok, reg=op[6]: setreg(r, reg, old))
        raise ValueError(f"unknown op {op!r}")
    return prog


def system(test: Litmus, model: mm.MemoryModel = mm.RC11) -> ex.System:
    locs = test.locations()
    threads, names = [], []
    for n, ops in enumerate(test.threads):
        regs = [op[2] if op[0] == "R" else op[-1] for op in ops if op[0] in ("R", "FAA", "CAS")]
        names.append(regs)
        threads.append((f"T{n}", compile_thread(ops, locs, regs), (0,) + (None,) * len(regs)))

    def outcome(regs, mem):
        out = []
        for n, rnames in enumerate(names):
            out += [(name, regs[n][1 + k]) for k, name in enumerate(rnames)]
        out += [(loc, mm.latest(mem, x)) for x, loc in enumerate(locs)]
        return tuple(sorted(out))

    return ex.System(locations=locs, initial=(0,) * len(locs), threads=threads, model=model,
                     outcome=outcome)


def is_weak_reached(test: Litmus, outcomes: set) -> bool:
    want = set(test.weak)
    return any(want <= set(o) for o in outcomes)


def run(test: Litmus, model: mm.MemoryModel = mm.RC11):
    """(weak outcome reached?, report)."""
    rep = ex.explore(system(test, model), stop_at_first=False)
    return is_weak_reached(test, rep.outcomes), rep


def _mp(w_data, w_flag, r_flag, r_data, fences=None):
    t0 = [("W", "x", 1, w_data)] + ([("F", fences[0])] if fences else []) + \
        [("W", "y", 1, w_flag)]
    t1 = [("R", "y", "r1", r_flag)] + ([("F", fences[1])] if fences else []) + \
        [("R", "x", "r2", r_data)]
    return (tuple(t0), tuple(t1))


def _sb(o_w, o_r, fence=None):
    f = [("F", fence)] if fence else []
    return (tuple([("W", "x", 1, o_w)] + f + [("R", "y", "r1", o_r)]),
            tuple([("W", "y", 1, o_w)] + f + [("R", "x", "r2", o_r)]))


def _iriw(o_w, o_r):
    return ((("W", "x", 1, o_w),), (("W", "y", 1, o_w),),
            (("R", "x", "r1", o_r), ("R", "y", "r2", o_r)),
            (("R", "y", "r3", o_r), ("R", "x", "r4", o_r)))


MP_WEAK = (("r1", 1), ("r2", 0))
SB_WEAK = (("r1", 0), ("r2", 0))
IRIW_WEAK = (("r1", 1), ("r2", 0), ("r3", 1), ("r4", 0))

TESTS = {t.name: t for t in [
    Litmus("MP+rlx", _mp(RLX, RLX, RLX, RLX), MP_WEAK, True),
    Litmus("MP+rel+acq", _mp(RLX, REL, ACQ, RLX), MP_WEAK, False),
    Litmus("MP+rel+rlx", _mp(RLX, REL, RLX, RLX), MP_WEAK, True, "no acquire: no sync"),
    Litmus("MP+rlx+acq", _mp(RLX, RLX, ACQ, RLX), MP_WEAK, True, "no release: no sync"),
    Litmus("MP+sc", _mp(SC, SC, SC, SC), MP_WEAK, False),
    Litmus("MP+fences", _mp(RLX, RLX, RLX, RLX, (REL, ACQ)), MP_WEAK, False,
           "release fence before the flag, acquire fence after it"),
    Litmus("MP+relfence+rlx", _mp(RLX, RLX, RLX, RLX, (REL, RLX)), MP_WEAK, True,
           "a release fence without an acquire side"),
    Litmus("SB+rlx", _sb(RLX, RLX), SB_WEAK, True),
    Litmus("SB+rel+acq", _sb(REL, ACQ), SB_WEAK, True, "release/acquire does not order W->R"),
    Litmus("SB+sc", _sb(SC, SC), SB_WEAK, False),
    Litmus("SB+scfences", _sb(RLX, RLX, SC), SB_WEAK, False),
    Litmus("SB+acqrelfences", _sb(RLX, RLX, ACQ_REL), SB_WEAK, True),
    Litmus("LB+rlx", ((("R", "x", "r1", RLX), ("W", "y", 1, RLX)),
                      (("R", "y", "r2", RLX), ("W", "x", 1, RLX))),
           (("r1", 1), ("r2", 1)), False,
           "RC11 forbids it (po U rf acyclic); C11 and ARMv8 allow it"),
    Litmus("LB+acq+rel", ((("R", "x", "r1", ACQ), ("W", "y", 1, REL)),
                          (("R", "y", "r2", ACQ), ("W", "x", 1, REL))),
           (("r1", 1), ("r2", 1)), False),
    Litmus("2+2W+rlx", ((("W", "x", 1, RLX), ("W", "y", 2, RLX)),
                        (("W", "y", 1, RLX), ("W", "x", 2, RLX))),
           (("x", 1), ("y", 1)), True),
    Litmus("2+2W+rel", ((("W", "x", 1, REL), ("W", "y", 2, REL)),
                        (("W", "y", 1, REL), ("W", "x", 2, REL))),
           (("x", 1), ("y", 1)), True, "allowed in RC11 (forbidden in SRA)"),
    Litmus("2+2W+sc", ((("W", "x", 1, SC), ("W", "y", 2, SC)),
                       (("W", "y", 1, SC), ("W", "x", 2, SC))),
           (("x", 1), ("y", 1)), False),
    Litmus("CoRR", ((("W", "x", 1, RLX),), (("R", "x", "r1", RLX), ("R", "x", "r2", RLX))),
           (("r1", 1), ("r2", 0)), False),
    Litmus("CoRR2", ((("W", "x", 1, RLX),), (("W", "x", 2, RLX),),
                     (("R", "x", "r1", RLX), ("R", "x", "r2", RLX)),
                     (("R", "x", "r3", RLX), ("R", "x", "r4", RLX))),
           (("r1", 1), ("r2", 2), ("r3", 2), ("r4", 1)), False,
           "two readers see two writes in opposite orders"),
    Litmus("CoWR", ((("W", "x", 1, RLX), ("R", "x", "r1", RLX)), (("W", "x", 2, RLX),)),
           (("r1", 2), ("x", 1)), False, "read a write mo-before its own"),
    Litmus("CoWR-init", ((("W", "x", 1, RLX), ("R", "x", "r1", RLX)),),
           (("r1", 0),), False),
    Litmus("CoRW", ((("R", "x", "r1", RLX), ("W", "x", 1, RLX)), (("W", "x", 2, RLX),)),
           (("r1", 2), ("x", 2)), False, "read 2, then wrote 1 mo-before it"),
    Litmus("CoWW", ((("W", "x", 1, RLX), ("W", "x", 2, RLX)),), (("x", 1),), False),
    Litmus("IRIW+rlx", _iriw(RLX, RLX), IRIW_WEAK, True),
    Litmus("IRIW+acq", _iriw(REL, ACQ), IRIW_WEAK, True,
           "release/acquire is not multi-copy atomic in C11"),
    Litmus("IRIW+sc", _iriw(SC, SC), IRIW_WEAK, False),
    Litmus("WRC+rlx", ((("W", "x", 1, RLX),),
                       (("R", "x", "r1", RLX), ("W", "y", 1, RLX)),
                       (("R", "y", "r2", RLX), ("R", "x", "r3", RLX))),
           (("r1", 1), ("r2", 1), ("r3", 0)), True),
    Litmus("WRC+rel+acq", ((("W", "x", 1, RLX),),
                           (("R", "x", "r1", RLX), ("W", "y", 1, REL)),
                           (("R", "y", "r2", ACQ), ("R", "x", "r3", RLX))),
           (("r1", 1), ("r2", 1), ("r3", 0)), False, "coherence through hb (eco;hb)"),
    Litmus("ISA2+rlx", ((("W", "x", 1, RLX), ("W", "y", 1, RLX)),
                        (("R", "y", "r1", RLX), ("W", "z", 1, RLX)),
                        (("R", "z", "r2", RLX), ("R", "x", "r3", RLX))),
           (("r1", 1), ("r2", 1), ("r3", 0)), True),
    Litmus("ISA2+rel+acq", ((("W", "x", 1, RLX), ("W", "y", 1, REL)),
                            (("R", "y", "r1", ACQ), ("W", "z", 1, REL)),
                            (("R", "z", "r2", ACQ), ("R", "x", "r3", RLX))),
           (("r1", 1), ("r2", 1), ("r3", 0)), False, "hb is transitive"),
    Litmus("FAA-FAA", ((("FAA", "x", 1, RLX, "r1"),), (("FAA", "x", 1, RLX, "r2"),)),
           (("r1", 0), ("r2", 0)), False, "RMW atomicity: two increments cannot both read 0"),
    Litmus("CAS-CAS", ((("CAS", "x", 0, 1, RLX, RLX, "r1"),),
                       (("CAS", "x", 0, 2, RLX, RLX, "r2"),)),
           (("r1", 0), ("r2", 0)), False, "two strong CASes cannot both succeed on one value"),
    Litmus("RSEQ-RMW", ((("W", "x", 1, RLX), ("W", "y", 1, REL)),
                        (("FAA", "y", 1, RLX, "r1"),),
                        (("R", "y", "r2", ACQ), ("R", "x", "r3", RLX))),
           (("r1", 1), ("r2", 2), ("r3", 0)), False,
           "a relaxed RMW continues the release sequence"),
    Litmus("RSEQ-PO", ((("W", "x", 1, RLX), ("W", "y", 1, REL), ("W", "y", 2, RLX)),
                       (("R", "y", "r1", ACQ), ("R", "x", "r2", RLX))),
           (("r1", 2), ("r2", 0)), False,
           "RC11 keeps a same-thread later write in the release sequence (C++20 does not)"),
    Litmus("MP+rlx-rmw-flag", ((("W", "x", 1, RLX), ("FAA", "y", 1, RLX, "r0")),
                               (("R", "y", "r1", ACQ), ("R", "x", "r2", RLX))),
           MP_WEAK, True, "a relaxed RMW releases nothing"),
]}
