"""The unsafe one-step weakenings of the protocol's atomic orderings (issue 31).

Each mutant gives one atomic access a weaker C11 ordering than the C reference's, where
docs/proofs.md ("Minimal orderings") finds a counterexample: in the weak explorer its entry of
proofs.weak.configs.WEAKENED (every configuration the weak engine runs takes it), and in the C
reference the compile-time switch -DMI_WEAKEN_<ACCESS> of reference_c/atomics.h, which the
relacy engine builds protocol.h with. The sequential engines run sequentially consistent
memory and cannot see any of them; the weak and relacy engines must both kill each one.
`WEAKENINGS` gives each mutant's (access, weaker ordering).
"""

from __future__ import annotations

import proofs.weak.registry  # noqa: F401  registers EP-SEES-STARTED and PK-HANDOFF-FRESH
from proofs.weak.memory import ACQ, REL, RLX
from purgecheck.mutants.patching import Patch, mutant

WEAKENINGS: dict[str, tuple[str, str]] = {}


def _to(weaker: str):
    def weakened(order: str) -> str:
        """Broken: the access has the weaker ordering, whatever the configuration gives it."""
        return weaker
    weakened.__name__ = weakened.__qualname__ = f"to_{weaker}"
    return weakened


def _weakening(access: str, weaker: str, what: str, catches: tuple[str, ...]) -> None:
    name = f"weak-{access.replace('_', '-')}-{weaker.replace('_', '-')}"
    WEAKENINGS[name] = (access, weaker)
    mutant(name, what, catches,
           Patch("proofs.weak.configs", "WEAKENED", _to(weaker), key=access),
           needs_concurrency=True)


_weakening("load_start", RLX, "the advance loads the epoch's start relaxed, not acquire",
           ("EP-SEES-STARTED",))
_weakening("store_start", RLX, "the advance stores the new epoch's start relaxed, not release",
           ("EP-SEES-STARTED",))
_weakening("spin_load", RLX, "the MOVING spin loads the start relaxed, not acquire",
           ("EP-SEES-STARTED",))
_weakening("unpark_cas", REL, "the owner leaves the park with a CAS that is release only, "
           "not acq_rel", ("PK-HANDOFF-FRESH",))
_weakening("release_state", RLX, "the scavenger hands the thread back (SWEEPING -> PARKED) "
           "with a relaxed store, not release", ("PK-HANDOFF-FRESH",))
# Unsafe from the acquire/release baseline (the handoff's seq_cst accesses acquire/release):
# at seq_cst, which both engines make stronger than RC11's, the other accesses hide them.
_weakening("park_cas", ACQ, "the owner parks with a CAS that is acquire only, not acq_rel",
           ("PK-HANDOFF-FRESH",))
_weakening("claim_cas", REL, "the scavenger claims a parked thread with a CAS that is release "
           "only, not acq_rel", ("PK-HANDOFF-FRESH",))
