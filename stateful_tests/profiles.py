"""Hypothesis settings profiles for the machines: `ci`, `dev` and `nightly`.

`ci` is small and derandomized (what `make test` runs); `dev` and `nightly` search at random
and keep what they find in the example database under the project's state directory, so a
failure found once is replayed first the next time.
"""

from __future__ import annotations

from pathlib import Path

# name -> (max_examples, stateful_step_count, derandomize)
PROFILES: dict[str, tuple[int, int, bool]] = {
    "ci": (40, 30, True),
    "dev": (300, 50, False),
    "nightly": (20_000, 100, False),
}


def profile_settings(name: str, database_dir: Path | object | None = None, *,
                     max_examples: int | None = None, step_count: int | None = None,
                     shrink: bool = True) -> settings:
    """The settings of profile `name`, with the example database in `database_dir` (or that
    database itself, e.g. a shared Redis one; none for `ci`: a derandomized run replays nothing) and the example/step counts overridden.
    `shrink=False` reports the first failing program as found (faster, and longer)."""
    # Hypothesis is imported here: the names above serve `purgecheck fuzz --help` without it.
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; expected one of {', '.join(PROFILES)}")
    examples, steps, derandomize = PROFILES[name]
    database = None
    if not derandomize and isinstance(database_dir, ExampleDatabase):
        database = database_dir
    elif not derandomize and database_dir is not None:
        database = DirectoryBasedExampleDatabase(str(database_dir))
    return settings(
        max_examples=max_examples or examples,
        stateful_step_count=step_count or steps,
        derandomize=derandomize,
        database=database,
        deadline=None,  # model steps vary in cost; time is not what the machines judge
        print_blob=True,  # the failure report carries the @reproduce_failure blob
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        # No explain phase: it reruns the failure many times to print which lines it reached.
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target]
        + ([Phase.shrink] if shrink else []),
    )

