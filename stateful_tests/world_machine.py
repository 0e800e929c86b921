"""What every machine over the model shares: a World under test, the invariant registry checked
after every step, the request sizes of each page kind, and counters for the runner.

A machine class names the design of seed 000 it runs (`VARIANT`, one of model.variants.VARIANTS);
`configured()` makes the subclass the runner runs, so that each configuration has its own entry
in the example database.
"""

from __future__ import annotations

import dataclasses

from hypothesis.stateful import RuleBasedStateMachine, invariant

from model.geometry import Arch, large_size_classes
from model.invariants import check_world, load_registry
from model.world import Options, World
from stateful_tests.failures import STATS, InvariantViolation
from stateful_tests.program import choice
from stateful_tests.shadow import ShadowMemory


# Rules pick among what the machine keeps (threads, blocks, sizes) by an index taken modulo the
# length: any index is valid whatever the state, and shrinking moves it to the first one.
INDEX = choice(range(64))


def nth(items, k: int):
    return items[k % len(items)]


def request_sizes(arch: Arch) -> tuple[int, ...]:
    """Requests that land in each page kind on `arch`: small and medium sizes that are and are
    not multiples of the OS page, every large class, and one huge request."""
    large = large_size_classes(arch)
    return (1000, 3000, arch.small_max_obj_size + 1000, arch.medium_max_obj_size // 2,
            *large, large[-1] + large[-1] // 4)


class WorldMachine(RuleBasedStateMachine):
    """A World, and after every step every invariant of the registry with a predicate over a
    page, the world or the epoch (model.invariants.check_world)."""

    VARIANT = "epoch"
    CHECK_REGISTRY = True  # False: only the machine's own checks (to show what they catch)

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None

    def make_world(self, options: Options) -> World:
        """A world of `options` under this machine's design, whose memory reports to a shadow."""
        world = World(dataclasses.replace(options, variant=self.VARIANT))
        world.mem = ShadowMemory(world.mem.os_page_size)
        self.world = world
        return world

    def teardown(self) -> None:
        if self.world is not None:
            STATS.events.update(e["ev"] for e in self.world.log)

    @invariant()
    def registry_holds(self) -> None:
        if self.world is None or not self.CHECK_REGISTRY:
            return
        failures = check_world(self.world)
        if failures:
            raise InvariantViolation(*failures[0])


class Counted:
    """Counts examples and steps in STATS for the runner (mixed into any machine class)."""

    def __init__(self) -> None:
        super().__init__()
        STATS.examples += 1
        if STATS.on_example is not None:
            STATS.on_example()

    @invariant()
    def count_step(self) -> None:
        STATS.steps += 1


def configured(base: type, variant: str | None = None, mutant: str | None = None) -> type:
    """The subclass of machine `base` that counts its steps and runs design `variant` (None:
    a machine without designs, such as the glibc one) under `mutant`, which the runner
    applies. Its name keys the example database, so each configuration keeps its own."""
    key = (base, variant, mutant)
    if key not in _CONFIGURED:
        name = "_".join(x for x in (base.__name__, variant, mutant) if x).replace("-", "_")
        attrs = {"VARIANT": variant} if variant else {}
        _CONFIGURED[key] = type(name, (Counted, base), attrs)
    return _CONFIGURED[key]


_CONFIGURED: dict[tuple, type] = {}
load_registry()
