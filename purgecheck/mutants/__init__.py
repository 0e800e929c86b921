"""Named mutants: small broken copies of one rule each, applied without editing any file.

`patching` says how a mutant is made and applied; `catalogue/` holds the mutants, one module
per part of the system they break (page, hold, epoch, the byte shadow, sanitizers, glibc,
strace), each registering its own with `mutant(...)`; `matrix` runs every mutant against every
engine and `report` shows the kill matrix. Imports go one way: this package's `__init__`
loads the catalogue, the catalogue imports `patching`, and nothing imports back.
"""

from __future__ import annotations

import importlib

from purgecheck.discovery import modules_of
from purgecheck.mutants import catalogue
from purgecheck.mutants.patching import (MUTANTS, TRACE_INVARIANT, Mutant, Patch, active,
                                         applied, is_c_trace_mutant, mutant)

__all__ = ["MUTANTS", "TRACE_INVARIANT", "Mutant", "Patch", "active", "applied",
           "is_c_trace_mutant", "mutant", "catalogue_modules"]

# The order the kill matrix and the docs list the parts in; a module of catalogue/ not named
# here is loaded all the same, after these, by name.
PART_ORDER = ("page", "hold", "glibc", "shadow", "epoch", "sanitizers", "strace")


def catalogue_modules() -> list[str]:
    """Every module of catalogue/, in PART_ORDER and then by name: adding a part of the
    catalogue is adding a module there."""
    return [f"{catalogue.__name__}.{m}" for m in modules_of(catalogue, PART_ORDER)]


for _module in catalogue_modules():
    importlib.import_module(_module)
