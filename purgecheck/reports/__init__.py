"""What the tool shows of its runs: `results` (the summary table and the JSON of CI, for the
Result type of proofs/results.py), `timeline` (what the sweeps did to memory after each op
of a scenario) and `store` (the last results, kept under `.purgecheck/` for the docs).
"""
