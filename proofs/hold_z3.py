"""Z3: the hold keeps a large page's free blocks for an interval after its last allocation.

Seed 000, (2): "An epoch lasts for the interval at least and only a sweep ends it, so with
the third epoch there to be seen, the whole of the second one lies between the allocation and
now: those blocks were left alone for the interval at least."

The proof, for any interval and any epochs (64-bit), over a timeline in which epoch e really
begins at `began(e)`:
- the epochs last the interval at least (EP-NO-SHORT-EPOCH, proved by the advance proof; used
  here as a lemma, with its consequence that `began` is monotone);
- the allocation happens at `t_alloc`, in epoch E_a (`began(E_a) <= t_alloc < began(E_a+1)`),
  reads the epoch and stores the stamp with the model's `mi_page_stamp`;
- a sweep later reads epoch E_d (acquire; `began(E_d) <= t_read`), never older than the
  stamp (the page reached it through a release it acquired: seed 000), and discards the free
  blocks unless the model's hold (`is_stamp` and `is_epoch_young`) keeps the page.
ASSUMPTION (the staleness of the allocating thread's relaxed read, digest 9.2): the read
returns the epoch current at the allocation (E_a). Under it, t_discard - t_alloc >= interval
(HD-INTERVAL, and HD-YOUNG-KEPT for the age test itself). With a read one epoch stale
(E_a - 1), Z3 finds a discard 1 ms after the allocation: the twin `stale-read-1`.
"""

from __future__ import annotations

from types import SimpleNamespace

import z3

import model.epoch as epoch
import model.page as page
import model.stamp as stamp
from proofs import agreement
from proofs.core import Claim, Outcome, Proof, Twin, run_claims, val
from proofs.steptable import Step, render

W = 64


def is_held(state, current):
    """model.variants.is_held_by_epoch for a large page with the interval on:
    `is_stamp(state) and is_epoch_young(epoch, stamp_epoch(state))` (mirrored: Python's `and`
    cannot take Z3 terms; the model's functions do the arithmetic)."""
    tag_ok = (state & page.MI_PAGE_SWEPT_TAG_MASK) == page.MI_PAGE_SWEPT_STAMP_TAG
    return z3.And(tag_ok, epoch.is_epoch_young(current, page.stamp_epoch(state)))


def hold_claims(stale_epochs: int = 0) -> list[Claim]:
    interval = z3.Int("interval")
    t_alloc, t_read, t_discard = z3.Ints("t_alloc t_read t_discard")
    e_a, e_read, e_d, prev = z3.BitVecs("epoch_at_alloc epoch_read epoch_at_sweep "
                                        "swept_state_before", W)
    began = z3.Function("epoch_began", z3.BitVecSort(W), z3.IntSort())
    # The allocation: the model writes the stamp (a page object with a symbolic field; the
    # model's "only when it differs" test is decided on the terms, and writing an equal value
    # again changes nothing, so both of its branches leave the same state).
    pg = SimpleNamespace(swept_state=prev, version=0, emit=lambda *a, **k: None)
    stamp.mi_page_stamp(pg, e_read)
    state = pg.swept_state
    hyps = [
        interval >= 1, interval <= epoch.MI_HOLES_INTERVAL_MAX_MS,
        z3.ULT(e_a, 2 ** 62), z3.ULT(e_d, 2 ** 62),
        # EP-NO-SHORT-EPOCH at the epochs that matter, and its consequence: began is monotone
        began(e_a + 1) - began(e_a) >= interval, began(e_a + 2) - began(e_a + 1) >= interval,
        z3.Implies(z3.UGE(e_d, e_a + 2), began(e_d) >= began(e_a + 2)),
        z3.Implies(z3.ULE(e_d, e_a), began(e_d) <= began(e_a)),
        # the allocation in epoch e_a; its read at most `stale_epochs` old (never negative)
        began(e_a) <= t_alloc, t_alloc < began(e_a + 1),
        z3.ULE(e_read, e_a), z3.UGE(e_read + stale_epochs, e_a), z3.UGE(e_a, stale_epochs),
        # the sweep: after the allocation, an acquire read of the epoch then the walk
        t_alloc <= t_read, t_read <= t_discard, began(e_d) <= t_read,
        z3.UGE(e_d, e_a) if stale_epochs == 0 else z3.UGE(e_d, e_read),
        z3.Implies(z3.UGT(e_d, e_a), began(e_a + 1) <= began(e_d)),
        z3.Not(is_held(state, e_d)),  # the walk discards
    ]
    small = [interval == 100, z3.ULE(e_a, 5), z3.ULE(e_d, 8), began(e_a) >= 0,
             prev == page.MI_PAGE_SWEPT_NONE]
    reads = "fresh reads" if not stale_epochs else f"reads up to {stale_epochs} epoch(s) stale"
    return [Claim(f"HD-INTERVAL: with {reads}, no free block of a large page is discarded "
                  f"less than an interval after the page was last allocated from", hyps,
                  t_discard - t_alloc >= interval, small)]


def render_hold(claim: Claim, m: z3.ModelRef) -> str:
    interval = val(m, z3.Int("interval"))
    ta, tr, td = (val(m, z3.Int(n)) for n in ("t_alloc", "t_read", "t_discard"))
    e_a, e_read, e_d, prev = z3.BitVecs("epoch_at_alloc epoch_read epoch_at_sweep "
                                        "swept_state_before", W)
    began = z3.Function("epoch_began", z3.BitVecSort(W), z3.IntSort())
    ea, ed, er = val(m, e_a), val(m, e_d), val(m, e_read)
    pg = SimpleNamespace(swept_state=prev, version=0, emit=lambda *a, **k: None)
    stamp.mi_page_stamp(pg, e_read)
    state = val(m, pg.swept_state)
    steps = [Step("epoch", f"epoch {ea} begins", {"t ms": val(m, began(e_a)), "epoch": ea})]
    steps.append(Step("allocating thread", "malloc, relaxed read of the epoch, stamp",
                      {"t ms": ta, "epoch": ea, "epoch read": er,
                       "swept_state": hex(state)},
                      "stale by %d" % (ea - er) if ea != er else "fresh read"))
    for e in range(ea + 1, min(ed, ea + 3) + 1):
        steps.append(Step("sweeper", f"epoch {e} begins",
                          {"t ms": val(m, began(z3.BitVecVal(e, W))), "epoch": e,
                           "epoch read": er, "swept_state": hex(state)}))
    age = (ed - (state & page.EPOCH_MASK)) % epoch.EPOCH_MODULUS
    steps.append(Step("sweeper", f"reads epoch {ed}, age {age}: not held",
                      {"t ms": tr, "epoch": ed, "epoch read": er, "swept_state": hex(state)}))
    steps.append(Step("sweeper", "walk discards the free blocks",
                      {"t ms": td, "epoch": ed, "epoch read": er, "swept_state": hex(state)},
                      f"{td - ta} ms after the allocation < interval {interval} ms"))
    return render(steps, title="counterexample (timeline):")


# The states and epochs on which `is_held` is compared with the model's hold before Z3
# proves the bound: no walk yet (NONE), walked states, and stamps around 0, 2^31 and 2^32;
# the current epoch at each of those, one and two after, and at the wraparound.
HOLD_EPOCHS = (0, 1, 2, 3, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 33 + 5)


def _hold_points() -> list[tuple[int, int]]:
    states = [page.MI_PAGE_SWEPT_NONE, page.encode_walked(32, 0), page.encode_walked(32, 7)]
    states += [page.encode_stamp(e) for e in HOLD_EPOCHS]
    return [(st, cur) for st in states for cur in HOLD_EPOCHS]


def hold_agrees() -> Outcome | None:
    """is_held against model.variants.is_held_by_epoch (looked up now), interval on."""
    import model.variants as variants

    st, cur = z3.BitVecs("swept_state epoch", W)
    term = is_held(st, cur)
    return agreement.compare(
        "is_held(swept_state, epoch)", _hold_points(),
        lambda p: agreement.substituted(term, [(st, p[0]), (cur, p[1])]),
        lambda p: variants.is_held_by_epoch(SimpleNamespace(swept_state=p[0]),
                                            SimpleNamespace(interval=100, epoch=p[1])))


def run_hold_proof(quick: bool, stale_epochs: int = 0) -> Outcome:
    def prove() -> Outcome:
        return run_claims(hold_claims(stale_epochs), render_hold,
                          "any interval, any 64-bit epochs, fresh epoch reads")
    return agreement.then_prove(hold_agrees, f"{len(_hold_points())} (state, epoch) pairs",
                                prove)


PROOF = Proof("hold", ("HD-INTERVAL", "HD-YOUNG-KEPT"), "z3", run_hold_proof,
              "a large page keeps its free blocks an interval after the last allocation")
TWINS = [
    Twin("age-lt-1", "hold", ("HD-INTERVAL", "HD-YOUNG-KEPT"), "z3", run_hold_proof,
         "mutant age-lt-1: the hold compares age < 1", mutant="age-lt-1"),
    Twin("stamp-never-written", "hold", ("HD-INTERVAL",), "z3", run_hold_proof,
         "mutant stamp-never-written: the allocation path writes no stamp",
         mutant="stamp-never-written"),
    Twin("stale-read-1", "hold", ("HD-INTERVAL",), "z3",
         lambda quick: run_hold_proof(quick, stale_epochs=1),
         "the allocating thread's relaxed read may be one epoch stale"),
]
