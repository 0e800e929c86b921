"""Benchmark of the fuzz machines: examples and steps per second per machine and driver on
this machine, and where the time goes (Hypothesis itself, the model in the rules, the
invariant checks).

    .venv/bin/python -m purgecheck.bench.fuzz                 every machine, 300 examples
    .venv/bin/python -m purgecheck.bench.fuzz --machine page --examples 1000 --steps 50

Runs are derandomized (the same examples every time) and search only: no shrinking, no
example database. Rates are given by wall clock and by the process's CPU time (which other
work on a shared machine does not inflate). 'null ex/s' is Hypothesis's own stateful driver
running the same rules with bodies that do nothing and no preconditions: the most the "rules"
driver can reach. A figure on a loaded machine is a lower bound; nothing here is asserted.
`make bench` (python -m purgecheck.bench) runs every machine and driver with the others.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Iterator

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test, rule

from purgecheck.bench import Figure
from purgecheck.fuzz import MACHINES, load_machine, run_machine
from stateful_tests.profiles import profile_settings

BENCH = "fuzz"


def measure(machine: str, driver: str, examples: int, steps: int) -> dict[str, float]:
    """Examples/s (wall and CPU) and steps/s (CPU) of the machine against the chosen design."""
    c0 = time.process_time()
    r = run_machine(machine, "epoch", profile="ci", examples=examples, steps=steps,
                    shrink=False, driver=driver)
    cpu = time.process_time() - c0
    if not r.ok:
        raise RuntimeError(f"{machine}: {r.failure.invariant}: {r.failure.reason}")
    return {"ex/s": r.examples_per_s, "ex/s cpu": r.examples / cpu, "steps/s cpu": r.steps / cpu,
            "steps/ex": r.steps / r.examples}


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
    c0 = time.process_time()
    test()
    return examples / (time.process_time() - c0)


def time_split(machine: str, driver: str, examples: int, steps: int) -> dict[str, float]:
    """Shares of the run's time under cProfile: the invariant checks, the rest of the
    machines' own code (the rules and the model they call), and Hypothesis."""
    prof = cProfile.Profile()
    prof.enable()
    run_machine(machine, "epoch", profile="ci", examples=examples, steps=steps, shrink=False,
                driver=driver)
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
    total = sum(v[2] for v in stats.values())

    def under(pred) -> float:
        return sum(v[3] for k, v in stats.items() if pred(k) and not _nested(k, v, pred))

    checks = under(lambda k: k[2] in ("registry_holds", "arenas_hold"))
    machines = under(lambda k: "stateful_tests" in k[0] and not k[2].startswith("<")
                     and not k[0].endswith("program.py"))
    return {"checks": checks / total, "rules+model": (machines - checks) / total,
            "hypothesis": 1 - machines / total}


def _nested(key, value, pred) -> bool:
    """A call of a counted function from inside another counted one (not to count twice)."""
    return any(pred(caller) for caller in value[4])


def combinations(machines: list[str] | None = None,
                 drivers: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """(machine, driver) of each row: the program driver only for the model's machines."""
    from purgecheck.fuzz import DRIVERS, default_driver

    for machine in machines or list(MACHINES):
        for driver in drivers or list(DRIVERS):
            if driver == "program" and default_driver(machine) != "program":
                continue
            yield machine, driver


def measure_row(machine: str, driver: str, examples: int, steps: int) -> dict[str, float]:
    """One row: the rates (measure), the null machine's floor for the rules driver ("null",
    None for the program driver) and the shares of the time (time_split)."""
    m = measure(machine, driver, examples, steps)
    m["null"] = measure_null(machine, examples, steps) if driver == "rules" else None
    return {**m, **time_split(machine, driver, min(examples, 100), steps)}


FULL = {"examples": 300, "steps": 50}  # main()'s defaults
TINY = {"examples": 5, "steps": 10}


def figures(tiny: bool = False) -> list[Figure]:
    """The figures main() prints, for every machine and driver, at main()'s default sizes
    or at tiny ones."""
    size = TINY if tiny else FULL
    note = (f"{size['examples']} examples of at most {size['steps']} steps, the epoch design")
    out = []
    for machine, driver in combinations():
        r = measure_row(machine, driver, size["examples"], size["steps"])
        row = f"{machine} machine, {driver} driver"
        out += [Figure(BENCH, f"{row}: examples per second", r["ex/s"], "examples/s",
                       note + ", wall clock"),
                Figure(BENCH, f"{row}: examples per second by CPU time", r["ex/s cpu"],
                       "examples/s", note),
                Figure(BENCH, f"{row}: steps per second by CPU time", r["steps/s cpu"],
                       "steps/s", note),
                Figure(BENCH, f"{row}: steps per example", r["steps/ex"], "steps", note)]
        if r["null"] is not None:
            out.append(Figure(BENCH, f"{row}: null machine's examples per second", r["null"],
                              "examples/s", "the rules driver's floor: Hypothesis alone, by "
                                            "CPU time"))
        out += [Figure(BENCH, f"{row}: share of the time in {part}", 100 * r[key], "%",
                       "measured under cProfile" + (", the program driver's reading counted "
                                                    "as Hypothesis" if key == "hypothesis"
                                                    else ""))
                for part, key in (("the invariant checks", "checks"),
                                  ("the rules and the model", "rules+model"),
                                  ("Hypothesis", "hypothesis"))]
    return out


def main(argv: list[str] | None = None) -> int:
    from purgecheck.fuzz import DRIVERS

    p = argparse.ArgumentParser(prog="python -m purgecheck.bench.fuzz",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--machine", action="append", choices=list(MACHINES))
    p.add_argument("--driver", action="append", choices=list(DRIVERS))
    p.add_argument("--examples", type=int, default=300)
    p.add_argument("--steps", type=int, default=50, help="steps per example at most (default: "
                                                         "Hypothesis's and the dev profile's 50)")
    args = p.parse_args(argv)
    print(f"{'machine':8} {'driver':8} {'ex/s':>6} {'ex/s cpu':>9} {'steps/s cpu':>12} "
          f"{'steps/ex':>9} {'null ex/s':>10} {'checks':>7} {'rules+model':>12} "
          f"{'hypothesis':>11}")
    for machine, driver in combinations(args.machine, args.driver):
        try:
            m = measure_row(machine, driver, args.examples, args.steps)
        except RuntimeError as e:  # a machine found a failure: not a figure
            raise SystemExit(str(e)) from None
        null = m["null"]
        print(f"{machine:8} {driver:8} {m['ex/s']:6.0f} {m['ex/s cpu']:9.0f} "
              f"{m['steps/s cpu']:12.0f} {m['steps/ex']:9.1f} "
              f"{f'{null:.0f}' if null else '-':>10} {m['checks']:7.0%} "
              f"{m['rules+model']:12.0%} {m['hypothesis']:11.0%}", flush=True)
    print(f"({args.examples} examples of at most {args.steps} steps against the epoch design; "
          f"'null ex/s': the rules driver's floor, Hypothesis alone, by CPU time; shares of "
          f"the time measured under cProfile, the program driver's reading counted as "
          f"Hypothesis)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
