"""glibc conformance (seed 001): workloads, the model runner, strace of the real library.

The op format of docs/glibc.md is parsed by purgecheck/formats/glibc_ops.py; here
`workloads` names the standard scripts, `modelrun` runs a script on the model of any version,
`trace` runs it with the installed glibc under `strace -f` and classifies the calls, and
`compare` sets the two side by side. The engine `purgecheck check` runs is
purgecheck/engines/glibc.py; the glibc mutants are in purgecheck/mutants/catalogue/.
"""
