"""The run service over the composition root: options stored with the run, resume restores them,
and rounds go through the broker.

Real parts only: the local forge over HTTP, git, SQLite, the agent as a shell script.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.brokers.base import RoundReport
from controller.config.options import RunOptions
from controller.config.settings import ForgeSettings, Settings
from controller.config.spec import load_spec
from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.domain.errors import SpecError
from controller.domain.jobs import RoundState
from controller.services.control.service import Signals
from controller.services.execution.context import RunContext
from controller.services.execution.loop import LoopResult
from controller.wiring import Root, build
from tests.forgekit import (
    REVIEW_AGENT,
    TOKENS,
    AppForge,
    app_forge,
    review_round_spec,
    write_agent,
    write_spec,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[AppForge]:
    with app_forge(tmp_path) as app:
        yield app


def _root(tmp_path: Path, environ: dict[str, str]) -> Root:
    """A composition root as a fresh ``crucible`` process builds it (a new root: a new process)."""
    home = tmp_path / "crucible-home"
    settings = Settings.from_env({**environ, "CRUCIBLE_HOME": str(home)})
    return build(environ, settings=settings)


def _environ(tmp_path: Path) -> dict[str, str]:
    import os

    return {
        **os.environ,
        "CRUCIBLE_GITHUB_TOKEN": TOKENS["alice"],
        "CRUCIBLE_FORGE_WRITE_INTERVAL": "0",
        "CRUCIBLE_OWN_LOGINS": "alice",
    }


def test_resume_restores_publish_and_watch_without_flags(tmp_path: Path, forge: AppForge) -> None:
    """Started with --publish-prs --watch-feedback, cancelled while watching, resumed bare: it publishes
    and watches again. The PR is closed meanwhile, so the resumed watch stops with ``feedback_closed``,
    a stop only the watch produces (a resume without the options would stop with ``max_turns``)."""
    environ = _environ(tmp_path)
    spec_text = review_round_spec(write_agent(tmp_path, REVIEW_AGENT), forge.handle.api_url)
    spec_path = write_spec(tmp_path, spec_text)
    first = _root(tmp_path, environ)
    service = first.service()
    options = RunOptions(publish_prs=True, watch_feedback=True, live_steer=True)
    run_id = service.create(load_spec(spec_path), spec_text, spec_path, options)
    signals = Signals()

    def cancel_once_watching(ctx: RunContext, searched: LoopResult) -> None:
        assert searched.status == RunStatus.RUNNING and searched.stop_reason == StopReason.MAX_TURNS
        signals.cancel.set()  # Ctrl-C as the watch begins

    result = service.drive(run_id, signals=signals, before_watch=cancel_once_watching)
    assert result.stop_reason == StopReason.CANCELLED, result.message
    [pull] = first.store().list_pulls(run_id)
    first.close()
    forge.alice.get_repo("alice/app").get_pull(pull.number).edit(state="closed")

    second = _root(tmp_path, environ)
    resumed_service = second.service()
    assert resumed_service.reader.options(run_id) == options, "every option came back from the store"
    resumed = resumed_service.resume(run_id)
    assert resumed.stop_reason == StopReason.FEEDBACK_CLOSED, resumed.message
    store = second.store()
    assert store.get_run(run_id).status == RunStatus.COMPLETED
    assert [p.number for p in store.list_pulls(run_id)] == [pull.number], "the same PR, published again"
    kinds = [e.kind for e in store.list_events(run_id)]
    assert kinds.count(EventKind.RESUMED) == 1
    assert kinds.count(EventKind.ACCEPTED) == 1, "the decided turn was not run again"
    report = resumed_service.broker.status(run_id, 0)
    assert isinstance(report, RoundReport) and report.state is RoundState.SUCCEEDED
    second.close()


def test_publishing_without_credentials_is_refused_before_anything_is_stored(
    tmp_path: Path, forge: AppForge
) -> None:
    import os

    spec_text = review_round_spec(write_agent(tmp_path, REVIEW_AGENT), forge.handle.api_url)
    spec_path = write_spec(tmp_path, spec_text)
    root = _root(tmp_path, dict(os.environ))
    with pytest.raises(SpecError) as err:
        root.service().create(load_spec(spec_path), spec_text, spec_path, RunOptions(publish_prs=True))
    assert err.value.key == "CRUCIBLE_GITHUB_TOKEN"
    assert root.store().list_runs() == []
    root.close()


def test_one_forge_client_per_forge_url(tmp_path: Path) -> None:
    root = build({}, settings=Settings(home=tmp_path, database_url="sqlite://", forge=ForgeSettings()))
    with pytest.raises(SpecError):
        root.forges.for_url("http://127.0.0.1:9/api/v3")
    token = build(
        {},
        settings=Settings(
            home=tmp_path,
            database_url="sqlite://",
            forge=ForgeSettings.from_env({"CRUCIBLE_GITHUB_TOKEN": "t"}),
        ),
    )
    first = token.forges.for_url("http://127.0.0.1:9/api/v3")
    assert token.forges.for_url("http://127.0.0.1:9/api/v3") is first
    assert token.forges.for_url("http://127.0.0.1:10/api/v3") is not first
