"""Z3: no epoch is shorter than the interval, for any number of sweepers and any preemption.

Seed 000, (2): "No epoch is shorter than the interval, whoever looks and wherever a sweeper
is preempted; that is what the rule rests on." The advance (model/epoch.py, one step per
atomic access) is encoded as a transition system: each sweeper's program counter and locals
(start, now, now2, spins, increments of this call), the shared start and epoch, a monotone
clock, and the ghost history of real beginnings (the increments) and recorded ones (the
stores). An inductive invariant INV is checked the textbook way:
  initial states satisfy INV;  INV and any one step imply INV after it;  INV implies
  EP-NO-SHORT-EPOCH, EP-RECORDED-NOT-BEFORE-REAL and EP-ONE-PER-SWEEP.
Two versions: explicit N = 1..6 sweepers (quantifier free), and a parametric one where the
sweepers are arrays indexed by an unbounded integer and the step is taken by a symbolic
sweeper p; INV is "for all sweepers i, j" and its instances at p, i, j are the hypotheses
(instantiating a universal hypothesis is sound), so that proof holds for every N.

The transition is written once more here (Z3 cannot run the model's step functions); the
suite checks that every edge of the explorer's state graph, built by running the model's own
`advance_step`, satisfies it (tests/test_proofs_advance.py). A broken twin is refuted by
bounded model checking: the shortest trace from an initial state to a violation.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

import model.epoch as ep
from proofs.core import (PROVED, REFUTED, UNKNOWN, Claim, Outcome, Proof, Twin, run_claims,
                         fresh_solver, model_of, put, solve, unknown_detail,
                         val)
from proofs.steptable import Step, render

PCS = [ep.PC_LOAD, ep.PC_READ_CLOCK, ep.PC_COMPARE, ep.PC_CAS, ep.PC_INCREMENT,
       ep.PC_READ_CLOCK2, ep.PC_STORE, ep.PC_WAIT, ep.PC_DONE]
PC = {name: n for n, name in enumerate(PCS)}
LOAD, READ_CLOCK, COMPARE, CAS, INCREMENT, READ_CLOCK2, STORE, WAIT, DONE = range(len(PCS))
CRITICAL = (INCREMENT, READ_CLOCK2, STORE)  # between the winning CAS and the store
LOCALS = ("pc", "start", "now", "now2", "spins", "incs")
MOVING = ep.MOVING

NO_CAS = "no-cas-exclusion"  # the claim is a plain store: every sweeper that found it due wins
START_BEFORE = "start-before-increment"  # the store records the clock read before the increment


@dataclass
class Shared:
    S: object  # start
    E: object  # epoch
    T: object  # the clock
    real: object  # Array Int Int: real beginning (the increment) of each epoch
    rec: object  # Array Int Int: recorded beginning (the store)
    recset: object  # Array Int Bool: recorded yet

    @classmethod
    def fresh(cls, tag: str) -> "Shared":
        A = z3.ArraySort(z3.IntSort(), z3.IntSort())
        return cls(z3.Int(f"start{tag}"), z3.Int(f"epoch{tag}"), z3.Int(f"clock{tag}"),
                   z3.Const(f"real{tag}", A), z3.Const(f"rec{tag}", A),
                   z3.Const(f"recset{tag}", z3.ArraySort(z3.IntSort(), z3.BoolSort())))

    def fields(self) -> dict:
        return dict(vars(self))


def fresh_local(tag: str) -> dict:
    return {f: z3.Int(f"{f}{tag}") for f in LOCALS}


def in_pcs(pc, pcs) -> z3.BoolRef:
    return z3.Or([pc == p for p in pcs])


def lastrec(sh: Shared):
    """The recorded beginning of the current epoch (epoch 0 began at 0: start = 0)."""
    return z3.If(sh.E == 0, 0, sh.rec[sh.E])


def is_due(start, now, interval):
    """model.epoch.is_epoch_due: `not (now >= start and now - start < interval)`."""
    return z3.Not(z3.And(now >= start, now - start < interval))


def sweeper_step(sh: Shared, lc: dict, interval, spin_max, broken: str = ""):
    """One atomic step of sweeper `lc` (mirror of model.epoch.STEPS, by program counter)."""
    pc = lc["pc"]
    won = z3.BoolVal(True) if broken == NO_CAS else sh.S == lc["start"]
    stored = lc["now"] if broken == START_BEFORE else lc["now2"]
    go = z3.Or(sh.S != MOVING, lc["spins"] >= spin_max)
    cases = {
        LOAD: ({}, {"start": sh.S, "pc": z3.If(sh.S == MOVING, WAIT, READ_CLOCK)}),
        READ_CLOCK: ({}, {"now": sh.T, "pc": COMPARE}),
        COMPARE: ({}, {"pc": z3.If(is_due(lc["start"], lc["now"], interval), CAS, DONE)}),
        CAS: ({"S": z3.If(won, MOVING, sh.S)}, {"pc": z3.If(won, INCREMENT, WAIT)}),
        INCREMENT: ({"E": sh.E + 1, "real": z3.Store(sh.real, sh.E + 1, sh.T)},
                    {"incs": lc["incs"] + 1, "pc": READ_CLOCK2}),
        READ_CLOCK2: ({}, {"now2": sh.T, "pc": STORE}),
        STORE: ({"S": stored, "rec": z3.Store(sh.rec, sh.E, stored),
                 "recset": z3.Store(sh.recset, sh.E, True)}, {"pc": DONE}),
        WAIT: ({}, {"spins": z3.If(go, lc["spins"], lc["spins"] + 1),
                    "pc": z3.If(go, DONE, WAIT)}),
        # a finished call: the sweeper sweeps again (a new call, locals reset)
        DONE: ({}, {"pc": LOAD, "start": 0, "now": 0, "now2": 0, "spins": 0, "incs": 0}),
    }
    sh2, lc2 = {}, {}
    for name, old in sh.fields().items():
        expr = old
        for p, (su, _) in cases.items():
            if name in su:
                expr = z3.If(pc == p, su[name], expr)
        sh2[name] = expr
    for name, old in lc.items():
        expr = old
        for p, (_, lu) in cases.items():
            if name in lu:
                expr = z3.If(pc == p, lu[name], expr)
        lc2[name] = expr
    return Shared(**sh2), lc2


def tick(sh: Shared, d):
    """The clock moves on by d > 0 ms (monotone)."""
    return Shared(sh.S, sh.E, sh.T + d, sh.real, sh.rec, sh.recset)


# -- the invariant ----------------------------------------------------------------------

def inv_global(sh: Shared, interval) -> list:
    return [sh.E >= 0, sh.T >= 0, sh.real[0] == 0, sh.real[sh.E] <= sh.T, sh.real[sh.E] >= 0,
            z3.Or(sh.S == MOVING, sh.S >= 0),
            z3.Implies(sh.S != MOVING, z3.And(
                sh.S == lastrec(sh), z3.Or(sh.E == 0, sh.recset[sh.E]),
                sh.S <= sh.T, sh.S >= sh.real[sh.E]))]


def inv_epoch(sh: Shared, e, interval) -> list:
    """At epoch e: EP-NO-SHORT-EPOCH, EP-RECORDED-NOT-BEFORE-REAL, nothing recorded ahead."""
    past = z3.And(e >= 1, e <= sh.E)
    return [z3.Implies(past, sh.real[e] - sh.real[e - 1] >= interval),
            z3.Implies(past, sh.real[e] <= sh.T),
            z3.Implies(z3.And(past, sh.recset[e]), sh.rec[e] >= sh.real[e]),
            z3.Implies(e > sh.E, z3.Not(sh.recset[e]))]


def inv_local(sh: Shared, lc: dict, interval) -> list:
    pc, start, now = lc["pc"], lc["start"], lc["now"]
    return [
        pc >= 0, pc < len(PCS), lc["incs"] >= 0, lc["incs"] <= 1,
        z3.Implies(in_pcs(pc, (LOAD, READ_CLOCK, COMPARE, CAS, INCREMENT)), lc["incs"] == 0),
        z3.Implies(in_pcs(pc, (READ_CLOCK, COMPARE, CAS)),
                   z3.And(start != MOVING, start >= 0, start <= sh.T)),
        z3.Implies(in_pcs(pc, (COMPARE, CAS)), z3.And(start <= now, now <= sh.T)),
        z3.Implies(pc == CAS, now - start >= interval),
        z3.Implies(in_pcs(pc, CRITICAL), sh.S == MOVING),
        z3.Implies(pc == INCREMENT, z3.And(start == lastrec(sh), start >= sh.real[sh.E],
                                           now - start >= interval, now <= sh.T)),
        z3.Implies(in_pcs(pc, (READ_CLOCK2, STORE)),
                   z3.And(lc["incs"] == 1, sh.E >= 1, sh.real[sh.E] <= sh.T)),
        z3.Implies(pc == STORE, z3.And(lc["now2"] >= sh.real[sh.E], lc["now2"] <= sh.T)),
    ]


def inv_pair(a: dict, b: dict) -> list:
    """Mutual exclusion: two sweepers are never both between the CAS and the store."""
    return [z3.Not(z3.And(in_pcs(a["pc"], CRITICAL), in_pcs(b["pc"], CRITICAL)))]


def prop(sh: Shared, lcs: list[dict], e, interval) -> list:
    """The properties themselves (their registry ids in the labels of the claims)."""
    past = z3.And(e >= 1, e <= sh.E)
    return [z3.Implies(past, sh.real[e] - sh.real[e - 1] >= interval),
            z3.Implies(z3.And(past, sh.recset[e]), sh.rec[e] >= sh.real[e])] + \
        [lc["incs"] <= 1 for lc in lcs]


def initial(sh: Shared, lcs: list[dict]) -> list:
    return [sh.E == 0, sh.S == 0, sh.T >= 0, sh.real[0] == 0,
            sh.recset == z3.K(z3.IntSort(), z3.BoolVal(False))] + \
        [z3.And(z3.Or(lc["pc"] == LOAD, lc["pc"] == DONE), lc["incs"] == 0, lc["spins"] == 0)
         for lc in lcs]


def params():
    interval, spin_max = z3.Ints("interval spin_max")
    return interval, spin_max, [interval >= 1, interval <= ep.MI_HOLES_INTERVAL_MAX_MS,
                                spin_max >= 0]


# -- explicit N ---------------------------------------------------------------------------

def full_inv(sh, lcs, e, interval) -> list:
    out = inv_global(sh, interval) + inv_epoch(sh, e, interval)
    for n, lc in enumerate(lcs):
        out += inv_local(sh, lc, interval)
        for lc2 in lcs[n + 1:]:
            out += inv_pair(lc, lc2)
    return out


def explicit_claims(n: int, broken: str = "") -> list[Claim]:
    interval, spin_max, ps = params()
    sh, e = Shared.fresh(""), z3.Int("e")
    lcs = [fresh_local(f"_{i}") for i in range(n)]
    inv = full_inv(sh, lcs, e, interval)
    claims = [Claim(f"N={n}: initial states satisfy INV", ps + initial(sh, lcs),
                    z3.And(full_inv(sh, lcs, e, interval)))]
    d = z3.Int("d")
    actions = [(f"sweeper {p}", p) for p in range(n)] + [("clock tick", None)]
    for label, p in actions:
        if p is None:
            sh2, lcs2, extra = tick(sh, d), lcs, [d >= 1]
        else:
            sh2, lc2 = sweeper_step(sh, lcs[p], interval, spin_max, broken)
            lcs2, extra = lcs[:p] + [lc2] + lcs[p + 1:], []
        # INV at e (the epoch the goal speaks of) and at E + 1 (the epoch an increment makes)
        hyps = ps + inv + inv_epoch(sh, sh.E + 1, interval) + extra
        claims.append(Claim(f"N={n}: a step of {label} preserves INV", hyps,
                            z3.And(full_inv(sh2, lcs2, e, interval))))
    claims.append(Claim(f"N={n}: INV implies EP-NO-SHORT-EPOCH, EP-RECORDED-NOT-BEFORE-REAL, "
                        f"EP-ONE-PER-SWEEP", ps + inv, z3.And(prop(sh, lcs, e, interval))))
    return claims


# -- parametric: any N ---------------------------------------------------------------------

def parametric_claims(broken: str = "") -> list[Claim]:
    interval, spin_max, ps = params()
    sh, e, n = Shared.fresh(""), z3.Int("e"), z3.Int("N")
    arrs = {f: z3.Array(f"{f}_of", z3.IntSort(), z3.IntSort()) for f in LOCALS}
    at = lambda x: {f: arrs[f][x] for f in LOCALS}  # noqa: E731
    p, i, j = z3.Ints("p i j")
    idx = [n >= 1, p >= 0, p < n, i >= 0, i < n, j >= 0, j < n]

    def inv_at(shx, atx) -> list:
        out = inv_global(shx, interval) + inv_epoch(shx, e, interval)
        for x in (p, i, j):
            out += inv_local(shx, atx(x), interval)
        for a, b in ((p, i), (p, j), (i, j)):
            out += [z3.Implies(a != b, z3.And(inv_pair(atx(a), atx(b))))]
        return out

    sh2, lc2 = sweeper_step(sh, at(p), interval, spin_max, broken)
    arrs2 = {f: z3.Store(arrs[f], p, lc2[f]) for f in LOCALS}
    at2 = lambda x: {f: arrs2[f][x] for f in LOCALS}  # noqa: E731
    d = z3.Int("d")
    hyps = ps + idx + inv_at(sh, at) + inv_epoch(sh, sh.E + 1, interval)
    goal_i = inv_global(sh2, interval) + inv_epoch(sh2, e, interval) + \
        inv_local(sh2, at2(i), interval) + [z3.Implies(i != j, z3.And(inv_pair(at2(i), at2(j))))]
    sh3 = tick(sh, d)
    goal_t = inv_global(sh3, interval) + inv_epoch(sh3, e, interval) + \
        inv_local(sh3, at(i), interval)
    init = [sh.E == 0, sh.S == 0, sh.T >= 0, sh.real[0] == 0,
            sh.recset == z3.K(z3.IntSort(), z3.BoolVal(False)),
            z3.Or(arrs["pc"][i] == LOAD, arrs["pc"][i] == DONE), arrs["incs"][i] == 0]
    return [
        Claim("any N: initial states satisfy INV at every sweeper i", ps + idx + init,
              z3.And(inv_global(sh, interval) + inv_epoch(sh, e, interval) +
                     inv_local(sh, at(i), interval))),
        Claim("any N: a step of any sweeper p preserves INV at every i, j", hyps, z3.And(goal_i)),
        Claim("any N: a clock tick preserves INV", hyps + [d >= 1], z3.And(goal_t)),
        Claim("any N: INV implies the properties at every i", ps + idx + inv_at(sh, at),
              z3.And(prop(sh, [at(i)], e, interval))),
    ]


# -- bounded model checking: the shortest violating trace (for the broken twins) -------------

class BmcUnknown(Exception):
    """Z3 could not decide a depth of the unrolling within its resource limit."""

    def __init__(self, depth: int, reason: str) -> None:
        super().__init__(f"depth {depth}: {reason}")
        self.depth, self.reason = depth, reason


def bmc(n: int, broken: str, max_depth: int = 16, interval_ms: int = 3):
    """Unroll the system from an initial state; return (depth, trace) of the shortest path to
    a state where a property fails, or None. Each step is one sweeper's step or a tick."""
    spin_max = 2
    shs = [Shared.fresh("@0")]
    lcss = [[fresh_local(f"_{i}@0") for i in range(n)]]
    s = fresh_solver()
    put(s, *initial(shs[0], lcss[0]))
    acts, ds = [], []
    for k in range(1, max_depth + 1):
        sh, lcs = shs[-1], lcss[-1]
        act, d = z3.Int(f"act@{k}"), z3.Int(f"d@{k}")
        acts.append(act)
        ds.append(d)
        put(s, act >= 0, act <= n, d >= 1)
        nsh, nlcs = Shared.fresh(f"@{k}"), [fresh_local(f"_{i}@{k}") for i in range(n)]
        options = [z3.And(act == n, *eq_state(nsh, nlcs, tick(sh, d), lcs))]
        for p in range(n):
            sh2, lc2 = sweeper_step(sh, lcs[p], interval_ms, spin_max, broken)
            options.append(z3.And(act == p, *eq_state(nsh, nlcs, sh2,
                                                      lcs[:p] + [lc2] + lcs[p + 1:])))
        put(s, z3.Or(options))
        shs.append(nsh)
        lcss.append(nlcs)
        e = z3.Int(f"e@{k}")
        s.push()
        put(s, z3.Not(z3.And(prop(nsh, nlcs, e, interval_ms))))
        solved = solve(s)
        if solved.answer == z3.unknown:  # out of resources: no verdict at this depth
            s.pop()
            raise BmcUnknown(k, solved.reason)
        if solved.answer == z3.sat:
            m = model_of(s)
            trace = bmc_trace(m, shs, lcss, acts, n)
            s.pop()
            return k, trace, m.eval(e).as_long()
        s.pop()
    return None


def eq_state(nsh: Shared, nlcs: list[dict], sh: Shared, lcs: list[dict]) -> list:
    out = [getattr(nsh, f) == getattr(sh, f) for f in ("S", "E", "T", "real", "rec", "recset")]
    for a, b in zip(nlcs, lcs):
        out += [a[f] == b[f] for f in LOCALS]
    return out


def bmc_trace(m, shs, lcss, acts, n) -> list[Step]:
    def row(k: int) -> dict:
        sh = shs[k]
        E = val(m, sh.E)
        S = val(m, sh.S)
        r = {"clock": val(m, sh.T), "start": "MOVING" if S == MOVING else S, "epoch": E,
             "began(epoch)": val(m, sh.real[E]) if E else 0,
             "recorded(epoch)": (val(m, sh.rec[E]) if val(m, sh.recset[E]) else "-") if E else 0}
        for i, lc in enumerate(lcss[k]):
            r[f"pc{i}"] = PCS[val(m, lc["pc"])]
        return r

    steps = [Step("-", "initial state", row(0))]
    for k, act in enumerate(acts, start=1):
        a = val(m, act)
        if a == n:
            steps.append(Step("clock", "tick", row(k)))
        else:
            pc = PCS[val(m, lcss[k - 1][a]["pc"])]
            steps.append(Step(f"sweeper {a}", pc, row(k)))
    return steps


# -- the transition against the model's own steps ----------------------------------------------

# the explorer's bare-2 (two sweepers) at this interval, up to this clock
AGREE_INTERVAL, AGREE_CLOCK_BOUND = 2, 3


def encoded_step(s5: tuple, sw: tuple, interval: int, spin_max: int, broken: str = ""
                 ) -> tuple:
    """sweeper_step from the explorer's shared values `s5` (clock, start, epoch, its real and
    recorded beginning) and sweeper `sw`, evaluated: (start, epoch, pc, real beginning of the
    epoch, the locals)."""
    from proofs.agreement import value

    iv = z3.IntVal
    real = z3.Store(z3.K(z3.IntSort(), iv(0)), iv(s5[2]), iv(s5[3]))
    rec = z3.Store(z3.K(z3.IntSort(), iv(-1)), iv(s5[2]),
                   iv(s5[4] if s5[4] is not None else -1))
    recset = z3.K(z3.IntSort(), z3.BoolVal(False))
    sh = Shared(iv(s5[1]), iv(s5[2]), iv(s5[0]), real, rec, recset)
    lc = {"pc": iv(PC[sw[0]]), "start": iv(sw[1]), "now": iv(sw[2]), "now2": iv(sw[3]),
          "spins": iv(sw[4]), "incs": iv(sw[5])}
    sh2, lc2 = sweeper_step(sh, lc, iv(interval), iv(spin_max), broken)
    return (value(sh2.S), value(sh2.E), value(lc2["pc"]), value(sh2.real[sh2.E]),
            tuple(value(lc2[f]) for f in LOCALS[1:]))


def admits(step: tuple, s: tuple, ns: tuple, sw2: tuple) -> bool:
    """The explorer's step (from `s` to `ns`, the sweeper to `sw2`), which ran the model's
    advance_step, is the encoded step."""
    from proofs import explorer as X

    S, E, pc, real, local = step
    want_pc = DONE if sw2 == X.IDLE else PC[sw2[0]]
    ok = S == ns[1] and E == ns[2] and pc == want_pc
    if ns[2] != s[2]:
        ok = ok and real == ns[3]
    if sw2 != X.IDLE:
        ok = ok and local == tuple(sw2[1:len(LOCALS)])
    return ok


def transition_agrees(clock_bound: int = AGREE_CLOCK_BOUND) -> Outcome | None:
    """Every sweeper step of every reachable state of the explorer's bare-2 configuration (two
    sweepers, without the dead-locals reduction, clock up to `clock_bound`), which runs the
    model's advance_step (looked up now), is a step of the Z3 transition."""
    import time
    from dataclasses import replace

    from proofs import explorer as X

    t0 = time.perf_counter()
    cfg = replace(X.Config("bare-2", 2), reduce_dead=False, clock_bound=clock_bound,
                  interval=AGREE_INTERVAL)
    saved, ep.spin_max = ep.spin_max, cfg.spin_max
    encoded: dict[tuple, tuple] = {}  # many states share the values a step reads
    try:
        seen, frontier, steps = {X.initial_state(cfg)}, [X.initial_state(cfg)], 0
        while frontier:
            s = frontier.pop()
            for sw in s[5]:
                if sw == X.IDLE:
                    continue
                sw2, st, _ = X.step_sweeper(cfg, s, sw)
                steps += 1
                key = (s[:5], sw)
                if key not in encoded:
                    encoded[key] = encoded_step(s[:5], sw, cfg.interval, cfg.spin_max)
                if not admits(encoded[key], s, X.with_epoch(s, st), sw2):
                    return Outcome("differs", f"{steps:,} steps compared",
                                   f"the model's advance step of a sweeper at {sw[0]} from "
                                   f"(clock, start, epoch) = {s[:3]} goes to {sw2}: not a step "
                                   f"of the proof's transition", time.perf_counter() - t0)
            for _, ns, _ in X.successors(cfg, s):
                if ns not in seen:
                    seen.add(ns)
                    frontier.append(ns)
    finally:
        ep.spin_max = saved
    return None


# -- running ----------------------------------------------------------------------------------

def _render_cti(claim: Claim, m) -> str:
    return f"(a state satisfying INV whose step breaks it; epoch {val(m, z3.Int('epoch'))}, " \
           f"start {val(m, z3.Int('start'))}, clock {val(m, z3.Int('clock'))})"


def run_advance_proof(quick: bool, broken: str = "") -> Outcome:
    def prove() -> Outcome:
        ns = range(1, 4) if quick else range(1, 7)
        claims = [c for n in ns for c in explicit_claims(n, broken)] + parametric_claims(broken)
        return run_claims(claims, _render_cti,
                          f"N = {ns.start}..{ns.stop - 1} explicit and any N (parametric), any "
                          f"interval, spin bound and preemption, monotone clock")
    if broken:  # a broken transition is not the model's: Z3 must refute it by itself
        return prove()
    from proofs.agreement import then_prove
    return then_prove(transition_agrees, f"every step of the explorer's bare-2 (interval "
                                         f"{AGREE_INTERVAL} ms) up to clock {AGREE_CLOCK_BOUND} "
                                         f"ms", prove)


def run_twin(broken: str, n: int = 2):
    def run(quick: bool) -> Outcome:
        import time
        t0 = time.perf_counter()
        ind = run_advance_proof(True, broken)
        try:
            found = bmc(n, broken)
        except BmcUnknown as e:
            return Outcome(UNKNOWN, f"BMC stopped at depth {e.depth}",
                           unknown_detail(e.reason), time.perf_counter() - t0)
        seconds = time.perf_counter() - t0
        if found is None:
            return Outcome(UNKNOWN if ind.status != PROVED else PROVED,
                           "no violation within 16 steps", ind.detail, seconds)
        depth, trace, e = found
        text = render(trace, title=f"shortest violating trace ({depth} steps, interval 3 ms, "
                                   f"{n} sweepers); property fails at epoch {e}:")
        return Outcome(REFUTED, f"{depth}-step counterexample (BMC), induction: {ind.status}",
                       text, seconds)
    return run


PROOF = Proof("advance", ("EP-NO-SHORT-EPOCH", "EP-RECORDED-NOT-BEFORE-REAL", "EP-ONE-PER-SWEEP"),
              "z3", run_advance_proof,
              "inductive invariant of the epoch advance, N = 1..6 and parametric")
TWINS = [
    # the model's own advance broken: its steps are no longer the proof's, the proof fails
    Twin("advance-model-no-cas", "advance", ("EP-NO-SHORT-EPOCH",), "z3", run_advance_proof,
         "mutant no-cas-exclusion: the model's claim is a plain store",
         mutant="no-cas-exclusion"),
    Twin("advance-model-start-before-increment", "advance", ("EP-RECORDED-NOT-BEFORE-REAL",),
         "z3", run_advance_proof, "mutant start-before-increment: the model records the "
         "reading taken before the increment", mutant="start-before-increment"),
    Twin(NO_CAS, "advance", ("EP-NO-SHORT-EPOCH",), "z3", run_twin(NO_CAS),
         "the claim is a plain store, not a CAS: two sweepers both move the epoch"),
    Twin(START_BEFORE, "advance", ("EP-NO-SHORT-EPOCH", "EP-RECORDED-NOT-BEFORE-REAL"), "z3",
         run_twin(START_BEFORE), "the new epoch's start is the clock read before the increment"),
]
