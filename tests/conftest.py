"""The suite never writes into the project's own state folder (`.purgecheck/`).

Commands keep their last results there (`check`'s results.json, the kill matrix's
mutants.json, fuzzing's failures and example database, `docs`' result pages), and
`purgecheck docs` publishes them. A test that ran `mutants` once saved its one-cell matrix over
an hour's kill matrix there, and `make test` left a results.json of its own checks. So every
test session gets a state folder of its own (`$PURGECHECK_STATE_DIR`, inherited by the
commands the tests start); a test that sets its own still wins. The real Bun stays where
`make setup` put it (purgecheck/measure/bun.py does not read the state folder).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def own_state_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PURGECHECK_STATE_DIR", str(tmp_path_factory.mktemp("purgecheck-state")))
        yield
