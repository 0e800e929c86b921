"""Seeded op scripts of two threads (malloc, frees by the owner or the other thread, walks,
collects, abandon and reclaim, heap destroy) for the tests that check a fast structure of the
model against its plain definition after every op (test_page_for_index, test_live_pages)."""

from __future__ import annotations

import random


def two_thread_script(seed: int, ops: int, sizes: tuple[int, ...],
                      steps: tuple[tuple[float, str], ...]) -> str:
    """`ops` ops: each draws r in [0, 1) and takes the first step whose bound r is under
    (`malloc` of one of `sizes` by either thread, also when nothing is live; `free` of a live
    block by its owner, or 40 % of the time by the other thread; `walk`; `clock-walk`, a
    clock advance then a walk; `collect`; `abandon`, thread 2's heap abandoned and thread 1
    reclaiming a page of it; `destroy`, thread 2's heap destroyed with its blocks live)."""
    rng = random.Random(seed)
    lines, live, n = [], [], 0
    for _ in range(ops):
        r = rng.random()
        step = next(kind for bound, kind in steps if r < bound)
        if step == "malloc" or not live:
            owner = rng.choice((1, 2))
            lines.append(f"{owner} malloc b{n} {rng.choice(sizes)}")
            live.append((f"b{n}", owner))
            n += 1
        elif step == "free":
            name, owner = live.pop(rng.randrange(len(live)))
            lines.append(f"{owner if rng.random() < 0.6 else 3 - owner} free {name}")
        elif step == "walk":
            lines.append(f"{rng.choice((1, 2))} walk")
        elif step == "clock-walk":
            lines += [f"clock {rng.randrange(50, 400)}", f"{rng.choice((1, 2))} walk"]
        elif step == "collect":
            lines.append(f"{rng.choice((1, 2))} collect")
        elif step == "abandon":
            held = [name for name, owner in live if owner == 2]
            if held:
                lines += ["2 abandon", f"1 reclaim {rng.choice(held)}"]
                live = [(name, 1 if owner == 2 else owner) for name, owner in live]
        else:  # destroy
            lines.append("2 heap_destroy")
            live = [(name, owner) for name, owner in live if owner != 2]
    return "\n".join(lines)
