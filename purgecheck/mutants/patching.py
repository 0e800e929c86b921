"""How a mutant is made and applied: small broken copies of one rule each, without editing a file.

A mutant replaces one function of the model (or one entry of a dispatch table) for the
duration of a `with applied(mutant):` block. The replacement is bound in every module that
imported the original, except the invariant modules: the judges are never mutated. Each
mutant names the invariants expected to catch it, and the suite shows that they do.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

@dataclass(frozen=True)
class Patch:
    module: str  # e.g. "model.holes"
    attr: str  # attribute, or dict name when `key` is set
    replacement: Any
    key: Any = None  # patch `module.attr[key]` instead of `module.attr`


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    catches: tuple[str, ...]  # invariant ids expected to report it
    patches: tuple[Patch, ...]
    c_switch: str | None = None  # the C reference's run-time switch for the same mutant
    # True when the broken rule only shows under preemption between atomic steps: the
    # sequential engines (scenarios, virtual-clock conformance) cannot see it; the
    # interleaving explorer and the validation of concurrent C runs do.
    needs_concurrency: bool = False
    # Why only one engine can see it (issue 28: each mutant killed by two engines where two
    # can see it); the kill matrix's page prints it beside a mutant killed by one engine.
    seen_by_one: str = ""


MUTANTS: dict[str, Mutant] = {}
_ACTIVE: list[Mutant] = []  # the mutants applied now, outermost first


def active() -> list[Mutant]:
    """The mutants applied now (a run in a fresh process applies them there again by name:
    proofs/crosshair_run.py)."""
    return list(_ACTIVE)


def mutant(name: str, description: str, catches: tuple[str, ...], *patches: Patch,
           c_switch: str | None = None, needs_concurrency: bool = False,
           seen_by_one: str = "") -> Mutant:
    if name in MUTANTS:
        raise ValueError(f"mutant {name} defined twice")
    m = Mutant(name, description, catches, tuple(patches), c_switch, needs_concurrency,
               seen_by_one)
    MUTANTS[name] = m
    return m


TRACE_INVARIANT = "CF-TRACE-EQUAL"  # what the conformance engine reports a C mutant under


def is_c_trace_mutant(m: Mutant) -> bool:
    """A mutant with a run-time switch in the C reference that shows without preemption: its
    C trace must differ from the clean model's on some scenario (a race cannot, on the
    virtual clock: the validate and sanitizers engines judge those)."""
    return m.c_switch is not None and not m.needs_concurrency


CATALOGUE = "purgecheck.mutants.catalogue"


def _is_judge(modname: str) -> bool:
    """Invariant modules judge the mutant; the catalogue keeps the originals it wraps."""
    return modname.endswith("invariants") or modname.startswith(CATALOGUE)


@contextlib.contextmanager
def applied(m: Mutant | None) -> Iterator[None]:
    """Apply mutant `m` (None: nothing) and undo it on exit, even after an exception."""
    undo: list[Callable[[], None]] = []
    # (original, replacement, where the replacement was bound already) per function patch
    swapped: list[tuple[Any, Any, set[tuple[str, str]]]] = []
    try:
        for p in (m.patches if m else ()):
            mod = importlib.import_module(p.module)
            if p.key is not None:
                table = getattr(mod, p.attr)
                old = table[p.key]
                table[p.key] = p.replacement
                undo.append(lambda t=table, k=p.key, o=old: t.__setitem__(k, o))
                continue
            original = getattr(mod, p.attr)
            swapped.append((original, p.replacement, _bindings(p.replacement)))
            for other in _patchable_modules():
                for attr, val in list(vars(other).items()):
                    if val is original:
                        setattr(other, attr, p.replacement)
                        undo.append(lambda o=other, a=attr, v=val: setattr(o, a, v))
        if m is not None:
            _ACTIVE.append(m)
            undo.append(_ACTIVE.pop)
        yield
    finally:
        for u in reversed(undo):
            u()
        # A module first imported inside the block bound the replacement with its own
        # `from ... import`; nothing above recorded that, so put the original back there too.
        for original, replacement, before in reversed(swapped):
            for name, attr in _bindings(replacement) - before:
                setattr(sys.modules[name], attr, original)


def _project_modules() -> list:
    """The loaded modules of this project."""
    return [other for name, other in list(sys.modules.items()) if other is not None
            and name.split(".")[0] in ("model", "purgecheck", "proofs", "stateful_tests")]


def _patchable_modules() -> list:
    """The modules whose names a mutant rebinds: all but the judges."""
    return [other for other in _project_modules() if not _is_judge(other.__name__)]


def _bindings(obj: Any) -> set[tuple[str, str]]:
    """(module, attribute) of every module attribute of this project bound to `obj`."""
    return {(other.__name__, attr) for other in _project_modules()
            for attr, val in list(vars(other).items()) if val is obj}
