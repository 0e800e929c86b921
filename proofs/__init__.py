"""Proofs of the purge rules: Z3 proofs for all sizes and times, an exhaustive interleaving
checker for the finite protocol configurations, and CrossHair contracts on pure functions.

`proofs.catalogue.run_all()` runs every proof and every broken twin; `purgecheck prove` and the
`prove` engine of `purgecheck check` are its front ends. See docs/proofs.md.
"""
