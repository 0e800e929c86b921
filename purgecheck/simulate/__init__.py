"""What a purge rule costs: workloads run on the models, figures per design and version.

`workloads` generates the seed 000 workloads (Bun.serve, typed arrays, the inline buffer
loop) as calls in virtual time; `mimalloc` runs them on the mimalloc model under each design
and reads discards, refaults and residency off the model's memory; `glibc` does the same for
seed 001 on the glibc model of each version; `claims` sets the seeds' figures beside the
model's; `report` and `plot` show them. `purgecheck simulate` is the command.
"""


def glibc_simulator():
    """purgecheck.simulate.glibc, the seed 001 side, or None while it is not there yet."""
    import importlib
    try:
        return importlib.import_module("purgecheck.simulate.glibc")
    except ModuleNotFoundError as e:
        if e.name != "purgecheck.simulate.glibc":
            raise
        return None


def glibc_workloads() -> dict[str, str]:
    g = glibc_simulator()
    return g.workload_descriptions() if g else {}


def glibc_versions() -> list[str]:
    g = glibc_simulator()
    return g.version_names() if g else []
