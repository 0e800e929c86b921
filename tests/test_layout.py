"""The layout is the architecture (DESIGN.md, issue 15): the parts are found by their place, and
imports go one way, from the tool down to the model.

The engines of `check`, the parts of the mutant catalogue and the subcommands are each the
modules of one package, found by listing it: a module added there is run, loaded or offered
without editing a list elsewhere. Each layer imports only the layers below it; the rules are
read off the source (every import statement, the ones inside functions included).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import purgecheck.commands as commands
import purgecheck.engines as engines
import purgecheck.mutants as mutants
from purgecheck.mutants import catalogue

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("model", "proofs", "stateful_tests", "purgecheck")


def modules_in(package) -> set[str]:
    return {m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")}


# -- found by listing ------------------------------------------------------------------------

def test_every_engine_module_is_loaded_in_run_order():
    names = [m.rsplit(".", 1)[1] for m in engines.engine_modules()]
    assert set(names) == modules_in(engines)
    assert names[:len(engines.RUN_ORDER)] == list(engines.RUN_ORDER)
    loaded = engines.load_engines()
    assert list(loaded)[:len(engines.RUN_ORDER)] == list(engines.RUN_ORDER)


def test_an_engine_module_added_to_the_package_is_found_and_run_last(tmp_path, monkeypatch):
    (tmp_path / "zz_probe.py").write_text(
        "from purgecheck.engines import engine\n"
        "@engine('zz-probe', 'a probe of discovery')\n"
        "def run(budget):\n"
        "    return []\n")
    monkeypatch.setattr(engines, "__path__", [*engines.__path__, str(tmp_path)])
    monkeypatch.delitem(engines.ENGINES, "zz-probe", raising=False)
    try:
        assert engines.engine_modules()[-1] == "purgecheck.engines.zz_probe"
        assert "zz-probe" in engines.load_engines()
    finally:
        engines.ENGINES.pop("zz-probe", None)
        sys.modules.pop("purgecheck.engines.zz_probe", None)


def test_every_catalogue_module_is_loaded_and_registers_mutants():
    names = [m.rsplit(".", 1)[1] for m in mutants.catalogue_modules()]
    assert set(names) == modules_in(catalogue)
    assert [n for n in names if n in mutants.PART_ORDER] == list(mutants.PART_ORDER)
    for name in names:
        assert f"{catalogue.__name__}.{name}" in sys.modules
        tree = ast.parse((Path(catalogue.__path__[0]) / f"{name}.py").read_text())
        calls = [n for n in tree.body if isinstance(n, ast.Expr | ast.Assign)
                 and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "mutant"]
        assert calls, f"catalogue/{name}.py registers no mutant"
    assert len(mutants.MUTANTS) >= 42


def test_every_command_module_is_a_subcommand():
    from purgecheck.cli import COMMANDS, build_parser

    assert set(COMMANDS) == modules_in(commands)
    assert COMMANDS[:len(commands.HELP_ORDER)] == list(commands.HELP_ORDER)
    assert all(importlib.import_module(f"purgecheck.commands.{c}").run for c in COMMANDS)
    help_text = build_parser().format_help()
    positions = [help_text.index(f"    {c}") for c in COMMANDS]
    assert positions == sorted(positions)


# -- one direction of import -------------------------------------------------------------------

def imports_of(path: Path) -> set[str]:
    """Every project module `path` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in PROJECT}


def allowed(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# (the files, the project modules they may import). A name imported from a module counts as
# that module's (`from purgecheck.mutants.patching import mutant` is purgecheck.mutants.patching).
LAYERS = [
    ("model", ("model",)),
    ("proofs", ("model", "proofs")),
    ("stateful_tests", ("model", "stateful_tests", "purgecheck.conformance")),
    ("purgecheck/mutants/patching.py", ()),
    ("purgecheck/mutants/catalogue", ("model", "proofs", "purgecheck.mutants.patching")),
    ("purgecheck/formats", ("model", "purgecheck.formats", "purgecheck.runner")),
]


@pytest.mark.parametrize("where,may_import", LAYERS, ids=[w for w, _ in LAYERS])
def test_each_layer_imports_only_the_layers_below(where, may_import):
    place = ROOT / where
    files = [place] if place.suffix == ".py" else sorted(place.rglob("*.py"))
    assert files
    wrong = []
    for f in files:
        own = ".".join(f.relative_to(ROOT).with_suffix("").parts)
        for m in imports_of(f):
            # `from model import alloc` names model.alloc; both are the model's
            if not allowed(m, may_import) and not m.startswith(own) and \
                    not allowed(m.rsplit(".", 1)[0], may_import):
                wrong.append(f"{f.relative_to(ROOT)} imports {m}")
    assert not wrong, "\n".join(wrong)


def test_the_layering_check_sees_a_wrong_arrow(tmp_path):
    """The check above can fail: an import of the tool from a proof is reported."""
    f = tmp_path / "proof.py"
    f.write_text("def f():\n    from purgecheck.reports.results import Result\n")
    assert "purgecheck.reports.results" in imports_of(f)
    assert not allowed("purgecheck.reports.results", ("model", "proofs"))


def test_a_glibc_twin_that_names_a_mutant_needs_the_tool_to_apply_it():
    """proofs/ does not import the tool: a twin run under a mutant asks for the applier."""
    from proofs.glibc_throttle import run_mutant_proofs

    with pytest.raises(ValueError, match="apply_mutant"):
        run_mutant_proofs(quick=True, only="rfc-ratio-le")


# -- the parts in folders ------------------------------------------------------------------------

# The top level of purgecheck/ is the core that several parts share (the op-script runner, the
# named scenarios, conformance, the fuzz runner, the CLI, input checks); a part made of several
# modules has a folder of its own (issue 30). A module added at the top level is a decision:
# put it in a folder, or name it here.
CORE = {"__init__", "__main__", "arith", "cbuild", "cli", "conformance", "discovery", "fuzz",
        "inputs", "reach", "runner", "scenarios"}
PARTS = {"realtests": {"cases", "scenarios", "checks"},
         "cluster": {"client", "campaign", "explorer"}}


def test_the_top_level_holds_only_the_core():
    top = {p.stem for p in (ROOT / "purgecheck").glob("*.py")}
    assert top == CORE, f"new at the top level: {sorted(top - CORE)}; gone: {sorted(CORE - top)}"


@pytest.mark.parametrize("part", sorted(PARTS))
def test_a_part_of_several_modules_is_a_folder_of_its_own(part):
    import purgecheck
    assert modules_in(importlib.import_module(f"purgecheck.{part}")) == PARTS[part]
    # nothing imported by the folder itself: its modules are loaded by who needs them (Dask only
    # by the commands that spread their runs; the real tests' modules register themselves)
    init = ROOT / "purgecheck" / part / "__init__.py"
    assert not imports_of(init)
    assert part not in {p.stem for p in Path(purgecheck.__file__).parent.glob("*.py")}


def test_the_real_tests_scenarios_are_registered_with_the_named_ones():
    """purgecheck/scenarios.py loads the real tests' scenarios from their folder: a case's
    scenario is found by name as before the move."""
    from purgecheck.realtests.cases import CASES
    from purgecheck.scenarios import SCENARIOS
    named = {c.scenario for c in CASES if c.scenario}
    assert named and named <= set(SCENARIOS)


def test_the_suite_keeps_its_state_out_of_the_project():
    """tests/conftest.py: a command run by a test saves under a folder of the session's, not
    under the project's .purgecheck/ (which `purgecheck docs` publishes)."""
    from purgecheck.reports import store
    assert store.state_dir() != store.project_root() / ".purgecheck"
    assert store.state_dir().is_dir()


def test_the_costliest_modules_run_first_and_each_is_a_module_of_the_suite():
    """tests/conftest.py's COSTLIEST_FIRST: `make test` starts those modules before the others
    (xdist takes them in the collection's order), so none is left alone at the end. A name of a
    module renamed or removed would order nothing, silently: each must be a file of tests/.
    Fails on a stale name in the list, or on a hook that leaves the collection's order."""
    from types import SimpleNamespace

    from conftest import COSTLIEST_FIRST, pytest_collection_modifyitems

    here = Path(__file__).parent
    assert [n for n in COSTLIEST_FIRST if not (here / n).is_file()] == []
    first, second = COSTLIEST_FIRST[:2]
    names = ["test_a.py", second, "test_b.py", first, second, "test_a.py"]
    items = [SimpleNamespace(path=here / n, n=k) for k, n in enumerate(names)]
    pytest_collection_modifyitems(None, items)
    # the listed ones first, in the list's order; each module's tests and the rest in theirs
    assert [(i.path.name, i.n) for i in items] == [
        (first, 3), (second, 1), (second, 4), ("test_a.py", 0), ("test_b.py", 2), ("test_a.py", 5)]
