"""How a machine says that a check failed, and what the runner counts while machines run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class RunStats:
    """Examples (machine instances) and steps run so far, the example in which the first
    check failed, and how often each kind of model event happened (what the machines reached);
    `on_example` lets the runner show progress."""

    examples: int = 0
    steps: int = 0
    first_failure_at: int | None = None
    events: Counter = field(default_factory=Counter)
    on_example: Callable[[], None] | None = None

    def reset(self, on_example: Callable[[], None] | None = None) -> None:
        self.examples = self.steps = 0
        self.first_failure_at = None
        self.events = Counter()
        self.on_example = on_example


STATS = RunStats()


class InvariantViolation(AssertionError):
    """A check failed after a step: `invariant` is its registry id, `reason` says how."""

    def __init__(self, invariant: str, reason: str) -> None:
        super().__init__(f"{invariant}: {reason}")
        self.invariant, self.reason = invariant, reason
        if STATS.first_failure_at is None:
            STATS.first_failure_at = STATS.examples
