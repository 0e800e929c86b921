"""The engines `purgecheck check` runs, each turning the registry into results.

An engine is a function of a `Budget` (how hard to try) returning one Result per invariant it
checks. Each module of this package is one engine of `check` and registers it with
`@engine(...)`; `load_engines` finds them by listing the package and `check` runs them all.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from purgecheck.discovery import modules_of
from purgecheck.reports.results import Result


@dataclass(frozen=True)
class Budget:
    """How much an engine may do: `quick` for the test suite, full for `make check`."""

    quick: bool = False
    seed: int = 0
    # A mutant being judged (purgecheck.mutants): the model side is patched in-process by the
    # caller; engines that run the C reference pass `Mutant.c_switch` to it.
    mutant: str | None = None
    # One of the engine's `parts` (None: all of them), so that a cluster can run an engine's
    # independent parts as tasks of their own.
    part: str | None = None
    # A first-kill matrix's run of a mutant: only whether some result fails matters, so an
    # engine may stop at its first failure (the scenarios engine does).
    first_failure: bool = False


@dataclass(frozen=True)
class Engine:
    name: str
    description: str
    run: Callable[[Budget], list[Result]]
    module: str = ""  # the module that registered it
    # The names of its independent parts, in the order a whole run gives their results (None:
    # one piece); `run(Budget(part=P))` runs part P alone.
    parts: Callable[[Budget], list[str]] | None = None


ENGINES: dict[str, Engine] = {}


def engine(name: str, description: str,
           parts: Callable[[Budget], list[str]] | None = None):
    def wrap(fn: Callable[[Budget], list[Result]]):
        ENGINES[name] = Engine(name, description, fn, fn.__module__, parts)
        return fn
    return wrap


# The order `check` runs the engines in (and the docs list what they register): the
# sequential model checks first, then the C reference, then the proofs and the slow builds.
# An engine module not named here is found all the same and runs after these, by name.
RUN_ORDER = ("scenarios", "glibc", "fuzz", "conformance", "validate", "prove", "sanitizers")


def engine_modules() -> list[str]:
    """Every module of this package, in RUN_ORDER and then by name: adding an engine is
    adding a module here that registers itself with `@engine`."""
    import sys
    return [f"{__name__}.{m}" for m in modules_of(sys.modules[__name__], RUN_ORDER)]


def load_engines() -> dict[str, Engine]:
    """Import every engine module, each registering its engines; in RUN_ORDER (whichever
    module another import loaded first)."""
    modules = engine_modules()
    for mod in modules:
        importlib.import_module(mod)
    rank = {m: i for i, m in enumerate(modules)}
    ordered = sorted(ENGINES.values(), key=lambda e: rank.get(e.module, len(rank)))
    ENGINES.clear()
    ENGINES.update((e.name, e) for e in ordered)
    return ENGINES
