"""Builders of the records tests store: defaults for every field, keyword arguments to change one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.store import ComponentRecord, NewRun

SHA_A, SHA_B = "a" * 40, "b" * 40


def new_run(run_id: str = "r1", **changes: Any) -> NewRun:
    """A run as ``Store.create_run`` takes it: minimise ``p50_ms`` over ten turns, with nested options
    (they must come back as stored)."""
    run = NewRun(
        id=run_id,
        spec_text='objective = "x"\n',
        spec_fingerprint="fp-1",
        spec_path="/tmp/crucible.toml",
        objective="Cut latency",
        metric_name="p50_ms",
        direction="minimize",
        turns_planned=10,
        options={"publish_prs": False, "nested": {"a": [1, 2]}},
    )
    return replace(run, **changes)


def component(name: str = "router", run_id: str = "r1", **changes: Any) -> ComponentRecord:
    """One component of ``run_id`` at ``SHA_A`` (base, head and the user's head), with an upstream."""
    record = ComponentRecord(
        run_id=run_id,
        name=name,
        repo="/src/router",
        base_ref="main",
        base_sha=SHA_A,
        head_sha=SHA_A,
        user_head=SHA_A,
        user_state="digest-1",
        upstream="acme/router",
        extra={"fork": None},
    )
    return replace(record, **changes)
