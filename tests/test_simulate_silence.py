"""The park after silence with one timer per thread (purgecheck/simulate/mimalloc.py,
`Simulation._silence_from` and `_on_park_after`; issue 29, 4, fifteenth round) against its
plain definition, a timer set at every call that parks the thread if it made no call since
(`TimerPerCall` below, the simulator before the round): run side by side on the same calls,
after every call the two have parked and swept the same threads at the same times in the
same order with the other timers, and hold the same state; at the end every figure is the
same but resident memory over time (MB·s), which the plain definition sums as floats at
every step of its clock and the simulator exactly (a relative difference of at most 1e-12).

Broken variants caught (each a test below): a timer not set again for the thread's last
call (a thread that called while its timer ran never parks), and one set again a whole
silence after the timer that ran instead of after the last call (it parks late)."""

from __future__ import annotations

import pytest

from purgecheck.simulate import mimalloc
from purgecheck.simulate.mimalloc import Simulation
from purgecheck.simulate.workloads import Call, make_workload


class TimerPerCall(Simulation):
    """The plain definition: a timer at every call; the float sum of the resident memory
    over time at every step of the clock beside the simulator's exact one."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.float_area = 0.0

    def _silence_from(self, th: int) -> None:
        self.seq += 1
        self.silences.append((self.t + self.park_after_ms, self.seq, "park_after", th))

    def _on_park_after(self, th: int) -> None:
        if self.t - self.last_call.get(th, self.t) >= self.park_after_ms:
            self._loop_idle(th)

    def _set_clock(self, t: float) -> None:
        self.float_area += len(self.resident) * (t - self.t)
        super()._set_clock(t)


def recorded(sim: Simulation) -> list:
    """What the background does, in order: every timer that ran, with the time and its
    thread's park state after it, but a park_after timer that does nothing: its thread called
    since (the plain definition's timers of every call but the last), or it is one more of
    the silence that ended (the plain definition's timers of calls at the same time: the
    first parks, the next find the thread parked)."""
    done: list = []
    ended: set[tuple[float, int]] = set()  # (time, thread) of the silences that ended
    for kind, handler in list(sim.on_timer.items()):
        def run(th, kind=kind, handler=handler):
            if kind == "park_after":
                if sim.t - sim.last_call.get(th, sim.t) < sim.park_after_ms or \
                        (sim.t, th) in ended:
                    return handler(th)
                ended.add((sim.t, th))
            handler(th)
            done.append((sim.t, kind, th, sim.world.thread(th).park_state))
        sim.on_timer[kind] = run
    return done


def state(sim: Simulation) -> tuple:
    world = sim.world
    return (sim.t, sim.seq, len(sim.resident), sim.allocations, sim.arena_purges,
            world.mem.discard_calls, world.mem.discarded_bytes, world.mem.refaults,
            sorted((t, th.park_state, th.park_swept) for t, th in world.threads.items()),
            len(sim.samples), sim.samples[-1:],
            sorted(t for t in sim.timers if t[2] != "park_after"), sim.scavenger_due)


def side_by_side(calls: list[Call], design: str, idle: str, park_after_ms: float,
                 **kw) -> tuple[Simulation, Simulation, int]:
    """Both simulations on `calls`, compared after each; the two and the parks made."""
    plain = TimerPerCall(design, idle, park_after_ms=park_after_ms, **kw)
    fast = Simulation(design, idle, park_after_ms=park_after_ms, **kw)
    done_plain, done_fast = recorded(plain), recorded(fast)
    for i, c in enumerate(calls):
        plain.call(c)
        fast.call(c)
        assert done_fast == done_plain, f"after call {i} ({c})"
        assert state(fast) == state(plain), f"after call {i} ({c})"
    for sim in (plain, fast):
        sim.end_load()
        sim.advance_to(sim.t + 50)
        sim._sample()
    assert done_fast == done_plain and state(fast) == state(plain)
    assert fast.samples == plain.samples
    parks = sum(kind == "park_after" for _, kind, _, _ in done_fast)
    return plain, fast, parks


def bursts(seed: int, threads: int = 3, calls: int = 2000) -> list[Call]:
    """Threads that call in bursts with gaps around the silence (2 ms): some gaps end a
    silence and some do not; several calls at the same time now and then."""
    import random
    rng = random.Random(seed)
    out, live, t, block = [], {th: [] for th in range(1, threads + 1)}, 0.0, 0
    for _ in range(calls):
        t += rng.choice((0.0, 0.01, 0.3, 1.0, 1.9, 2.0, 2.1, 3.0, 6.0))
        th = rng.randrange(1, threads + 1)
        if live[th] and rng.random() < 0.45:
            out.append(Call(t, th, "free", live[th].pop(rng.randrange(len(live[th])))))
        else:
            block += 1
            live[th].append(block)
            out.append(Call(t, th, "malloc", block, rng.choice((16, 48, 1000, 9000, 70_000))))
    return out


@pytest.mark.parametrize("idle", ["park", "inline", "pool"])
@pytest.mark.parametrize("design", ["off", "epoch", "no-hold"])
def test_one_timer_per_thread_parks_as_a_timer_per_call(design, idle):
    plain, fast, parks = side_by_side(bursts(7), design, idle, 2.0, sample_ms=1.0,
                                      scavenger_late_ms=0.5, seed=1)
    assert parks > 100  # the silences ended (a park, a sweep) often, between calls: about 1,500
    want, got = plain.counters(), fast.counters()
    assert {k: v for k, v in got.items() if k != "rss_mb_s"} == \
        {k: v for k, v in want.items() if k != "rss_mb_s"}
    exact = float(fast.resident_area())
    assert exact > 0 and abs(plain.float_area - exact) <= 1e-12 * exact
    assert want["rss_mb_s"] == pytest.approx(got["rss_mb_s"], rel=1e-12)


def test_a_workload_with_loop_calls_and_threads():
    w = make_workload("bun-serve", requests=300, threads=2, gc_every=3, idle_ms=100)
    _, _, parks = side_by_side(list(w.calls()), "epoch", "park", 0.2, sample_ms=5.0)
    assert parks > 10


def test_a_timer_not_set_again_is_caught(monkeypatch):
    """Broken: the timer is not set again when the thread called since it was set."""
    def never_again(self, th):
        del self.silence_armed[th]
        if self.t - self.last_call.get(th, self.t) >= self.park_after_ms:
            self._loop_idle(th)
    monkeypatch.setattr(mimalloc.Simulation, "_on_park_after", never_again)
    with pytest.raises(AssertionError, match="after call"):
        side_by_side(bursts(7), "epoch", "park", 2.0, sample_ms=1.0)


def test_a_timer_set_again_a_silence_later_is_caught(monkeypatch):
    """Broken: set again park_after_ms after the timer that ran, not after the last call."""
    def late(self, th):
        armed = self.silence_armed.pop(th)
        if self.t - self.last_call.get(th, self.t) >= self.park_after_ms:
            self._loop_idle(th)
        due, seq = self.silence[th]
        if due != armed:
            self.silence_armed[th] = armed + self.park_after_ms
            self._timer(armed + self.park_after_ms, "park_after", th)
    monkeypatch.setattr(mimalloc.Simulation, "_on_park_after", late)
    with pytest.raises(AssertionError, match="after call"):
        side_by_side(bursts(7), "epoch", "park", 2.0, sample_ms=1.0)
