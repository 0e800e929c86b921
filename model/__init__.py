"""purgecheck's executable specification of the purge rules (seed 000 and seed 001).

Plain Python, standard library only, no I/O: every rule of the seeds is one function here,
and every checker of the project reads this package.
"""
