"""The result of a check: one engine's verdict on one invariant of the registry.

Every checker returns these (the proofs here, and the engines of purgecheck that run the
scenarios, the fuzz machines and the C reference); it lives in proofs/ because that is the
lowest layer that checks, and proofs/ may import only model/. Shown by purgecheck.reports.
"""

from __future__ import annotations

from dataclasses import dataclass

PASSING = {"hold", "proved", "bounded", "refuted-as-expected", "killed"}


@dataclass
class Result:
    invariant: str  # registry id the result speaks about
    engine: str  # which engine produced it
    status: str  # hold | fail | proved | refuted | bounded | unknown | error | ...
    figure: str  # what was covered: "412 states", "200 examples", "3,120 ops"
    seconds: float = 0.0
    detail: str = ""  # the counterexample or reason when it did not pass
    replay: str = ""  # one command that reproduces a failure

    @property
    def ok(self) -> bool:
        return self.status in PASSING
