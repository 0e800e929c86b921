"""Trace validation: a trace is accepted when the model can reproduce it, event by event.

A run on real threads has no order the model can predict, so it is checked the way TLA+
trace validation checks an implementation: each event is replayed as a transition of the
model (model/epoch.py's atomic steps of the advance, the stamp, the hold, the park handoff),
with the nondeterminism (which sweeper won the CAS, what the clock read, which epoch a read
returned) resolved by what the trace says; the first event that no enabled transition
explains is the rejection. Linearized traces (the concurrent C runs, reference_c/stress.c and
stress_*.c) are replayed in the order of their `lin` numbers; other traces in file order, with
each advance taken as one step. docs/validation.md says what is checked and what is not.
"""

from purgecheck.validate.common import OUTCOMES, Rejection
from purgecheck.validate.replay import (Validator, Verdict, format_verdict, validate_file,
                                        validate_stream, verdict_doc)

__all__ = ["OUTCOMES", "Rejection", "Validator", "Verdict", "format_verdict", "validate_file",
           "validate_stream", "verdict_doc"]
