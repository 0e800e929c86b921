"""The program driver: a machine's rules run from one byte string that Hypothesis draws.

Why: Hypothesis's own stateful driver makes about ten choices per step (the swarm flags of
the rules, the rule, each argument), and each choice costs it more than the model's whole step:
a machine of 16 rules whose bodies do nothing runs about 120 examples of 50 steps a second
here (`python -m purgecheck.bench.fuzz` prints that floor). This driver makes one choice per
example, a byte string, and reads the program from it: per step one byte names a rule (the next
one whose preconditions hold, if its own do not), and one byte per argument picks its value from
the argument's finite domain (so at most 256 values). The machine, its rules, preconditions and invariants are the
same objects the Hypothesis driver runs; only who chooses differs.

Shrinking works on the bytes: a rule byte set to 0 deletes its step, and a byte moved toward 0
moves its choice toward the first rule or value, which is where `INDEX` and `choice` put the
simplest one. A failure's program is printed step by step as Hypothesis prints it, and its
`@reproduce_failure` blob replays it exactly.

Arguments must be finite choices, declared with `choice(values)` (or `choice_list`), so that a
byte can name one; a rule with another strategy (or a Bundle) is refused with a clear error,
and that machine keeps the Hypothesis driver (the glibc machine does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.internal.conjecture.engine import BUFFER_SIZE


@dataclass(frozen=True)
class Domain:
    """The finite values of one argument, and for a list argument its length bounds."""

    values: tuple
    min_len: int | None = None  # None: one value; else a list of min_len..max_len values
    max_len: int = 0

    @property
    def width(self) -> int:
        """Bytes it reads: one, or a length byte and one per element of the longest list."""
        return 1 if self.min_len is None else 1 + self.max_len

    def read(self, data: bytes, pos: int):
        values = self.values
        if self.min_len is None:
            return values[data[pos] % len(values)]
        n = self.min_len + data[pos] % (self.max_len - self.min_len + 1)
        return [values[b % len(values)] for b in data[pos + 1:pos + 1 + n]]


_DOMAINS: dict[int, tuple[st.SearchStrategy, Domain]] = {}  # id(strategy) -> its domain


def _finite(values: Sequence) -> tuple:
    """At most 256 values, so that one byte reaches every one."""
    values = tuple(values)
    if not 0 < len(values) <= 256:
        raise ValueError(f"a choice needs 1 to 256 values, not {len(values)}")
    return values


def choice(values: Sequence) -> st.SearchStrategy:
    """`st.sampled_from(values)` for the Hypothesis driver, readable from a byte by this one."""
    values = _finite(values)
    return _declare(st.sampled_from(values), Domain(values))


def choice_list(values: Sequence, min_size: int, max_size: int) -> st.SearchStrategy:
    """`st.lists(choice(values), min_size, max_size)`, readable as a length byte and one byte
    per element."""
    values = _finite(values)
    strategy = st.lists(st.sampled_from(values), min_size=min_size, max_size=max_size)
    return _declare(strategy, Domain(values, min_size, max_size))


def _declare(strategy: st.SearchStrategy, domain: Domain) -> st.SearchStrategy:
    _DOMAINS[id(strategy)] = (strategy, domain)  # the strategy is kept, so its id stays its
    return strategy


BOOL = choice((False, True))


def domain_of(strategy, rule: str, arg: str) -> Domain:
    entry = _DOMAINS.get(id(strategy))
    if entry is None or entry[0] is not strategy:
        raise TypeError(f"rule {rule}: argument {arg} is not a finite choice "
                        f"(stateful_tests.program.choice); the program driver cannot read it")
    return entry[1]


@dataclass(frozen=True)
class Step:
    """One rule of the machine as the program driver calls it."""

    name: str
    function: Callable
    preconditions: tuple
    arguments: tuple[tuple[str, Domain], ...]

    def enabled(self, machine) -> bool:
        return holds(self.preconditions, machine)

    @property
    def width(self) -> int:
        return sum(d.width for _, d in self.arguments)

    def read(self, data: bytes, pos: int) -> dict:
        """The arguments whose bytes begin at `pos`."""
        kwargs = {}
        for name, domain in self.arguments:
            kwargs[name] = domain.read(data, pos)
            pos += domain.width
        return kwargs


def holds(preconditions, machine) -> bool:
    return all(p(machine) for p in preconditions)


def steps_of(rules) -> list[Step]:
    """The rules (or initializers) of a machine class, by name, with their argument domains."""
    out = []
    for r in sorted(rules, key=lambda r: r.function.__name__):
        name = r.function.__name__
        if r.targets or getattr(r, "bundles", ()):
            raise TypeError(f"rule {name} uses a Bundle; the program driver cannot run it")
        args = tuple((k, domain_of(s, name, k)) for k, s in sorted(r.arguments.items()))
        out.append(Step(name, r.function, tuple(r.preconditions), args))
    return out


class Program:
    """The program driver of one machine class.

    The byte string is read in fixed slots: first one slot per initializer (its arguments),
    then one slot per step: a rule byte and the bytes of its arguments. A rule byte of 0 is
    no step, so the shrinker deletes a step by zeroing one byte, and the slots after it keep
    their meaning (a byte string of variable length would shift them)."""

    def __init__(self, machine_cls: type) -> None:
        state = machine_cls.setup_state()
        self.cls = machine_cls
        self.initializers = steps_of(state.initializers)
        self.rules = steps_of(state.rules)
        self.invariants = [(i.function, tuple(i.preconditions)) for i in state.invariants]
        self.init_size = sum(s.width for s in self.initializers)
        self.slot = 1 + max((s.width for s in self.rules), default=0)

    def size(self, max_steps: int) -> int:
        """The length of the byte string of a program of at most `max_steps` steps."""
        return self.init_size + max_steps * self.slot

    @staticmethod
    def max_size() -> int:
        """The longest byte string Hypothesis draws: its buffer for one example's choices."""
        return BUFFER_SIZE

    def max_steps(self) -> int:
        return (self.max_size() - self.init_size) // self.slot

    def run(self, data: bytes, max_steps: int, printing: bool = False) -> None:
        """Run the program that `data` spells (missing bytes read as 0), checking every
        invariant after the initializers and after each step; `printing`: note each step
        as Hypothesis prints a failing program."""
        data = data.ljust(self.size(max_steps), b"\0")
        machine = self.cls()
        if printing:
            note(f"state = {self.cls.__name__}()")
        try:
            pos = 0
            for init in self.initializers:
                self._call(machine, init, data, pos, printing)
                pos += init.width
            self._check(machine)
            for pos in range(self.init_size, self.size(max_steps), self.slot):
                if not data[pos]:
                    continue  # no step here
                rule = self._rule(machine, data[pos] - 1)
                if rule is None:
                    break
                self._call(machine, rule, data, pos + 1, printing)
                self._check(machine)
        finally:
            machine.teardown()

    def _rule(self, machine, k: int) -> Step | None:
        """Rule k (modulo their number) if its preconditions hold, else the next one whose
        do, cyclically; None when none does. (Hypothesis picks among the rules that hold;
        this evaluates the preconditions of one rule in the common case, not of all.)"""
        rules = self.rules
        for i in range(len(rules)):
            rule = rules[(k + i) % len(rules)]
            if rule.enabled(machine):
                return rule
        return None

    @staticmethod
    def _call(machine, step: Step, data: bytes, pos: int, printing: bool) -> None:
        kwargs = step.read(data, pos)
        if printing:
            note(f"state.{step.name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})")
        step.function(machine, **kwargs)

    def _check(self, machine) -> None:
        for function, preconditions in self.invariants:
            if holds(preconditions, machine):
                function(machine)

    def test(self, max_steps: int) -> Callable:
        """The Hypothesis test: one byte string per example, the program it spells."""
        size = self.size(max_steps)

        @given(st.binary(min_size=size, max_size=size))
        def program(data: bytes) -> None:
            # Only the failing program, replayed at the end, is printed.
            self.run(data, max_steps, printing=current_build_context().is_final)

        program.__name__ = program.__qualname__ = f"{self.cls.__name__}_program"
        return program
