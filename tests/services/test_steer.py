"""``queue_steer``'s refusals: what the API answers with 409 (not watching, finished, closed PR) or 422
naming ``component`` (several PRs and none named, or an unknown one), storing nothing. The path that
runs a steered round end to end is ``tests/api/test_steer.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.domain.enums import RunPhase, RunStatus
from controller.domain.errors import NotFoundError, RefusedError, SpecError
from controller.services.feedback.steer import queue_steer
from controller.store import NewRun, Store
from controller.store.records import ComponentRecord, FeedbackSource, PullRecord


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """One SQLite file: the shared ``store`` fixture (``tests/support``) over it, not over both backends."""
    return f"sqlite:///{tmp_path / 'crucible.db'}"


def _run(store: Store, run_id: str, *, watch: bool = True, components: tuple[str, ...] = ("app",)) -> str:
    store.create_run(
        NewRun(
            id=run_id,
            spec_text="",
            spec_fingerprint="f",
            spec_path=None,
            objective="o",
            metric_name="m",
            direction="minimize",
            turns_planned=1,
            options={"publish_prs": True, "watch_feedback": watch},
        )
    )
    for number, name in enumerate(components, start=1):
        store.add_component(
            ComponentRecord(
                run_id=run_id, name=name, repo=name, base_ref="main", base_sha="b" * 40, head_sha="a" * 40
            )
        )
        store.save_pull(
            PullRecord(
                run_id=run_id,
                component=name,
                repo=f"alice/{name}",
                number=number,
                url=f"http://forge/alice/{name}/pull/{number}",
                branch=f"crucible/{run_id}",
                head_sha="a" * 40,
                pushed_sha="a" * 40,
                base_sha="b" * 40,
            )
        )
    store.set_run_status(run_id, RunStatus.RUNNING)
    store.set_phase(run_id, RunPhase.WATCHING)
    return run_id


def test_a_watching_run_stores_the_steer_as_feedback(store: Store) -> None:
    _run(store, "r1")
    queued = queue_steer(store, "r1", "tidy up")
    [item] = store.list_feedback("r1")
    assert (item.id, item.source, item.body, item.component) == (
        queued.feedback,
        FeedbackSource.STEER,
        "tidy up",
        "app",
    )
    assert (queued.pr_number, queued.after_round) == (1, 0)


def test_refusals_store_nothing(store: Store) -> None:
    _run(store, "plain", watch=False)
    with pytest.raises(RefusedError, match="does not watch feedback"):
        queue_steer(store, "plain", "x")
    _run(store, "two", components=("app", "lib"))
    with pytest.raises(SpecError) as several:
        queue_steer(store, "two", "x")
    assert several.value.key == "component"
    with pytest.raises(SpecError) as unknown:
        queue_steer(store, "two", "x", component="web")
    assert unknown.value.key == "component"
    _run(store, "done")
    store.set_run_status("done", RunStatus.COMPLETED)
    with pytest.raises(RefusedError, match="completed"):
        queue_steer(store, "done", "x")
    _run(store, "closed")
    store.set_pull_state("closed", "app", "closed")
    with pytest.raises(RefusedError, match="closed"):
        queue_steer(store, "closed", "x")
    with pytest.raises(NotFoundError):
        queue_steer(store, "nope", "x")
    assert all(store.list_feedback(r) == [] for r in ("plain", "two", "done", "closed"))
    queued = queue_steer(store, "two", "x", component="lib")
    assert (queued.component, queued.pr_number) == ("lib", 2)
