"""The mutants, one module per part of the system they break; each registers its own with
`purgecheck.mutants.patching.mutant` and imports nothing else of the tool's."""
