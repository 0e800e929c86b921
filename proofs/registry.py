"""Invariants that only the proof engines check (no predicate on a model state).

The Z3 proofs and the interleaving explorer also cite invariants of the model's registry
(PG-*, EP-*, HD-*, PK-*); the ones here are properties that no single state can judge: an
arithmetic identity for all geometries, or a property of the whole state graph.
"""

from __future__ import annotations

from model.invariants import REGISTRY, Invariant, load_registry, register


def _add(inv: Invariant) -> None:
    if inv.id not in REGISTRY:  # importing twice (e.g. under a test reloader) is harmless
        register(inv)


_add(Invariant(
    "PF-UNIT-MAP",
    "The first and last block that overlap unit k (UnitMap.blocks_of_unit) and the units a "
    "block overlaps (UnitMap.units_of_block) are exactly the overlapping ones, for every page "
    "geometry.",
    "seed 000 (1): \"Bit k of page->purged names unit k, counted from align_down(page_start, "
    "unit)\"; \"a block that shares a unit with a live neighbour keeps that unit\"",
    "model.geometry.UnitMap.blocks_of_unit", scope="proof"))

_add(Invariant(
    "EP-AGE-MOD",
    "age = (uint32)(epoch - stamp) < 2 exactly when the stamp is the current or the previous "
    "epoch modulo 2^32; a page left for a multiple of 2^32 epochs reads as young.",
    "seed 000 (2): \"32 bits of the epoch are kept in the page and compared modulo 2^32: a "
    "page that was left for a multiple of 2^32 epochs ... reads as young once more\"",
    "model.epoch.is_epoch_young", scope="proof"))

_add(Invariant(
    "EP-EPOCH-MOVES",
    "The epoch moves whenever a sweeper sweeps after the interval: an advance that finds the "
    "epoch due ends with the epoch moved (by it or by the sweeper that claimed the move), "
    "unless it gave up waiting on a mover that was preempted (digest 9.4).",
    "seed 000 (2): \"an idle sweep moves [the epoch] on ... when the current epoch has lasted "
    "for purge_holes_min_interval\"",
    "model.epoch.advance_step", scope="epoch-graph"))

_add(Invariant(
    "PK-DONE-WITHIN-MAX",
    "Every park that the scavenger keeps sweeping reaches DONE within MI_PARK_SWEEPS_MAX "
    "sweeps: in the state graph, no park is swept a seventh time and no path of sweeps of one "
    "park is longer than the cap.",
    "seed 000 (2): \"MI_PARK_SWEEPS_MAX = 6 whatever happens\"",
    "model.park.compute_park_next", scope="epoch-graph"))

_add(Invariant(
    "PK-NO-STUCK-CYCLE",
    "No reachable cycle of the state graph sweeps a parked thread again and again without the "
    "park ever being done.",
    "seed 000 (2): \"How that terminates: ... it is swept again purge_holes_min_interval "
    "after the END of the sweep before ... MI_PARK_SWEEPS_MAX = 6 whatever happens\"",
    "model.park.mi_theap_sweep_parked", scope="epoch-graph"))


def proof_registry() -> dict[str, Invariant]:
    """The whole registry, the model's and these."""
    return load_registry()
