"""Recording real programs' allocation calls (docs/record.md): `run.py` runs a command with
reference_c/build/librecord.so preloaded and collects the trace files it wrote."""
