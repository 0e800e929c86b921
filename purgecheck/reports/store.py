"""The last results, kept between runs under `.purgecheck/` (git-ignored) for the docs.

`purgecheck check` saves its results here and `purgecheck mutants` its kill matrix; `purgecheck
docs` reads both to write the results pages. A run of some engines replaces only what those
engines said before, so `check --engine scenarios` does not erase the proofs' last results.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import asdict
from pathlib import Path

import orjson

RESULTS = "results.json"
MUTANTS = "mutants.json"


class StoreError(Exception):
    """A state file that cannot be read: the message names it and what was expected."""


def project_root() -> Path:
    """The directory that holds `model/` (the repository, in an editable install)."""
    import model

    return Path(model.__file__).resolve().parent.parent


def state_dir() -> Path:
    """`$PURGECHECK_STATE_DIR`, else `.purgecheck/` at the project root."""
    env = os.environ.get("PURGECHECK_STATE_DIR")
    return Path(env) if env else project_root() / ".purgecheck"


def now_stamp() -> str:
    """The date a result was obtained, to the minute, in UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def load(name: str) -> dict | None:
    """The saved document `name`, or None when no run saved one yet."""
    path = state_dir() / name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise StoreError(f"{path}: not valid JSON ({e}); delete it and run again")
    if not isinstance(doc, dict):
        raise StoreError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc


def save(name: str, doc: dict) -> Path:
    path = state_dir() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    tmp.replace(path)  # a reader never sees half a file
    return path


def save_results(results: list, quick: bool) -> Path:
    """Merge `results` (purgecheck.reports.results.Result) into results.json, dated now: the results
    of every engine that ran replace that engine's earlier ones."""
    date = now_stamp()
    ran = {r.engine for r in results}
    old = (load(RESULTS) or {}).get("results", [])
    kept = [r for r in old if r.get("engine") not in ran]
    new = [{**asdict(r), "date": date, "quick": quick} for r in results]
    return save(RESULTS, {"saved": date, "results": kept + new})


def load_results() -> list[dict]:
    """The last result of every engine that ever ran (each with its date), or []."""
    return (load(RESULTS) or {}).get("results", [])
