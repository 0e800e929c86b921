"""The fork's real tests of hole purging (oven-sh/mimalloc's test/test-purge-holes*.c), read
case by case: `cases` (each case, what it asserts, how much of it this project checks),
`scenarios` (each case as a named scenario in its own shape) and `checks` (its assertions as
checks over a trace, the registry's RT-* invariants). Nothing is imported here: the scenarios
and the checks register themselves when imported, and import each other."""
