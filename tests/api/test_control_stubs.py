"""The stand-ins for ``RunControl`` under ``tests/`` and ``bench/`` keep its signatures.

mypy --strict runs over ``controller/`` only, so stubs there kept an old ``steer(run_id, text)``
long after the port gained ``component``. Every class in those folders that defines the port's four
methods is compared with the port, from the source (no import: benchmarks do work on import):
parameter names and defaults, and the return annotation's last name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PORT = ("controller/api/runs.py", "RunControl")
METHODS = {"cancel", "resume", "steer", "wake"}


def _classes(path: Path) -> dict[str, ast.ClassDef]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def _shape(cls: ast.ClassDef) -> dict[str, tuple[object, ...]]:
    shapes: dict[str, tuple[object, ...]] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name in METHODS:
            args = node.args
            names = tuple(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
            defaults = tuple(ast.unparse(d) for d in args.defaults)
            returns = ast.unparse(node.returns).rsplit(".", 1)[-1] if node.returns else ""
            shapes[node.name] = (names, defaults, returns)
    return shapes


def _stubs() -> list[tuple[str, str]]:
    found = []
    for path in sorted([*ROOT.glob("bench/*.py"), *ROOT.glob("tests/**/*.py")]):
        if "def steer(" not in path.read_text():
            continue
        for name, cls in _classes(path).items():
            if set(_shape(cls)) >= METHODS:
                found.append((str(path.relative_to(ROOT)), name))
    return found


STUBS = _stubs()


def test_the_known_stand_ins_are_found() -> None:
    assert {
        ("bench/api_load.py", "_NoScheduler"),
        ("tests/ledger/conftest.py", "_NoControl"),
        ("tests/api/conftest.py", "Recorder"),
    } <= set(STUBS)


@pytest.mark.parametrize(("path", "name"), STUBS)
def test_each_stand_in_has_the_ports_signatures(path: str, name: str) -> None:
    port = _shape(_classes(ROOT / PORT[0])[PORT[1]])
    assert set(port) == METHODS
    assert _shape(_classes(ROOT / path)[name]) == port
