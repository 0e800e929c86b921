"""The benchmarks: figures of speed and size, printed and never asserted (DESIGN.md).

One module per part measured (the conformance machinery, the explorer, the fuzz machines,
the trace reader and `validate` at scale); `python -m purgecheck.bench` (`make bench`) runs
them all and prints one table with the machine's load.
"""
