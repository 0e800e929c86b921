"""Hypothesis rule-based state machines over the model (seed 000), and over model + C.

Each machine drives a `model.world.World` with the operations a program and its allocator
perform, and checks every invariant of the registry after every step. `purgecheck fuzz`
runs them (see docs/fuzzing.md); `purgecheck.fuzz` is the runner.
"""
