"""The `prove` engine: every proof of proofs/ (Z3, the explorer, CrossHair) as Results.

`run_proofs` runs the proofs (each must be proved, or bounded: explored or not falsified);
`run_twins` runs the broken twins (each must be refuted; a twin that is not refuted is a
failure). A twin that names a mutant runs with that mutant applied to the model. The glibc
throttle proofs (proofs/glibc_throttle.py, by another engineer) join when present.
"""

from __future__ import annotations

import importlib
import sys

import proofs.registry  # noqa: F401  registers the invariants only the proofs check
from proofs.core import proof_result
from purgecheck.engines import Budget, crosshair_apart, engine
from purgecheck.mutants import MUTANTS, applied
from purgecheck.reports.results import Result

crosshair_apart.install()  # each CrossHair search in an interpreter of its own


def _row(p, out, twin: bool) -> Result:
    """One row; a proof that speaks about many invariants names the first two and a count
    (`purgecheck prove --list` and docs/proofs.md give the whole list)."""
    invs = p.invariants
    name = ",".join(invs) if len(invs) <= 3 else f"{','.join(invs[:2])} +{len(invs) - 2} more"
    return proof_result(name, p, out, twin)


def _progress(name: str, quiet: bool) -> None:
    if not quiet:
        print(f"  proving {name} ...", file=sys.stderr, flush=True)


def run_proofs(quick: bool, only: list[str] | None = None, quiet: bool = True) -> list[Result]:
    from proofs.catalogue import proofs
    from proofs.registry import proof_registry

    proof_registry()
    out = []
    for p in proofs(quick):
        if only and p.name not in only:
            continue
        _progress(p.name, quiet)
        out.append(_row(p, p.run(quick), twin=False))
    out += _glibc("run_proofs", quick, only)
    return out


def run_twins(quick: bool, only: list[str] | None = None, quiet: bool = True) -> list[Result]:
    from proofs.catalogue import twins

    out = []
    for t in twins(quick):
        if only and t.name not in only and t.proof not in only:
            continue
        _progress(t.name, quiet)
        out.append(_row(t, _twin_run(t, quick), twin=True))
    out += _glibc("run_mutant_proofs", quick, only,
                  apply_mutant=lambda name: applied(MUTANTS[name]))
    return out


def _twin_run(t, quick: bool):
    """A twin's run, with its mutant applied when it names one."""
    if t.mutant:
        with applied(MUTANTS[t.mutant]):
            return t.run(quick)
    return t.run(quick)


def _glibc_module():
    """The glibc throttle proofs (proofs/glibc_throttle.py), or None when absent."""
    try:
        return importlib.import_module("proofs.glibc_throttle")
    except ModuleNotFoundError as e:
        if e.name != "proofs.glibc_throttle":
            raise
        return None


def _glibc(fn: str, quick: bool, only: list[str] | None, **kw) -> list[Result]:
    """The glibc throttle proofs (or twins) named in `only` ("glibc": all of them)."""
    mod = _glibc_module()
    if mod is None:
        return []
    if not only or "glibc" in only:
        return list(getattr(mod, fn)(quick, **kw))
    items = mod.PROOFS if fn == "run_proofs" else mod.TWINS
    out: list[Result] = []
    for p in items:
        if p.name in only or getattr(p, "proof", None) in only:
            out += getattr(mod, fn)(quick, only=p.name, **kw)
    return out


def glibc_items() -> tuple[list, list]:
    """(proofs, twins) of proofs/glibc_throttle.py, for --list and --only."""
    mod = _glibc_module()
    return (list(mod.PROOFS), list(mod.TWINS)) if mod else ([], [])


def names(quick: bool = False) -> list[str]:
    """Every name `--only` accepts."""
    from proofs.catalogue import proofs, twins
    gproofs, gtwins = glibc_items()
    return [p.name for p in proofs(quick)] + [t.name for t in twins(quick)] + \
        [p.name for p in gproofs] + [t.name for t in gtwins] + ["glibc"]


def parts(budget: Budget) -> list[str]:
    """Each proof and each twin a part ("proof:NAME", "twin:NAME"; the glibc ones as one part
    each), in the order of a whole run's results."""
    from proofs.catalogue import proofs, twins

    glibc = ["glibc"] if _glibc_module() else []
    return [f"proof:{p.name}" for p in proofs(budget.quick)] + [f"proof:{g}" for g in glibc] + \
        [f"twin:{t.name}" for t in twins(budget.quick)] + [f"twin:{g}" for g in glibc]


@engine("prove", "Z3 proofs, the exhaustive interleaving explorer, CrossHair contracts, and "
                 "their broken twins", parts=parts)
def run_prove_engine(budget: Budget) -> list[Result]:
    if budget.part:
        kind, name = budget.part.split(":", 1)
        if kind == "proof":
            return run_proofs(budget.quick, only=[name])
        if name == "glibc":
            return run_twins(budget.quick, only=[name])
        from proofs.catalogue import twins
        # by name alone (a twin's proof is a name that `only` would match too)
        return [_row(t, _twin_run(t, budget.quick), twin=True)
                for t in twins(budget.quick) if t.name == name]
    return run_proofs(budget.quick) + run_twins(budget.quick)
