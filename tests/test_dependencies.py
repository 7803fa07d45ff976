"""Every third-party library the code imports is declared in ``pyproject.toml``.

``requests`` and ``starlette`` were imported by ``controller`` but not declared (issue 22): they arrived
with other packages (``requests`` only with the dev extra), so a plain ``pip install crucible`` could
lose them whenever those packages changed their own requirements. This test reads every import of the
package (function-level and ``TYPE_CHECKING`` ones included), maps each top-level module to the
distribution that installs it, and checks it against ``[project] dependencies`` (plus the optional
``kubernetes`` extra, which ``controller.brokers.kubernetes`` documents). The tests and benchmarks may
also use the ``dev`` extra.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

from tests.test_self_contained import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# A module name that no installed distribution provides: first-party code of the tests themselves.
FIRST_PARTY = {"controller", "tests", "bench"}


def normalised(requirement: str) -> str:
    """The distribution name of a requirement, normalised as PEP 503 does (``PyYAML>=6`` -> ``pyyaml``)."""
    name = re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(*extras: str) -> set[str]:
    project = PYPROJECT["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    return {normalised(r) for r in requirements}


@cache
def providers() -> dict[str, frozenset[str]]:
    """Top-level module -> the distributions installing it, normalised."""
    return {
        module: frozenset(normalised(d) for d in names)
        for module, names in importlib.metadata.packages_distributions().items()
    }


def local(path: Path, module: str) -> bool:
    """Whether ``module`` is a sibling of ``path`` (a benchmark's helper, the demo project's own code)."""
    return (path.parent / f"{module}.py").exists() or (path.parent / module / "__init__.py").exists()


def imported_modules(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Top-level third-party modules imported under ``folder``, each with one file that imports it."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        if str(path.relative_to(ROOT)).startswith(skip):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY and not local(path, top):
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def undeclared(folder: Path, allowed: set[str], skip: tuple[str, ...] = ()) -> list[str]:
    problems = []
    for module, where in sorted(imported_modules(folder, skip).items()):
        distributions = providers().get(module, frozenset())
        if not distributions:
            problems.append(f"{module} (imported by {where}) is installed by no distribution")
        elif not distributions & allowed:
            problems.append(f"{module} (imported by {where}) is from {sorted(distributions)}, undeclared")
    return problems


def test_the_package_imports_only_what_it_declares() -> None:
    # The demo project is the user's code crucible optimises in ``crucible demo``, not crucible's.
    problems = undeclared(ROOT / "controller", declared("kubernetes"), skip=("controller/examples/",))
    assert not problems, "\n".join(problems)


def test_the_tests_and_benchmarks_import_only_what_the_dev_extra_adds() -> None:
    allowed = declared("kubernetes", "dev")
    problems = undeclared(ROOT / "tests", allowed) + undeclared(ROOT / "bench", allowed)
    assert not problems, "\n".join(problems)


def test_the_check_finds_what_it_is_for() -> None:
    assert normalised("PyYAML>=6") == "pyyaml"
    assert normalised("psycopg[binary]>=3.1") == "psycopg"
    assert normalised("githubkit-schemas-2022-11-28") == "githubkit-schemas-2022-11-28"
    assert providers()["yaml"] == {"pyyaml"}
    assert "requests" in declared()
    assert "scipy" not in declared() and "scipy" in declared("dev")
    # a folder importing a library no requirement names is reported, naming the file
    problems = undeclared(ROOT / "tests" / "stats", declared())
    assert any(p.startswith("scipy (imported by tests/stats/") for p in problems), problems
