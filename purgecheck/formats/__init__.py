"""The formats the tool reads and writes, each with its parser, writer and checks.

`ops` is the op script of the page model and the C driver (docs/op-script.md), `glibc_ops`
the glibc op script (docs/glibc.md), `trace` the trace both the model and the C reference
write and its streaming reader (docs/trace-format.md), and `tracegen` makes large linearized
traces in that format for the benchmarks and the tests of `validate`.
"""
