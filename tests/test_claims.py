"""The seeds' claims as numbers (purgecheck/simulate/claims.py): each verdict from the
figures (holds, fails, by construction, a ratio with a zero side refused, a figure that is 0
within a tolerance in bytes), the rule that a band wider than the seed's spread needs a
reason, the real figures' hook, and `purgecheck simulate --seeds`: its exit status and its
JSON, numbers throughout."""

from __future__ import annotations

import orjson
import pytest

from purgecheck.cli import main
from purgecheck.simulate import claims as claims_module
from purgecheck.simulate.claims import (BY_CONSTRUCTION, FAILS, HOLDS, NOT_REPRODUCED,
                                        RELATIONS, VERDICTS, ZERO_MB_BYTES, Claim, Comparison,
                                        Figure, MiB, seed_claims, summary)

SIMULATIONS_ONCE = True  # each full-size simulation once for the session (tests/conftest.py)


def _claim(model_a: float, model_b: float, comparison: Comparison, by_construction=False,
           reason="") -> Claim:
    figures = [Figure("a", "discards", 162, 303, model_a), Figure("b", "discards", 234, 363,
                                                                  model_b)]
    return Claim("t", "000", "a test claim", "bun-serve", figures, [comparison],
                 by_construction=by_construction, reason=reason).judge()


# -- each verdict, from the figures ----------------------------------------------------------

def test_a_ratio_within_its_band_holds_and_outside_it_fails():
    held = _claim(30, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)))
    assert held.verdict == HOLDS and held.comparisons[0].value == pytest.approx(0.3)
    failed = _claim(98, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)))
    assert failed.verdict == FAILS and failed.comparisons[0].value == pytest.approx(0.98)
    assert not failed.holds


@pytest.mark.parametrize("a,b", [(0, 100), (116, 0), (0, 0)])
def test_a_ratio_with_a_zero_side_is_not_reproduced(a, b):
    """(n+1)/(e+1) or a band of 10x around 0 would call this a hold: it is not."""
    c = _claim(a, b, Comparison("ratio", "a", "b", band=(0.0, float("inf"))))
    assert c.verdict == FAILS
    assert c.comparisons[0].note == NOT_REPRODUCED and c.comparisons[0].value is None


def test_a_figure_that_is_zero_is_compared_with_a_tolerance_in_bytes():
    def idle(model_mb: float) -> Claim:
        return Claim("z", "000", "free resident 0.0 MB at idle", "bun-serve",
                     [Figure("free at idle end", "MB", 0.0, 0.0, model_mb)],
                     [Comparison("at_most", "free at idle end", margin=ZERO_MB_BYTES / MiB,
                                 margin_bytes=ZERO_MB_BYTES)]).judge()
    assert idle(0.0).verdict == HOLDS
    assert idle(ZERO_MB_BYTES / MiB).verdict == HOLDS
    assert idle((ZERO_MB_BYTES + 4096) / MiB).verdict == FAILS
    assert "52,428 B" in idle(0.0).comparisons[0].statement()


def test_less_needs_the_stated_margin_not_just_a_bare_less_than():
    margin = Comparison("less", "a", "b", margin=5.43)
    assert _claim(0.0, 0.36, margin).verdict == FAILS  # below, but not by the margin
    assert _claim(0.5, 7.4, Comparison("less", "a", "b", margin=5.43)).verdict == HOLDS


def test_a_claim_by_construction_is_labelled_and_not_counted_as_reproduced():
    by = _claim(30, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)),
                by_construction=True, reason="off never discards")
    held = _claim(30, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)))
    failed = _claim(0, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)))
    assert by.verdict == BY_CONSTRUCTION
    assert summary([by, held, failed]) == {"claims": 3, "reproduced": 1, "fails": 1,
                                           "by_construction": 1}
    # by construction and still failing its comparison: a broken model, reported as such
    broken = _claim(0, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)),
                    by_construction=True, reason="off never discards")
    assert broken.verdict == FAILS


def test_a_band_wider_than_the_seeds_spread_needs_a_reason():
    wide = Comparison("within", "a", band=(81, 606))  # 162 .. 303, a factor of 2
    with pytest.raises(ValueError, match="wider than the seed's spread"):
        _claim(200, 0, wide)
    assert _claim(200, 0, Comparison("within", "a", band=(81, 606)),
                  reason="one run").verdict == HOLDS
    assert _claim(200, 0, Comparison("within", "a", band=(162, 303))).verdict == HOLDS
    assert _claim(320, 0, Comparison("within", "a", band=(162, 303))).verdict == FAILS


def test_real_figures_are_carried_beside_the_models_and_leave_the_verdict_alone():
    c = _claim(30, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)))
    assert c.figure("a").real is None
    c.with_real({"a": 250.0})
    assert c.figure("a").real == 250.0 and c.verdict == HOLDS
    assert c.as_json()["figures"][0]["real"] == 250.0
    with pytest.raises(KeyError, match="no figure"):
        c.with_real({"nope": 1.0})


# -- the seeds' claims, computed (small loads) -----------------------------------------------

SCALE = 0.05


@pytest.fixture(scope="module")
def seeds_json():
    """`simulate --seeds --json` once, at a small scale: (exit status, document)."""
    import contextlib
    import io
    out = io.BytesIO()

    class Stdout:
        buffer = out

        def write(self, s):
            out.write(s.encode())

        def flush(self):
            pass

    with contextlib.redirect_stdout(Stdout()):
        code = main(["simulate", "--seeds", "--json", "--scale", str(SCALE)])
    return code, orjson.loads(out.getvalue())


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def test_the_json_carries_every_figure_as_numbers(seeds_json):
    _, doc = seeds_json
    assert len(doc["claims"]) >= 16
    for c in doc["claims"]:
        assert c["verdict"] in VERDICTS and c["figures"] and c["comparisons"]
        for f in c["figures"]:
            assert _is_number(f["model"]), (c["id"], f)
            assert f["seed_lo"] is None or (_is_number(f["seed_lo"]) and _is_number(f["seed_hi"])
                                            and f["seed_lo"] <= f["seed_hi"])
            assert (f["real"] is None or _is_number(f["real"])) and f["unit"]
        for k in c["comparisons"]:
            assert k["relation"] in RELATIONS and isinstance(k["holds"], bool)
            # a band is [lo, hi] in numbers; null only for a side without a bound
            assert k["band"] is None or (_is_number(k["band"][0])
                                         and (k["band"][1] is None or _is_number(k["band"][1])))
        assert (c["verdict"] == FAILS) == (not all(k["holds"] for k in c["comparisons"]))
        if c["by_construction"]:
            assert c["reason"] and c["verdict"] in (BY_CONSTRUCTION, FAILS)
    s = doc["summary"]
    assert s["claims"] == len(doc["claims"]) == s["reproduced"] + s["fails"] + s["by_construction"]


def test_the_seeds_ranges_are_quoted_as_numbers(seeds_json):
    _, doc = seeds_json
    seed = {(c["id"], f["name"]): (f["seed_lo"], f["seed_hi"])
            for c in doc["claims"] for f in c["figures"]}
    assert seed["load-no-hold", "epoch discards"] == (162, 303)
    assert seed["load-no-hold", "epoch faults/request"] == (0.27, 1.97)
    assert seed["load-no-hold", "no-hold discards"] == (4237, 5202)
    assert seed["load-epoch-vs-clock", "clock discards"] == (234, 363)
    assert seed["idle-floor", "ms to the floor"] == (105, 215)


def test_no_ratio_with_a_zero_side_holds(seeds_json):
    _, doc = seeds_json
    for c in doc["claims"]:
        model = {f["name"]: f["model"] for f in c["figures"]}
        for k in c["comparisons"]:
            if k["relation"] == "ratio" and 0 in (model[k["a"]], model[k["b"]]):
                assert not k["holds"] and k["note"] == NOT_REPRODUCED and k["value"] is None
                assert c["verdict"] == FAILS


def test_the_claims_that_hold_by_construction_are_the_ones_named(seeds_json):
    _, doc = seeds_json
    by = {c["id"] for c in doc["claims"] if c["by_construction"]}
    assert by == {"idle-off", "pool-once", "glibc-ebizzy-threads"}
    assert not any(c["verdict"] == HOLDS for c in doc["claims"] if c["by_construction"])


def test_the_exit_status_is_1_exactly_when_a_claim_fails(seeds_json):
    code, doc = seeds_json
    assert code == (1 if doc["summary"]["fails"] else 0)


def _fake(verdicts_of: list[tuple[float, bool]]):
    def fake_seed_claims(scale=1.0, **_):
        return [_claim(a, 100, Comparison("ratio", "a", "b", band=(0.25, 0.5)),
                       by_construction=by, reason="r" if by else "")
                for a, by in verdicts_of]
    return fake_seed_claims


def test_a_failing_claim_exits_1_and_the_table_shows_it(monkeypatch, capsys):
    monkeypatch.setattr(claims_module, "seed_claims", _fake([(30, False), (0, False)]))
    assert main(["simulate", "--seeds"]) == 1
    out = capsys.readouterr().out
    assert "fails" in out and "holds" in out and "not reproduced" in out
    assert "1 of 2 claims reproduced, 1 fail" in out


def test_claims_that_hold_or_hold_by_construction_exit_0(monkeypatch, capsys):
    monkeypatch.setattr(claims_module, "seed_claims", _fake([(30, False), (40, True)]))
    assert main(["simulate", "--seeds", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert [c["verdict"] for c in doc["claims"]] == [HOLDS, BY_CONSTRUCTION]
    assert doc["summary"] == {"claims": 2, "reproduced": 1, "fails": 0, "by_construction": 1}
    assert doc["claims"][0]["comparisons"][0]["value"] == pytest.approx(0.3)


def test_the_help_states_the_exit_status():
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(buf.getvalue().split())
    assert "1 with --seeds: a claim fails" in text


def test_seed_claims_takes_real_figures_by_claim_id():
    got = seed_claims(scale=SCALE, glibc=False,
                      real={"idle-floor": {"ms to the floor": 160.0}})
    floor = next(c for c in got if c.id == "idle-floor")
    assert floor.figure("ms to the floor").real == 160.0
    assert all(f.real is None for c in got if c.id != "idle-floor" for f in c.figures)
