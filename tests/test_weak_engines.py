"""The weak engine (the weak explorer) and the relacy engine (Relacy on reference_c/protocol.h).

Both hold on the clean model and the unmutated C reference; each weak mutant (an unsafe one-step
weakening of one atomic access, purgecheck/mutants/catalogue/weak.py) is killed by both, with a
failure that names a property the mutant lists; and the C reference's orderings
(reference_c/atomics.h, read back through the preprocessor) are the weak explorer's, with and
without each -DMI_WEAKEN_* switch and the acquire/release baseline, and with each weakening
chosen at run time (MI_WEAKENED, the Relacy build's `--weaken ACCESS`). The two Relacy builds of
`make setup` run every weakening, each run 50,000 iterations; each mutant is judged where it
dies (KILLED_AT), the engines' whole runs are judged clean. The slow tier builds each weakening
at compile time (a minute of g++ each) and shows its runs are the run-time weakening's.
"""

import re
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

import session_cache

from proofs.weak import configs as C
from proofs.weak import park as K
from proofs.weak import protocol as P
from purgecheck.engines import Budget, load_engines, relacy, weak
from purgecheck.mutants import MUTANTS, applied
from purgecheck.mutants.catalogue.weak import RELACY_BLIND, WEAKENINGS

ROOT = Path(__file__).resolve().parents[1]
ORDERS = {"MI_RELAXED": "relaxed", "MI_ACQUIRE": "acquire", "MI_RELEASE": "release",
          "MI_ACQ_REL": "acq_rel", "MI_SEQ_CST": "seq_cst"}


WEAKENABLE = re.compile(r"MI_WEAKENABLE\((\w+), *(\w+)\)")


def c_orderings(*defines: str, weakened: str | None = None) -> dict[str, str]:
    """access -> ordering, as atomics.h defines MI_ORDER_<ACCESS> under `defines`, with the
    access `weakened` weakened at run time (MI_WEAKENED, the Relacy build's --weaken)."""
    out = subprocess.run(["cc", "-E", "-dM", *[f"-D{d}" for d in defines], "-x", "c",
                          str(ROOT / "reference_c" / "atomics.h")],
                         capture_output=True, text=True, check=True).stdout
    macros = dict(line.split(None, 2)[1:] for line in out.splitlines()
                  if line.startswith("#define MI_") and len(line.split(None, 2)) == 3)

    def resolve(v):
        while v not in ORDERS:
            m = WEAKENABLE.fullmatch(v)
            v = (f"MI_WEAKER_{m[1]}" if m[1] == (weakened or "").upper() else m[2]) if m \
                else macros[v]
        return ORDERS[v]
    return {k[len("MI_ORDER_"):].lower(): resolve(v) for k, v in macros.items()
            if k.startswith("MI_ORDER_")}


def explorer_orderings(park=K.REFERENCE) -> dict[str, str]:
    return asdict(P.REFERENCE) | asdict(park)


def test_c_reference_orderings_are_the_weak_explorers():
    c, model = c_orderings(), explorer_orderings()
    assert {a: c[a] for a in model} == model
    base = c_orderings("MI_HANDOFF_ACQ_REL")
    assert {a: base[a] for a in model} == explorer_orderings(C.PARK_ACQ_REL)


@pytest.mark.parametrize("name", sorted(WEAKENINGS))
def test_each_weakening_switch_weakens_its_one_access(name):
    access, weaker = WEAKENINGS[name]
    ref, weak = c_orderings(), c_orderings(f"MI_WEAKEN_{access.upper()}")
    assert {a for a in ref if ref[a] != weak[a]} == {access}
    assert weak[access] == weaker
    assert C.ONE_STEP_WEAKER[ref[access]] and weaker in C.ONE_STEP_WEAKER[ref[access]]
    assert c_orderings(weakened=access) == weak  # the Relacy build's --weaken: the same


def test_relacy_knows_every_weakenable_access():
    # check.cpp refuses a --weaken it does not list: its list is atomics.h's MI_WEAKER_*
    listed = re.search(r"WEAKENABLE\[\] = \{([^}]*)\}",
                       (ROOT / "reference_c" / "relacy" / "check.cpp").read_text())[1]
    header = (ROOT / "reference_c" / "atomics.h").read_text()
    assert set(re.findall(r'"(\w+)"', listed)) == {
        a.lower() for a in re.findall(r"#define MI_WEAKER_(\w+)", header)} \
        == {access for access, _ in WEAKENINGS.values()}
    run = subprocess.run([str(relacy.binary("")), "park", "10", "--weaken", "unpark_cass"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "no such access" in run.stderr


def test_clean_model_and_reference_hold(monkeypatch):
    # the weak engine's four configurations are the ones the weak modules' tests explore:
    # explored once in the session (tests/session_cache.py)
    checker = C.checker
    monkeypatch.setattr(C, "checker", lambda cfg: session_cache.SharedChecker(checker(cfg)))
    engines = load_engines()
    got = {}
    for engine in ("weak", "relacy"):
        results = got[engine] = engines[engine].run(Budget(quick=True))
        assert results and all(r.ok for r in results), [(r.figure, r.detail) for r in results]
    assert len(got["relacy"]) == 5 and {r.invariant for r in got["relacy"]} == {
        "EP-SEES-STARTED", "PK-HANDOFF-FRESH", "EP-MOVING-HELD"}
    assert {r.invariant for r in got["weak"]} == {"EP-SEES-STARTED", "PK-HANDOFF-FRESH",
                                                  "EP-MOVING-HELD"}


# Where each weak mutant dies: the weak engine's configuration, and the Relacy build (with its
# suffix) and scenario, None for a mutant Relacy cannot see (RELACY_BLIND). The engines run these
# among others (test_clean_model_and_reference_hold runs them whole); here each kill is shown
# where it happens, so each build is made once.
KILLED_AT = {
    "weak-load-start-relaxed": ("weak-adv-2", "", "advance-2"),
    "weak-store-start-relaxed": ("weak-adv-2", "", "advance-2"),
    "weak-spin-load-relaxed": ("weak-adv-2", "", "advance-2"),
    "weak-unpark-cas-release": ("weak-park-2", "", "park"),
    "weak-release-state-relaxed": ("weak-park-2", "", "park"),
    "weak-park-cas-acquire": ("weak-park-2-acqrel", "_acqrel", "park"),
    "weak-claim-cas-release": ("weak-park-2-acqrel", "_acqrel", "park"),
    "weak-fetch-add-acquire": ("weak-fork-2", None, None),
}


def test_every_weak_mutant_has_its_place():
    assert set(KILLED_AT) == set(WEAKENINGS)
    assert {c for c, _, _ in KILLED_AT.values()} <= set(C.ENGINE_CONFIGS)
    assert {(suffix, scenario) for _, suffix, scenario in KILLED_AT.values()} - {(None, None)} \
        <= {(suffix, scenario) for scenario, suffix, _ in relacy.RUNS}
    assert {n for n, (_, _, scenario) in KILLED_AT.items() if scenario is None} \
        == set(RELACY_BLIND)


@pytest.mark.parametrize("name", sorted(WEAKENINGS))
def test_weak_mutant_killed_by_both_engines(name, monkeypatch):
    # the weakened configuration's exploration and counterexample are test_weak_park's
    # test_unsafe_weakening_fails's: once a session (session_cache._weak_key)
    checker = C.checker
    monkeypatch.setattr(C, "checker", lambda cfg: session_cache.SharedChecker(checker(cfg)))
    m = MUTANTS[name]
    config, suffix, scenario = KILLED_AT[name]
    with applied(m):
        explored = weak.run_config(config)
        access = relacy.weakening_of(name)
        checked = relacy.run_relacy(relacy.binary(suffix), scenario, relacy.ITERATIONS[True],
                                    "PK-HANDOFF-FRESH", weakened=access) if scenario else None
    for r in (explored, checked) if checked else (explored,):
        assert r.status == "fail" and r.invariant in m.catches, r
        assert r.detail and r.replay
    if checked:
        assert checked.replay.endswith(f"--weaken {WEAKENINGS[name][0]}")
    assert not C.weakened(), "the mutant leaked out of its block"


def test_relacy_fork_catches_the_forked_child_that_keeps_moving():
    # the C reference's run-time switch of the model's mutant, in protocol.h's forked-child
    # rule: the child of a fork taken while a sweeper held MOVING keeps it
    m = MUTANTS["fork-child-keeps-moving"]
    assert relacy.switch_of(m.name) == "fork_child_keeps_moving"
    r = relacy.run_relacy(relacy.binary(""), "fork", relacy.ITERATIONS[True],
                          "EP-MOVING-HELD", relacy.switch_of(m.name))
    assert r.status == "fail" and r.invariant in m.catches, r
    assert r.replay.endswith("fork 50000 fork_child_keeps_moving") and "CAS succ" in r.detail


NOISE = re.compile(r"0x[0-9a-f]+|check\.cpp\(\d+\)|^(total time|throughput):.*$", re.M)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(KILLED_AT) - set(RELACY_BLIND)))
def test_compile_time_weakening_runs_as_the_run_time_one(name):
    """The fast tier's kills (test_weak_mutant_killed_by_both_engines) weaken at run time; here
    each weakening's own -DMI_WEAKEN_<ACCESS> build (a minute of g++) runs every scenario of
    the engine, and each run is the run-time weakening's: the same exit and the same output
    (the execution history of a failure, iteration for iteration), but for addresses, source
    lines and timings."""
    from purgecheck.cbuild import ensure_current

    access, suffix = WEAKENINGS[name][0], KILLED_AT[name][1]
    built = relacy.BUILD / f"relacy_weaken_{access}{suffix}"
    ensure_current(built)
    for scenario, _, _ in relacy.RUNS:
        args = [scenario, str(relacy.ITERATIONS[True])]
        a = subprocess.run([str(built), *args], capture_output=True, text=True)
        b = subprocess.run([str(relacy.binary(suffix)), *args, "--weaken", access],
                           capture_output=True, text=True)
        assert a.returncode == b.returncode, (scenario, a.returncode, b.returncode)
        assert NOISE.sub("", a.stdout + a.stderr).replace(built.name, "") == \
            NOISE.sub("", b.stdout + b.stderr).replace(relacy.binary(suffix).name, ""), scenario
