"""Mutants of the C reference's linearized trace (CF-LINEARIZED-RUNS): the C code does what
the model does, but a shared access and the event that reports it are not one lin step, so the
trace of a concurrent run is not an order in which its accesses took effect
(docs/validation.md, "How the concurrent run is linearized"). The model has nothing to patch
(no `Patch`); only the validation of a linearized concurrent run can tell it.
"""

from __future__ import annotations

from purgecheck.mutants.patching import mutant

# Found by a fresh clone's `make test` on 2026-12-05 (tests/data/regressions/
# concurrent-tsan-3-foreign-sweep.jsonl.gz): mi_heap_abandon put a page in the abandoned map
# before the lin step of its event, so another thread's sweep could take it from the map in
# between. The driver's abandon_delay_us holds that window open in the validate engine's
# abandon-window script.
mutant("abandon-outside-lin-step", "a thread's exit puts each page in the abandoned map and "
       "writes its abandon event in two lin steps, so a sweep of another thread can be traced "
       "on the page before the abandon", ("CF-LINEARIZED-RUNS",),
       c_switch="abandon_outside_lin_step", needs_concurrency=True,
       seen_by_one="a defect of the trace's order, not of a rule: sequential traces are the "
       "model's (the entry and the event come together without preemption), the model has "
       "nothing to patch, and only the validation of a linearized concurrent run orders the "
       "two")
