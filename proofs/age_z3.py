"""Z3: the epoch age modulo 2^32 (seed 000, (2); digest sections 5-7).

The proof runs the model's own functions on Z3 bit-vectors: `encode_stamp` (what the
allocation stores, 32 bits of the epoch under the tag), `stamp_epoch` (what the sweep reads
back) and `is_epoch_young` (`(uint32)(epoch - stamp) < 2`). Epochs are 64-bit (uintptr on a
64-bit target). Because the model's functions are called, a mutant of them (purgecheck
mutants `age-no-modulo`, `age-lt-1`) is the broken twin of this proof as it stands.
"""

from __future__ import annotations

import z3

import model.epoch as epoch
import model.page as page
from proofs.core import Claim, Outcome, Proof, Twin, run_claims, val
from proofs.steptable import render_facts

W = 64  # bits of the epoch counter (uintptr)
M32 = 1 << 32


def young(current, stamped_epoch) -> z3.BoolRef:
    """What the sweep decides for a page whose allocation stored `stamped_epoch`."""
    state = page.encode_stamp(stamped_epoch)
    return epoch.is_epoch_young(current, page.stamp_epoch(state))


def low32(x):
    return z3.Extract(31, 0, x)


def age_claims() -> list[Claim]:
    e, s, m = z3.BitVecs("epoch stamp_epoch m", W)
    cur_or_prev = z3.Or(low32(s) == low32(e), low32(s) == low32(e - 1))
    no_wrap = [z3.ULE(s, e), z3.ULT(e - s, M32)]  # fewer than 2^32 epochs since the stamp
    return [
        Claim("EP-AGE-MOD: a page stamped in the current or the previous epoch is young",
              [z3.ULE(s, e), z3.ULE(e, s + 1), z3.ULT(s, 2 ** 63)], young(e, s),
              [z3.ULE(e, M32 + 3)]),
        Claim("EP-AGE-MOD: age < 2 exactly when the stamp is the current or the previous "
              "epoch modulo 2^32 (any 64-bit epochs)", [], young(e, s) == cur_or_prev),
        Claim("EP-AGE-MOD: within 2^32 epochs a page is old exactly when two or more epochs "
              "passed", no_wrap, z3.Not(young(e, s)) == z3.UGE(e - s, 2)),
        Claim("EP-AGE-MOD: a page left for a multiple of 2^32 epochs reads as young, and one "
              "or two epochs later as young and as old",
              [z3.UGE(m, 1), z3.ULT(m, 1 << 20), z3.ULT(s, 2 ** 60)],
              z3.And(young(s + m * M32, s), young(s + m * M32 + 1, s),
                     z3.Not(young(s + m * M32 + 2, s)))),
    ]


def render_age(claim: Claim, model: z3.ModelRef) -> str:
    e, s, m = z3.BitVecs("epoch stamp_epoch m", W)
    ev, sv = val(model, e), val(model, s)
    age = val(model, page.stamp_epoch(page.encode_stamp(s)))
    facts = [("current epoch", ev), ("epoch the allocation stamped", sv),
             ("m (multiples of 2^32)", val(model, m)),
             ("stamp stored (swept_state)", hex(val(model, page.encode_stamp(s)))),
             ("stamp read back", age),
             ("(uint32)(epoch - stamp)", (ev - age) % M32),
             ("epochs really passed", ev - sv),
             ("model says young", val(model, young(e, s)))]
    return render_facts(facts, "counterexample:")


def run_age_proof(quick: bool) -> Outcome:
    return run_claims(age_claims(), render_age, "every pair of 64-bit epochs")


PROOF = Proof("age", ("EP-AGE-MOD",), "z3", run_age_proof,
              "the age modulo 2^32 and its wraparound, on the model's own functions")
TWINS = [
    Twin("age-no-modulo", "age", ("EP-AGE-MOD",), "z3", run_age_proof,
         "mutant age-no-modulo: epoch - stamp compared without the modulo 2^32",
         mutant="age-no-modulo"),
]
