"""One module per subcommand of `purgecheck` (see purgecheck.cli.COMMANDS)."""
