"""The unsafe one-step weakenings of the protocol's atomic orderings (issue 31).

Each mutant gives one atomic access a weaker C11 ordering than the C reference's, where
docs/proofs.md ("Minimal orderings") finds a counterexample: in the weak explorer its entry of
proofs.weak.configs.WEAKENED (every configuration the weak engine runs takes it), and in the C
reference the switch -DMI_WEAKEN_<ACCESS> of reference_c/atomics.h, which the relacy engine
sets at run time (relacy_check's --weaken ACCESS, the same orderings). The sequential engines run sequentially consistent
memory and cannot see any of them; the weak and relacy engines must both kill each one, but
for the one that only a fork shows (Relacy has no fork: RELACY_BLIND).
`WEAKENINGS` gives each mutant's (access, weaker ordering).
"""

from __future__ import annotations

import proofs.weak.registry  # noqa: F401  registers EP-SEES-STARTED and PK-HANDOFF-FRESH
from proofs.weak.memory import ACQ, REL, RLX
from purgecheck.mutants.patching import MUTANTS, Patch, mutant

CONFIGS = "proofs.weak.configs"


def _to(weaker: str):
    def weakened(order: str) -> str:
        """Broken: the access has the weaker ordering, whatever the configuration gives it."""
        return weaker
    weakened.__name__ = weakened.__qualname__ = f"to_{weaker}"
    return weakened


def _weaken(access: str, weaker: str) -> Patch:
    return Patch(CONFIGS, "WEAKENED", _to(weaker), key=access)


mutant("weak-load-start-relaxed", "the advance loads the epoch's start relaxed, not acquire",
       ("EP-SEES-STARTED",), _weaken("load_start", RLX), needs_concurrency=True)
mutant("weak-store-start-relaxed", "the advance stores the new epoch's start relaxed, not "
       "release", ("EP-SEES-STARTED",), _weaken("store_start", RLX), needs_concurrency=True)
# Unsafe only with a fork (proofs/weak/fork.py, weak-fork-2): the child's copy may then hold the
# new epoch without the MOVING before it. Relacy has no fork (its threads share one memory, it
# cannot copy it): the weak explorer alone kills this one.
mutant("weak-fetch-add-acquire", "the advance increments the epoch with acquire only, not "
       "acq_rel: a fork's child may copy the new epoch and the start before the claim",
       ("EP-NO-SHORT-EPOCH",), _weaken("fetch_add", ACQ), needs_concurrency=True,
       seen_by_one="only a fork's copy of memory shows it, and Relacy's threads share one "
       "memory; the other engines run sequentially consistent memory")
mutant("weak-spin-load-relaxed", "the MOVING spin loads the start relaxed, not acquire",
       ("EP-SEES-STARTED",), _weaken("spin_load", RLX), needs_concurrency=True)
mutant("weak-unpark-cas-release", "the owner leaves the park with a CAS that is release only, "
       "not acq_rel", ("PK-HANDOFF-FRESH",), _weaken("unpark_cas", REL), needs_concurrency=True)
mutant("weak-release-state-relaxed", "the scavenger hands the thread back (SWEEPING -> PARKED) "
       "with a relaxed store, not release", ("PK-HANDOFF-FRESH",),
       _weaken("release_state", RLX), needs_concurrency=True)
# Unsafe from the acquire/release baseline (the handoff's seq_cst accesses acquire/release):
# at seq_cst, which both engines make stronger than RC11's, the other accesses hide them.
mutant("weak-park-cas-acquire", "the owner parks with a CAS that is acquire only, not acq_rel",
       ("PK-HANDOFF-FRESH",), _weaken("park_cas", ACQ), needs_concurrency=True)
mutant("weak-claim-cas-release", "the scavenger claims a parked thread with a CAS that is "
       "release only, not acq_rel", ("PK-HANDOFF-FRESH",), _weaken("claim_cas", REL),
       needs_concurrency=True)

# The weak mutants Relacy cannot see, and why.
RELACY_BLIND = {"weak-fetch-add-acquire": "only a fork's copy of memory shows it; Relacy's "
                "threads share one memory"}
# Each weak mutant's (access, weaker ordering), read back from its patch.
WEAKENINGS: dict[str, tuple[str, str]] = {
    name: (m.patches[0].key, m.patches[0].replacement(""))
    for name, m in MUTANTS.items() if m.patches and m.patches[0].module == CONFIGS}
