"""``POST /api/runs/{id}/rounds`` with a steer (ADR-0012), over real HTTP against the local forge.

A run submitted to the server publishes its draft PR and watches feedback; the operator's steer is
stored as a feedback item, and the run's watch starts a refinement round for it through the broker,
with the steer quoted in CANDIDATE.md (the agent commits the quoted lines, so the PR branch shows
them). A run that does not watch, or has finished, answers 409; the read-only token 403; an unknown
run 404; several PRs without a ``component`` 422 naming it (covered by the service's own check).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from controller.api.auth import ApiTokens
from controller.api.serve import serve_app
from controller.config.settings import Settings
from controller.domain.enums import EventKind, RunPhase, RunStatus
from controller.localforge.server import serve_in_thread
from controller.services.feedback.publish import branch_name
from controller.store.store import Store
from controller.wiring import Mode, Root, build
from tests.conftest import git
from tests.forgekit import (
    REVIEW_AGENT,
    TOKENS,
    AppForge,
    app_forge,
    clone_as,
    review_round_spec,
    write_agent,
)
from tests.support import wait_until
from tests.support.fixtures import migrated_sqlite_url

ADMIN = "admin-token-0123456789"
READER = "reader-token-0123456789"
STEER = "please keep the value file tidy"
BOUND_S = 120.0  # a bound for a broken server, never reached by a working one

pytestmark = pytest.mark.slow


def _until(check: Callable[[], bool], what: str) -> None:
    wait_until(check, what, timeout=BOUND_S)


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[AppForge]:
    with app_forge(tmp_path) as app:
        yield app


@pytest.fixture
def root(tmp_path: Path, forge: AppForge) -> Iterator[Root]:
    environ = {
        **os.environ,
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_DATABASE_URL": migrated_sqlite_url(tmp_path / "crucible.db"),
        "CRUCIBLE_GITHUB_TOKEN": TOKENS["alice"],
        "CRUCIBLE_FORGE_WRITE_INTERVAL": "0",
        "CRUCIBLE_OWN_LOGINS": "alice",
        # As an operator configures a controller that publishes to the local forge, running the
        # review-round spec's unsandboxed agent.
        "CRUCIBLE_FORGE_HOSTS": forge.handle.api_url,
        "CRUCIBLE_ALLOW_UNSANDBOXED": "1",
    }
    built = build(environ, settings=Settings.from_env(environ), mode=Mode.SERVE)
    yield built
    built.close()


def test_a_steer_starts_a_refinement_round_of_a_watching_run(
    tmp_path: Path, forge: AppForge, root: Root
) -> None:
    spec = review_round_spec(write_agent(tmp_path, REVIEW_AGENT), forge.handle.api_url, max_rounds=1)
    admission = root.admission  # built with the serve mode
    app, _scheduler = serve_app(
        root.service(),
        root.store(),
        ApiTokens(ADMIN, READER),
        max_concurrent_runs=2,
        webhook_secret=None,
        forge_for=root.forges.for_spec,
        tick_s=0.05,
        admission=admission,
    )
    store: Store = root.store()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    with serve_in_thread(app) as url, httpx.Client(base_url=url, headers=auth, timeout=60) as http:
        submit = {"spec": spec, "spec_dir": str(tmp_path), "publish_prs": True}
        plain = http.post("/api/runs", json=submit)
        watching = http.post("/api/runs", json={**submit, "watch_feedback": True})
        assert plain.status_code == watching.status_code == 201, (plain.text, watching.text)
        plain_id, run_id = plain.json()["id"], watching.json()["id"]

        _until(lambda: store.get_run(run_id).phase is RunPhase.WATCHING, "the run to watch feedback")
        refused = http.post(f"/api/runs/{plain_id}/rounds", json={"steer": STEER})
        assert refused.status_code == 409 and "does not watch feedback" in refused.json()["detail"]
        assert http.post("/api/runs/nope/rounds", json={"steer": STEER}).status_code == 404
        reader = {"Authorization": f"Bearer {READER}"}
        assert (
            http.post(f"/api/runs/{run_id}/rounds", json={"steer": STEER}, headers=reader).status_code == 403
        )
        assert store.list_feedback(run_id) == [], "nothing stored by refused requests"

        answer = http.post(f"/api/runs/{run_id}/rounds", json={"steer": STEER})
        assert answer.status_code == 202, answer.text
        queued = answer.json()
        assert (queued["run_id"], queued["component"], queued["after_round"]) == (run_id, "app", 0)

        # max_rounds = 1: the steered round is the run's last, so the run completes after it.
        _until(lambda: store.get_run(run_id).status is RunStatus.COMPLETED, "the steered round and the stop")
        [done] = http.get(f"/api/runs/{run_id}/rounds").json()
        assert (done["round"], done["feedback"], done["kept"]) == (1, [queued["feedback"]], True), done
        [item] = http.get(f"/api/runs/{run_id}/feedback").json()
        assert (item["source"], item["verdict"], item["round"], item["body"]) == (
            "steer",
            "accepted",
            1,
            STEER,
        )
        assert http.get(f"/api/runs/{run_id}/replies").json() == [], "no reply is drafted for an operator"
        late = http.post(f"/api/runs/{run_id}/rounds", json={"steer": STEER})
        assert late.status_code == 409, late.text

    run = store.get_run(run_id)
    assert run.stop_reason == "max_rounds", run.stop_message
    kinds = [e.kind for e in store.list_events(run_id)]
    assert kinds.count(EventKind.ROUND_STARTED) == kinds.count(EventKind.ROUND_FINISHED) == 1
    # The agent committed the lines CANDIDATE.md quoted; the round pushed them onto the PR branch.
    branch = branch_name(run_id)
    work = clone_as("bob", f"{forge.handle.url}/alice/app.git", tmp_path / "bob")
    assert f"> {STEER}" in git(work, "show", f"origin/{branch}:src/addressed.txt")


def test_a_steered_round_without_interleaving_is_decided_against_the_stored_champion(
    tmp_path: Path, forge: AppForge, root: Root
) -> None:
    """Issue 21: with ``metric.interleave = false`` the first refinement round under ``serve`` stopped
    with ``AssertionError`` (the round's context had no champion arm: only the search round's had
    one). The round's turn is compared with the champion's stored samples and kept."""
    agent = write_agent(tmp_path, REVIEW_AGENT)
    spec = review_round_spec(agent, forge.handle.api_url, max_rounds=1, interleave=False)
    app, _scheduler = serve_app(
        root.service(),
        root.store(),
        ApiTokens(ADMIN, READER),
        max_concurrent_runs=2,
        webhook_secret=None,
        forge_for=root.forges.for_spec,
        tick_s=0.05,
        admission=root.admission,
    )
    store: Store = root.store()
    auth = {"Authorization": f"Bearer {ADMIN}"}
    with serve_in_thread(app) as url, httpx.Client(base_url=url, headers=auth, timeout=60) as http:
        submit = {"spec": spec, "spec_dir": str(tmp_path), "publish_prs": True, "watch_feedback": True}
        created = http.post("/api/runs", json=submit)
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        _until(lambda: store.get_run(run_id).phase is RunPhase.WATCHING, "the run to watch feedback")
        assert http.post(f"/api/runs/{run_id}/rounds", json={"steer": STEER}).status_code == 202
        _until(lambda: store.get_run(run_id).status is not RunStatus.RUNNING, "the round and the stop")
    run = store.get_run(run_id)
    assert (run.status, run.stop_reason) == (RunStatus.COMPLETED, "max_rounds"), run.stop_message
    rounds = [(t.round, t.outcome) for t in store.list_turns(run_id)]
    assert rounds == [(0, "accepted"), (1, "accepted")], rounds
