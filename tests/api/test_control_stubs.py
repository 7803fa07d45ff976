"""The stand-ins for ``RunControl`` in tests and benchmarks keep its signatures.

mypy --strict runs over ``controller/`` only, so a stub under ``tests/`` or ``bench/`` kept an old
``steer(run_id, text)`` for weeks after the port gained ``component``; this compares them by
inspection (parameter names, kinds and defaults; the return annotation's name).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path

import pytest

from controller.api.runs import RunControl

ROOT = Path(__file__).resolve().parents[2]
STUBS = [
    ("bench/api_load.py", "_NoScheduler"),
    ("bench/dashboard.py", "_Control"),
    ("tests/worker/conftest.py", "_Control"),
    ("tests/ledger/conftest.py", "_NoControl"),
    ("tests/api/conftest.py", "Recorder"),
]


def _load(relative: str) -> object:
    name = "_stub_" + relative.removesuffix(".py").replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _shape(function: object) -> tuple[object, ...]:
    signature = inspect.signature(function)  # type: ignore[arg-type]
    params = tuple((p.name, p.kind, p.default) for p in signature.parameters.values())
    return params, str(signature.return_annotation).rsplit(".", 1)[-1]


@pytest.mark.parametrize(("path", "name"), STUBS)
def test_each_stub_has_the_ports_signatures(path: str, name: str) -> None:
    stub = getattr(_load(path), name)
    methods = [m for m in vars(RunControl) if not m.startswith("_")]
    assert methods == ["cancel", "resume", "steer", "wake"]
    for method in methods:
        assert _shape(getattr(stub, method)) == _shape(getattr(RunControl, method)), (path, method)
