"""Mutants of the allocation path's rules that stay memory-safe: only an exact invariant
(AL-REALLOC-MOVES) tells them from the real rule."""

from __future__ import annotations

from purgecheck.mutants.patching import Patch, mutant


def _realloc_in_place_when_it_fits(size, block_size):
    """Broken: a realloc keeps the block whenever the new size fits it, however small (no
    move to a smaller class below half: safe, and the large block's bytes stay taken)."""
    return size <= block_size


mutant("realloc-keeps-small", "a realloc that shrinks below half of the block keeps it in "
       "place instead of moving to a smaller class", ("AL-REALLOC-MOVES",),
       Patch("model.heap", "is_realloc_in_place", _realloc_in_place_when_it_fits))
