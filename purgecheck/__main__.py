from purgecheck.cli import entry

entry()
