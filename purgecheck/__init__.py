"""purgecheck: the tool around the model: CLI, engines, traces, conformance, reports."""

__version__ = "0.1.0"
