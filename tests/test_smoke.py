"""The command line answers: the registry lists the page invariants and `check` holds."""

from purgecheck.cli import main


def test_check_scenarios_hold(capsys):
    assert main(["check", "--engine", "scenarios", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"PG-PURGED-OFF-LISTS"' in out
