"""What a purge rule costs: workloads run on the models, figures per design and version.

`workloads` generates the seed 000 workloads (Bun.serve, typed arrays, the inline buffer
loop) as calls in virtual time; `mimalloc` runs them on the mimalloc model under each design
and reads discards, refaults and residency off the model's memory; `glibc` does the same for
seed 001 on the glibc model of each version; `claims` sets the seeds' figures beside the
model's; `report` and `plot` show them. `purgecheck simulate` is the command.
"""



def glibc_simulator():
    """purgecheck.simulate.glibc, the seed 001 side (imported when first needed)."""
    from purgecheck.simulate import glibc
    return glibc


def glibc_workloads() -> dict[str, str]:
    return glibc_simulator().workload_descriptions()


def glibc_versions() -> list[str]:
    return glibc_simulator().version_names()
