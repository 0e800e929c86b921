"""Benchmark of the fuzz machines: examples and steps per second per machine on this machine,
and where the time goes (Hypothesis itself, the model in the rules, the invariant checks).

    .venv/bin/python -m purgecheck.bench_fuzz                 every machine, 300 examples
    .venv/bin/python -m purgecheck.bench_fuzz --machine page --examples 1000 --steps 50

Runs are derandomized (the same examples every time) and search only: no shrinking, no
example database. A figure on a loaded machine is a lower bound; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, rule

from purgecheck.fuzz import MACHINES, load_machine, run_machine
from stateful_tests.profiles import profile_settings


def measure(machine: str, examples: int, steps: int) -> tuple[float, float]:
    """(examples/s, steps/s) of the machine against the chosen design."""
    r = run_machine(machine, "epoch", profile="ci", examples=examples, steps=steps,
                    shrink=False)
    if not r.ok:
        raise SystemExit(f"{machine}: {r.failure.invariant}: {r.failure.reason}")
    return r.examples_per_s, r.steps_per_s


def null_machine(machine: str) -> type:
    """A machine with the same rules and argument strategies whose rules do nothing and that
    has no preconditions: what Hypothesis costs by itself for that rule set."""
    body = {}
    for r in load_machine(machine).setup_state().rules:
        def noop(self, **kwargs):
            return None
        noop.__name__ = r.function.__name__
        body[noop.__name__] = rule(**r.arguments)(noop)
    return type(f"Null{machine.title()}Machine", (RuleBasedStateMachine,), body)


def measure_null(machine: str, examples: int, steps: int) -> float:
    test = get_state_machine_test(null_machine(machine), settings=profile_settings(
        "ci", max_examples=examples, step_count=steps, shrink=False))
    t0 = time.perf_counter()
    test()
    return examples / (time.perf_counter() - t0)


def time_split(machine: str, examples: int, steps: int) -> dict[str, float]:
    """Shares of the run's time under cProfile: the invariant checks, the rest of the
    machines' own code (the rules and the model they call), and Hypothesis."""
    prof = cProfile.Profile()
    prof.enable()
    run_machine(machine, "epoch", profile="ci", examples=examples, steps=steps, shrink=False)
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
    total = sum(v[2] for v in stats.values())

    def under(pred) -> float:
        return sum(v[3] for k, v in stats.items() if pred(k) and not _nested(k, v, pred))

    checks = under(lambda k: k[2] in ("registry_holds", "arenas_hold"))
    machines = under(lambda k: "stateful_tests" in k[0] and not k[2].startswith("<"))
    return {"checks": checks / total, "rules+model": (machines - checks) / total,
            "hypothesis": 1 - machines / total}


def _nested(key, value, pred) -> bool:
    """A call of a counted function from inside another counted one (not to count twice)."""
    return any(pred(caller) for caller in value[4])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench_fuzz",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", action="append", choices=list(MACHINES))
    p.add_argument("--examples", type=int, default=300)
    p.add_argument("--steps", type=int, default=50, help="steps per example (default: the "
                                                         "dev profile's 50)")
    args = p.parse_args(argv)
    print(f"{'machine':8} {'examples/s':>10} {'steps/s':>9} {'null ex/s':>10} "
          f"{'checks':>7} {'rules+model':>12} {'hypothesis':>11}")
    for machine in args.machine or list(MACHINES):
        ex_s, steps_s = measure(machine, args.examples, args.steps)
        null = measure_null(machine, args.examples, args.steps)
        split = time_split(machine, min(args.examples, 100), args.steps)
        print(f"{machine:8} {ex_s:10.0f} {steps_s:9.0f} {null:10.0f} "
              f"{split['checks']:7.0%} {split['rules+model']:12.0%} {split['hypothesis']:11.0%}")
    print(f"({args.examples} examples of at most {args.steps} steps; 'null ex/s': the same "
          f"rules doing nothing, Hypothesis alone; shares measured under cProfile)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
