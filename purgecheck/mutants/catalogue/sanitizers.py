"""Mutants of the C reference that only a sanitizer build reports (CF-SANITIZERS-CLEAN).

Seed 000 asks that the tests pass "in: ... ASAN, UBSAN (C++), TSAN". A defect of that kind
leaves every trace as it was: the model has nothing to patch (no `Patch`), and the release
build writes the clean trace, so only the sanitizer engine (purgecheck/engines/sanitizers.py),
which runs the TSan build with the mutant's run-time switch, can tell it.
"""

from __future__ import annotations

from purgecheck.mutants.patching import mutant

# Seed 000 (2): allocation makes "a relaxed load of the epoch"; sweepers move it with an
# atomic increment. A plain load in its place is a data race: undefined behaviour in
# C11, invisible on x86-64, reported by TSan (reference_c/sweep.c, mi_epoch_plain_read).
mutant("epoch-plain-read", "the allocating side reads the epoch with a plain load, not an "
       "atomic one, while sweepers increment it (a data race)",
       ("CF-SANITIZERS-CLEAN",), c_switch="epoch_plain_read", needs_concurrency=True,
       seen_by_one="every trace is as it was (x86-64 loads the same value), the model has no "
       "plain reads, and Relacy runs the protocol's atomics (protocol.h), not the allocation "
       "path of sweep.c where the read is: only the TSan build sees the data race")
