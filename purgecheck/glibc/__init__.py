"""glibc conformance (seed 001): op scripts, the model runner, strace of the real library.

`script` parses the op format of docs/glibc.md, `workloads` names the standard ones,
`modelrun` runs a script on the model of any version, `trace` runs it with the installed
glibc under `strace -f` and classifies the calls, `compare` sets the two side by side, and
`engine` is what `purgecheck check` runs.
"""
