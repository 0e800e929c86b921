"""The `relacy` engine: the C reference's own epoch advance, stamp, park handoff and forked-child
rule under Relacy.

reference_c/protocol.h is the C reference's atomic protocol, every access through
reference_c/atomics.h; reference_c/relacy/check.cpp builds it against rl::atomic, so that
Relacy's scheduler explores its weak executions (relaxed, acquire/release, seq_cst) over the
weak explorer's scenarios: the advance with two and three sweepers, the park handoff at the
reference's orderings and from the acquire/release baseline, and a fork beside the advance. A
failed check names its property (the CHECK lines of check.cpp); a data race on the page's plain
fields is PK-HANDOFF-FRESH. When the kill matrix judges a weak mutant (purgecheck/mutants/
catalogue/weak.py), each run weakens its access at run time (`--weaken ACCESS`: the same
orderings as a build with its -DMI_WEAKEN_<ACCESS> switch, so the two builds made by
`make setup` judge every weakening); a mutant with a run-time switch of the C reference
(`c_switch`) runs with it (protocol.h's MI_MUTANT: the forked-child rule, the advance's and the
park's switches); any other runs the reference unmutated. Relacy's random scheduler is seeded by the
iteration number, so a run's verdict is the same on every machine.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from purgecheck.engines import Budget, engine
from purgecheck.reports.results import Result

ENGINE = "relacy"
BUILD = Path(__file__).resolve().parents[2] / "reference_c" / "build"
# (scenario, build suffix, property its result speaks for while it holds)
RUNS = (("advance-2", "", "EP-SEES-STARTED"), ("advance-3", "", "EP-SEES-STARTED"),
        ("park", "", "PK-HANDOFF-FRESH"), ("park", "_acqrel", "PK-HANDOFF-FRESH"),
        ("fork", "", "EP-MOVING-HELD"))
# Iterations per run: the weakest kill needs about 25,000 (weak-unpark-cas-release, park).
ITERATIONS = {True: 50_000, False: 300_000}
PROPERTY = re.compile(r'"([A-Z]{2}-[A-Z0-9-]+)"')
DETAIL_LINES = 16
# History lines of each iteration's set-up, left out of a failure's detail.
SETUP_LINES = ("[CTOR ", "[BEFORE ", "in world_init")


def binary(suffix: str) -> Path:
    """The Relacy build: the reference's orderings ('') or the acquire/release baseline."""
    return BUILD / f"relacy_check{suffix}"


def weakening_of(mutant: str | None) -> str | None:
    """The access a weak mutant weakens (None: the reference's orderings)."""
    from purgecheck.mutants.catalogue.weak import WEAKENINGS

    return WEAKENINGS[mutant][0] if mutant in WEAKENINGS else None


def switch_of(mutant: str | None) -> str:
    """The C reference's run-time switch of a mutant that has one ('' for none)."""
    from purgecheck.mutants import MUTANTS

    m = MUTANTS.get(mutant) if mutant else None
    return (m.c_switch or "") if m else ""


def property_of(output: str, default: str) -> str:
    """The property a failing run names: the CHECK's id, or a data race on the page's plain
    fields (PK-HANDOFF-FRESH)."""
    m = PROPERTY.search(output)
    if m:
        return m.group(1)
    return "PK-HANDOFF-FRESH" if "DATA RACE" in output else default


def run_relacy(path: Path, scenario: str, iterations: int, headline: str,
               switch: str = "", weakened: str | None = None) -> Result:
    """One run of a Relacy build; `switch` a run-time mutant of protocol.h, `weakened` an
    access run at its weaker ordering (atomics.h's MI_WEAKER_<ACCESS>)."""
    import proofs.weak.registry  # noqa: F401  the ids the results name
    from purgecheck.cbuild import BuildError, ensure_current

    args = [scenario, str(iterations)] + ([switch] if switch else []) + \
        (["--weaken", weakened] if weakened else [])
    command = f"reference_c/build/{path.name} {' '.join(args)}"
    t0 = time.perf_counter()
    try:
        ensure_current(path)
    except BuildError as e:
        return Result(headline, ENGINE, "error", "", detail=str(e),
                      replay=f"make -C reference_c build/{path.name}")
    run = subprocess.run([str(path), *args], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    figure = f"{path.name} {scenario}: {iterations:,} iterations"
    if run.returncode == 0:
        return Result(headline, ENGINE, "hold", figure, dt)
    out = run.stdout + run.stderr
    lines = [line for line in out.splitlines()[1:] if line.strip() and not any(
        setup in line for setup in SETUP_LINES)][:DETAIL_LINES]
    status = "fail" if run.returncode == 1 else "error"
    return Result(property_of(out, headline), ENGINE, status, figure, dt,
                  detail="\n".join(lines), replay=command)


@engine(ENGINE, "Relacy on the C reference's protocol.h (the advance, the stamp, the park "
                "handoff, a fork's child), at the reference's orderings or the judged "
                "weakening's build")
def run_relacy_engine(budget: Budget) -> list[Result]:
    access, switch = weakening_of(budget.mutant), switch_of(budget.mutant)
    out = []
    for scenario, suffix, headline in RUNS:
        out.append(run_relacy(binary(suffix), scenario, ITERATIONS[budget.quick], headline,
                              switch, access))
        if budget.first_failure and not out[-1].ok:
            break
    return out
