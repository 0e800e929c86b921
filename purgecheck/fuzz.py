"""Run the state machines of stateful_tests: one machine, one design of the seed, maybe under a
mutant, with a Hypothesis profile; the outcome with what it covered and how to replay it.

A failure carries the shrunk program as Hypothesis prints it, the `@reproduce_failure` blob,
and one command that replays exactly that program (`purgecheck fuzz --replay BLOB ...`). The
example database lives in the project's state directory, so a failure found once is tried
first the next time; `database="redis://HOST:PORT/N"` shares one among machines and nights
(Hypothesis's RedisExampleDatabase).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from model.variants import EPOCH, VARIANTS
from stateful_tests.failures import STATS, InvariantViolation
from stateful_tests.profiles import PROFILES, profile_settings

# name -> "module:class"; each runs under every design of the seed (Options(variant=...)).
MACHINES = {
    "page": "stateful_tests.page_machine:PageMachine",
    "epoch": "stateful_tests.epoch_machine:EpochMachine",
    "park": "stateful_tests.park_machine:ParkMachine",
}
# Machines of other parts of the project, run when their module exists; designs do not apply.
FOREIGN_MACHINES = {
    "glibc": "stateful_tests.glibc_machine:GlibcMachine",
}
# Who chooses the steps: "program" reads them from one byte string Hypothesis draws
# (stateful_tests.program: one choice per example, the fast one), "rules" is Hypothesis's own
# stateful driver (about ten choices per step). A machine whose rules take other than finite
# choices (the glibc one, with its Bundle) runs on "rules" only.
DRIVERS = ("program", "rules")
MODEL_RAN = "MODEL-RAN"  # the model raised something other than an invariant failure
_BLOB = re.compile(r"@reproduce_failure\('([^']+)', b'([^']+)'\)")
_ID = re.compile(r"^([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+): (.*)", re.S)


class FuzzUsageError(ValueError):
    """A machine, design, mutant, profile or blob that does not exist."""


def machine_names() -> list[str]:
    """Every machine that can run here (foreign ones only when their module is present)."""
    names = list(MACHINES)
    for name, path in FOREIGN_MACHINES.items():
        if importlib.util.find_spec(path.split(":")[0]) is not None:
            names.append(name)
    return names


def takes_variant(name: str) -> bool:
    return name in MACHINES


def load_machine(name: str) -> type:
    path = MACHINES.get(name) or FOREIGN_MACHINES.get(name)
    if path is None or name not in machine_names():
        raise FuzzUsageError(f"unknown machine {name!r}; expected one of "
                             f"{', '.join(machine_names())}")
    module, cls = path.split(":")
    return getattr(importlib.import_module(module), cls)


def state_dir() -> Path:
    """The project's state directory (`.purgecheck/` at the project root, git-ignored, or
    $PURGECHECK_STATE_DIR): the example database is its `hypothesis/`."""
    from purgecheck.reports import store

    return store.state_dir()


REDIS_KEY_PREFIX = b"purgecheck-example:"


REDIS_SCHEMES = ("redis", "rediss", "unix")


def example_database(where: str | None):
    """The example database at `where`: a redis:// (or rediss://, unix://) URL, a directory,
    or None for the project's state directory."""
    if where is None:
        return state_dir() / "hypothesis"
    if where.split("://")[0] in REDIS_SCHEMES:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        try:
            client = redis.Redis.from_url(where, socket_connect_timeout=5)
        except ValueError as e:
            raise FuzzUsageError(f"--db {where!r}: {e}")
        return RedisExampleDatabase(client, key_prefix=REDIS_KEY_PREFIX)
    return Path(where)


def check_database(where: str | None) -> None:
    """FuzzUsageError, in one line, unless the database at `where` takes examples: a Redis
    that answers, or a directory that exists or can be made and takes a file (so that a run
    does not find out at its end that it saved nothing). Any other URL, an empty string and a
    regular file are refused."""
    from purgecheck.inputs import InputError, output_dir

    if where is not None:
        scheme, sep, _ = where.partition("://")
        if not where.strip():
            raise FuzzUsageError("--db '': expected redis://HOST:PORT/DB or a directory, found "
                                 "an empty string")
        if sep and scheme not in REDIS_SCHEMES:
            raise FuzzUsageError(f"--db {where}: a {scheme}:// URL; expected "
                                 f"redis://HOST:PORT/DB (or rediss://, unix://) or a directory")
    db = example_database(where)
    if hasattr(db, "redis"):
        import redis

        try:
            db.redis.ping()
        except redis.RedisError as e:
            raise FuzzUsageError(f"--db {where}: no Redis answered ({e}); expected "
                                 f"redis://HOST:PORT/DB of a running redis-server")
        return
    try:
        output_dir(db, "--db")
    except InputError as e:
        raise FuzzUsageError(str(e))


@dataclass
class Failure:
    invariant: str
    reason: str
    program: str  # the shrunk program, one Hypothesis step per line
    blob: str = ""  # base64 choices of @reproduce_failure ("" when Hypothesis gave none)
    version: str = ""  # Hypothesis version of the blob


@dataclass
class FuzzRun:
    machine: str
    variant: str | None
    mutant: str | None
    profile: str
    seed: int | None
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    failure: Failure | None = None
    found_after: int | None = None  # the example in which the first failure showed
    events: dict[str, int] = field(default_factory=dict)  # model events, by kind
    driver: str = "program"
    max_steps: int = 0  # steps per example at most (the program driver's blob depends on it)
    replayed: bool = False  # a --replay run
    shrunk: bool = True  # the failing program was shrunk (not with --no-shrink)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0

    def command(self, *extra: str) -> str:
        """The `purgecheck fuzz` command line of this configuration."""
        words = ["purgecheck", "fuzz", "--machine", self.machine]
        if self.driver != default_driver(self.machine):
            words += ["--driver", self.driver]
        if self.variant and self.variant != EPOCH:
            words += ["--variant", self.variant]
        if self.mutant:
            words += ["--mutant", self.mutant]
        return " ".join(words + list(extra))

    def replay_command(self) -> str:
        """One command that replays the failure exactly (its shrunk program)."""
        if self.failure is None:
            return ""
        if self.failure.blob:
            steps = ["--steps", str(self.max_steps)] if self.driver == "program" else []
            return self.command(*steps, "--replay", self.failure.blob)
        seed = [] if self.seed is None else ["--seed", str(self.seed)]
        return self.command("--profile", self.profile, *seed)

    def as_dict(self) -> dict:
        d = {"machine": self.machine, "variant": self.variant, "mutant": self.mutant,
             "profile": self.profile, "driver": self.driver, "seed": self.seed,
             "examples": self.examples,
             "steps": self.steps, "seconds": round(self.seconds, 3),
             "examples_per_s": round(self.examples_per_s, 1),
             "steps_per_s": round(self.steps_per_s, 1), "ok": self.ok,
             "found_after": self.found_after, "notes": self.notes, "failure": None}
        if self.failure is not None:
            f = self.failure
            d["failure"] = {"invariant": f.invariant, "reason": f.reason,
                            "program": f.program, "replay": self.replay_command(),
                            "reproduce_failure": reproduce_line(f)}
        return d


def reproduce_line(f: Failure) -> str:
    return f"@reproduce_failure({f.version!r}, b{f.blob!r})" if f.blob else ""


def machine_class(name: str, variant: str | None, mutant: str | None) -> type:
    from stateful_tests.world_machine import configured

    if variant is not None and variant not in VARIANTS:
        raise FuzzUsageError(f"unknown variant {variant!r}; expected one of "
                             f"{', '.join(VARIANTS)}")
    return configured(load_machine(name), variant if takes_variant(name) else None, mutant)


def default_driver(name: str) -> str:
    """The program driver for the machines of the model; Hypothesis's for the others."""
    return "program" if name not in FOREIGN_MACHINES else "rules"


def machine_test(cls: type, driver: str, settings) -> Callable[[], None]:
    """The Hypothesis test that runs machine class `cls` with `driver`."""
    if driver == "rules":
        from hypothesis.stateful import get_state_machine_test

        return get_state_machine_test(cls, settings=settings)
    from stateful_tests.program import Program

    try:
        program = Program(cls)
    except TypeError as e:
        raise FuzzUsageError(f"--driver program: {e}; use --driver rules")
    steps = settings.stateful_step_count
    if steps > program.max_steps():
        raise FuzzUsageError(f"--steps {steps}: the program driver reads at most "
                             f"{program.max_steps()} steps of this machine (one byte string of "
                             f"at most {program.max_size():,} bytes per example); give fewer "
                             f"steps, or --driver rules")
    return settings(program.test(steps))


def run_machine(name: str, variant: str | None = EPOCH, mutant: str | None = None,
                profile: str = "dev", examples: int | None = None, steps: int | None = None,
                seed: int | None = None, replay: str | None = None, shrink: bool = True,
                on_example: Callable[[], None] | None = None,
                driver: str | None = None, database: str | None = None) -> FuzzRun:
    """Run machine `name` once with the profile's budget (or `examples`), or replay a blob.
    Every invariant is checked after every step; the first failure ends the run. `driver`:
    one of DRIVERS (default: `default_driver(name)`); `database`: see `example_database`."""
    # Hypothesis is imported here, not with the module: `purgecheck --help` and every other
    # command build this command's parser, which needs only the names above.
    import hypothesis
    from hypothesis import reproduce_failure
    from hypothesis.errors import DidNotReproduce, InvalidArgument
    from hypothesis.reporting import with_reporter

    from purgecheck.mutants import MUTANTS, applied

    if profile not in PROFILES:
        raise FuzzUsageError(f"unknown profile {profile!r}; expected one of "
                             f"{', '.join(PROFILES)}")
    if mutant is not None and mutant not in MUTANTS:
        raise FuzzUsageError(f"unknown mutant {mutant!r}; expected one of "
                             f"{', '.join(MUTANTS)}")
    driver = driver or default_driver(name)
    if driver not in DRIVERS:
        raise FuzzUsageError(f"unknown driver {driver!r}; expected one of {', '.join(DRIVERS)}")
    cls = machine_class(name, variant, mutant)
    run = FuzzRun(name, variant if takes_variant(name) else None, mutant, profile, seed,
                  shrunk=shrink, driver=driver)
    settings = profile_settings(profile, example_database(database), max_examples=examples,
                                step_count=steps, shrink=shrink)
    test = machine_test(cls, driver, settings)
    run.max_steps = settings.stateful_step_count
    if replay is not None:
        reproduce_failure(hypothesis.__version__, replay_blob(replay))(test)
        run.replayed = True
    elif seed is not None:
        # What @seed does, but keeping the example database: a seeded run still tries the
        # failures found before first, and saves the ones it finds.
        test._hypothesis_internal_use_seed = seed
    STATS.reset(on_example)
    reported: list[str] = []  # what Hypothesis prints (a replayed program goes there)
    t0 = time.perf_counter()
    try:
        with applied(MUTANTS[mutant] if mutant else None), with_reporter(reported.append), \
                independent_of_imports():
            test()
        if replay is not None:  # Hypothesis raises DidNotReproduce itself; be sure anyway
            run.notes.append("the replayed program did not fail")
    except DidNotReproduce as e:
        run.notes.append(f"the replayed program did not fail: {e}")
    except InvalidArgument as e:
        if replay is not None:
            raise FuzzUsageError(f"--replay: {e}")
        raise
    except Exception as e:  # an invariant failed, or the model raised
        run.failure = _failure_of(e, cls, reported)
    run.seconds = time.perf_counter() - t0
    run.examples, run.steps = STATS.examples, STATS.steps
    run.found_after = STATS.first_failure_at if run.failure else None
    run.events = dict(STATS.events)
    return run


@contextlib.contextmanager
def independent_of_imports() -> Iterator[None]:
    """Hypothesis draws, now and then, an integer constant found in the source of the
    project's loaded modules, so the examples of a seed change with what else was imported
    (another test, a new module). The machines' arguments are small indices that gain nothing
    from those constants: without them a seed means the same examples wherever it runs."""
    from hypothesis.internal.conjecture import providers

    get = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if get is None or cache is None:  # another Hypothesis version: nothing to pin
        yield
        return
    cache.cache.clear()
    providers._get_local_constants = lambda: providers.Constants()
    try:
        yield
    finally:
        providers._get_local_constants = get
        cache.cache.clear()


def replay_blob(text: str) -> bytes:
    """A blob as printed in @reproduce_failure, or that whole decorator line; FuzzUsageError
    when it is neither."""
    m = _BLOB.search(text)
    blob = m.group(2) if m else text.strip()
    try:
        from hypothesis.core import decode_failure
        decode_failure(blob.encode())
    except Exception:
        raise FuzzUsageError(f"--replay: {blob[:40]!r} is not a blob printed by a failure "
                             f"(expected base64 from @reproduce_failure)")
    return blob.encode()


def _failure_of(e: BaseException, cls: type, reported: list[str]) -> Failure:
    """The failure's invariant and reason, and its program and blob from Hypothesis's notes
    on the exception (or, for a replay, from what it printed)."""
    notes = "\n".join(getattr(e, "__notes__", []))
    checks = {inv.function.__name__ for inv in cls.setup_state().invariants}
    program = _program_of(notes, checks)
    if not program:
        notes = "\n".join(reported)
        program = _program_of(notes, checks)
    if isinstance(e, InvariantViolation):
        invariant, reason = e.invariant, e.reason
    else:
        m = _ID.match(str(e))
        if isinstance(e, AssertionError) and m:
            invariant, reason = m.group(1), m.group(2)
        else:
            invariant, reason = MODEL_RAN, f"{type(e).__name__}: {e}"
    blob = _BLOB.search(notes)
    return Failure(invariant, reason, program, blob.group(2) if blob else "",
                   blob.group(1) if blob else "")


def _program_of(notes: str, checks: set[str]) -> str:
    """The steps of the failing program from Hypothesis's report, without the calls of the
    machine's invariant methods (`checks`) that it prints after each step."""
    skip = {f"state.{name}()" for name in checks}
    return "\n".join(s for s in (line.strip() for line in notes.splitlines())
                     if s.startswith("state") and s not in skip)
