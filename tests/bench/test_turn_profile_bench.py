"""``bench/turn_profile.py`` wraps what it is told to, functions and methods alike, wherever they are
called from, and says what it cannot find (the figures are its business)."""

from __future__ import annotations

import sys
from pathlib import Path

from controller.services.execution import execute, pgroups
from controller.workspace import envscrub
from tests.bench.loading import load_bench


def test_functions_and_methods_are_wrapped_where_they_are_called_and_a_missing_one_is_named(
    tmp_path: Path,
) -> None:
    bench = load_bench("turn_profile")
    tally = bench.Tally()
    redact, record = envscrub.redact, pgroups.GroupRegistry.record
    holders = [
        (module, name)
        for module in list(sys.modules.values())
        for name, value in list(getattr(module, "__dict__", {}).items())
        if value is redact
    ]
    try:
        assert bench.install(tally, "controller.workspace.envscrub:redact")
        assert bench.install(tally, "controller.services.execution.pgroups:GroupRegistry.record")
        assert not bench.install(tally, "controller.workspace.envscrub:no_such_function")
        assert not bench.install(tally, "controller.no_such_module:f")
        envscrub.redact("a token", ["token"])
        execute.redact("imported by name elsewhere", [])  # the executor's own reference is wrapped too
        pgroups.GroupRegistry(tmp_path / "pgroups").record(123, "sleep 1")
        assert tally.calls == {
            "controller.workspace.envscrub:redact": 2,
            "controller.services.execution.pgroups:GroupRegistry.record": 1,
        }
        assert all(seconds >= 0 for seconds in tally.cpu.values())
    finally:
        for module, name in holders:
            setattr(module, name, redact)
        pgroups.GroupRegistry.record = record  # type: ignore[method-assign]
