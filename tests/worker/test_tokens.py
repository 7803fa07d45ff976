"""Worker tokens (ADR-0014): scoped to one run's round, short-lived, stored hashed, good for nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.api.auth import ApiTokens
from controller.api.serve import serve_app
from controller.brokers.routing import RoutedBroker
from controller.domain.errors import SpecError
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.remote.remote_rounds import token_hash
from controller.store import NewRun
from controller.store.worker_protocol import PROTOCOL_HEADER, PROTOCOL_VERSION
from controller.wiring import Mode, build, round_kind
from tests.api.sqlite_only import SQLITE_ONLY
from tests.support import Clock, spec_text
from tests.webhooks.helpers import comment_event
from tests.worker.conftest import OPERATOR, START, Controller


def test_the_env_names_the_round_and_carries_no_other_credential(controller: Controller) -> None:
    controller.seed_run("r1")
    env = controller.mint("r1")
    assert set(env) == {
        "CRUCIBLE_CONTROLLER_URL",
        "CRUCIBLE_WORKER_TOKEN",
        "CRUCIBLE_RUN_ID",
        "CRUCIBLE_ROUND",
        "CRUCIBLE_ROUND_ATTEMPT",
    }
    assert (env["CRUCIBLE_RUN_ID"], env["CRUCIBLE_ROUND"], env["CRUCIBLE_ROUND_ATTEMPT"]) == ("r1", "0", "1")
    assert env["CRUCIBLE_CONTROLLER_URL"] == controller.url
    assert len(env["CRUCIBLE_WORKER_TOKEN"]) >= 40


def test_the_token_is_stored_only_as_its_hash(controller: Controller) -> None:
    controller.seed_run("r1")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    record = controller.store.worker_round_by_token(token_hash(token))
    assert record is not None and record.token_hash != token and token not in repr(record)
    assert controller.store.worker_round_by_token(token) is None, "the raw token is no lookup key"


def test_a_token_reads_its_own_run_and_no_other(controller: Controller) -> None:
    controller.seed_run("r1")
    controller.seed_run("r2")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    with controller.client(token) as http:
        assert http.get("/api/worker/runs/r1/ledger/run").json()["id"] == "r1"
        job = http.get("/api/worker/runs/r1/job").json()
        assert RoundJob.from_json(job["job"]).key == ("r1", 0)
        other = http.get("/api/worker/runs/r2/ledger/run")
        assert other.status_code == 403 and other.json()["kind"] == "forbidden"
        event = {"kind": "resumed", "payload": {}}
        assert http.post("/api/worker/runs/r2/ledger/events", json=event).status_code == 403
        assert http.get("/api/worker/runs/r2/job").status_code == 403
        assert http.get("/api/worker/runs/nope/ledger/run").status_code == 404
    assert controller.store.list_events("r2") == [], "the refused write changed nothing"


@SQLITE_ONLY
def test_no_token_or_a_wrong_one_is_401(controller: Controller) -> None:
    controller.seed_run("r1")
    controller.mint("r1")
    for token in (None, "not-a-token", OPERATOR):
        with controller.client(token) as http:
            answer = http.get("/api/worker/runs/r1/ledger/run")
            assert answer.status_code == 401, token
            assert answer.headers["www-authenticate"] == "Bearer"


@SQLITE_ONLY
def test_a_worker_token_grants_nothing_in_the_operator_api(controller: Controller) -> None:
    controller.seed_run("r1")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    with controller.client(token) as http:
        assert http.get("/api/runs").status_code == 401
        assert http.get("/api/runs/r1").status_code == 401
        assert http.post("/api/runs/r1/cancel").status_code == 401
    with controller.client(OPERATOR) as http:
        assert http.get("/api/runs/r1").status_code == 200, "the operator token still works"


def test_after_its_outcome_the_token_cannot_write_or_read(controller: Controller) -> None:
    controller.seed_run("r1")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    outcome = {"run_status": "completed", "stop_reason": "max_turns", "message": "done", "kept": False}
    with controller.client(token) as http:
        assert http.post("/api/worker/runs/r1/outcome", json=outcome).status_code == 200
        late = http.post("/api/worker/runs/r1/ledger/events", json={"kind": "resumed", "payload": {}})
        assert late.status_code == 401 and "over" in late.json()["detail"]
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 401
        assert http.post("/api/worker/runs/r1/outcome", json=outcome).status_code == 401
    reported = controller.remote.remote_outcome("r1", 0)
    assert reported is not None and reported.message == "done"
    assert controller.store.list_events("r1") == []


def test_a_round_that_ended_revokes_its_tokens(controller: Controller) -> None:
    controller.seed_run("r1")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    controller.remote.revoke("r1", 0)
    with controller.client(token) as http:
        assert http.post("/api/worker/runs/r1/ledger/baseline/start").status_code == 401


def test_a_new_attempt_revokes_the_earlier_one(controller: Controller) -> None:
    controller.seed_run("r1")
    first = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    second = controller.mint("r1")
    assert second["CRUCIBLE_ROUND_ATTEMPT"] == "2"
    with controller.client(first) as http:
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 401
    with controller.client(second["CRUCIBLE_WORKER_TOKEN"]) as http:
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 200


def test_the_token_expires(controller: Controller) -> None:
    controller.seed_run("r1")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    with controller.client(token) as http:
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 200
        controller.clock.advance(3600)
        expired = http.get("/api/worker/runs/r1/ledger/run")
        assert expired.status_code == 401 and "expired" in expired.json()["detail"]


@SQLITE_ONLY
def test_worker_routes_are_in_the_document_under_their_own_tag(controller: Controller) -> None:
    """The worker protocol's schemas are its contract (ADR-0028): ``/openapi.json`` declares them."""
    with controller.client(None) as http:
        paths = http.get("/openapi.json").json()["paths"]
    worker = {p: item for p, item in paths.items() if p.startswith("/api/worker")}
    assert "/api/worker/runs/{run_id}/ledger/turns/{number}/decision" in worker
    assert all(op["tags"] == ["worker"] for item in worker.values() for op in item.values())


@SQLITE_ONLY
def test_a_worker_of_another_protocol_version_is_told_so(controller: Controller) -> None:
    controller.seed_run("r1")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    with controller.client(token) as http:
        answer = http.get("/api/worker/runs/r1/ledger/run", headers={PROTOCOL_HEADER: "1"})
        assert answer.status_code == 400 and answer.json()["kind"] == "protocol"
        assert f"protocol {PROTOCOL_VERSION}" in answer.json()["detail"]
        current = {PROTOCOL_HEADER: str(PROTOCOL_VERSION)}
        assert http.get("/api/worker/runs/r1/ledger/run", headers=current).status_code == 200


@SQLITE_ONLY
def test_a_body_that_does_not_match_its_schema_is_422_naming_the_field(controller: Controller) -> None:
    controller.seed_run("r1")
    before = controller.store.get_run("r1")
    token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    with controller.client(token) as http:
        answer = http.post("/api/worker/runs/r1/ledger/turns", json={"number": "first", "round": 0})
        assert answer.status_code == 422 and answer.json()["key"] == "number", answer.text
        answer = http.post("/api/worker/runs/r1/ledger/samples", json={"turn": 0, "samples": [], "x": 1})
        assert answer.status_code == 422 and answer.json()["key"] == "x", answer.text
        forged = {"kind": "sample", "payload": {"turn": 1, "round": 0, "arm": "sideways"}}
        answer = http.post("/api/worker/runs/r1/ledger/events", json=forged)
        assert answer.status_code == 422 and "arm" in answer.json()["detail"], answer.text
    assert controller.store.list_events("r1") == [], "no malformed event was stored"
    assert controller.store.get_run("r1") == before, "nothing was written"


def test_the_composition_root_builds_the_worker_api_crucible_serve_mounts(
    tmp_path: Path, database_url: str
) -> None:
    environ = {
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_DATABASE_URL": database_url,
        "CRUCIBLE_WORKER_CONTROLLER_URL": "http://crucible.crucible.svc:8080",
        "CRUCIBLE_WORKER_TOKEN_TTL": "60",
    }
    root = build(environ, mode=Mode.SERVE, listen_url="http://127.0.0.1:8080")
    try:
        store = root.upgraded_store()
        service = root.service()  # before the worker API: the root does not depend on the order
        remote = root.worker_api()
        assert root.worker_api() is remote, "one worker API per root"
        Controller("http://unused", store, remote, root.settings, Clock(START)).seed_run("r1")
        job = RoundJob(run_id="r1", round=0, turns=1, first_turn=1, heads={"app": "a" * 40})
        env = remote.mint_worker_env(job)
        assert env["CRUCIBLE_CONTROLLER_URL"] == "http://crucible.crucible.svc:8080"
        grant = store.worker_round_by_token(token_hash(env["CRUCIBLE_WORKER_TOKEN"]))
        assert grant is not None and 59 < (grant.expires_at - grant.created_at).total_seconds() <= 60
        tokens = ApiTokens(OPERATOR)
        app, _ = serve_app(service, store, tokens, max_concurrent_runs=1, webhook_secret=None, remote=remote)
        with serve_in_thread(app) as url:
            served = Controller(url, store, remote, root.settings, Clock(START))
            with served.client(env["CRUCIBLE_WORKER_TOKEN"]) as http:
                answer = http.get("/api/worker/runs/r1/job")
        assert answer.status_code == 200 and answer.json()["job"]["run_id"] == "r1"
    finally:
        root.close()


def test_refinement_rounds_of_a_kubernetes_run_go_there_too(tmp_path: Path, database_url: str) -> None:
    """``crucible worker`` plays refinement rounds (ADR-0019): the routed broker sends every round of a
    run to the broker its spec names."""
    assert round_kind("kubernetes", 0) == "kubernetes"
    assert round_kind("kubernetes", 0, parallel=2) == "local", "its turns launch hypothesis pods"
    assert round_kind("kubernetes", 1, parallel=2) == "kubernetes"
    assert [round_kind("kubernetes", n) for n in (1, 2)] == ["kubernetes", "kubernetes"]
    assert [round_kind("local", n) for n in (0, 1)] == ["local", "local"]
    environ = {"CRUCIBLE_HOME": str(tmp_path / "home"), "CRUCIBLE_DATABASE_URL": database_url}
    root = build(environ)
    try:
        store = root.upgraded_store()
        spec = spec_text(sections={"broker": ['kind = "kubernetes"', 'image = "loop:1"']})
        store.create_run(
            NewRun(
                id="k1",
                spec_text=spec,
                spec_fingerprint="f",
                spec_path=str(tmp_path / "crucible.toml"),
                objective="x",
                metric_name="m",
                direction="minimize",
                turns_planned=1,
            )
        )
        broker = root.service().broker
        assert isinstance(broker, RoutedBroker)
        for number in (0, 1):  # every round goes to Kubernetes, which this process cannot reach
            with pytest.raises(SpecError, match=r"broker\.kind"):
                broker.broker_for("k1", number)
    finally:
        root.close()


def test_a_refinement_rounds_worker_reads_only_the_feedback_its_job_names(controller: Controller) -> None:
    controller.seed_run("r1")
    controller.seed_run("r2")
    mine = controller.store.add_feedback("r1", "app", comment_event(body="tidy the file", external_id=1))
    other = controller.store.add_feedback("r1", "app", comment_event(body="not this round", external_id=2))
    assert mine is not None and other is not None
    job = RoundJob(
        run_id="r1", round=1, turns=2, first_turn=2, heads={"app": "a" * 40}, feedback_ids=(mine.id,)
    )
    token = controller.remote.mint_worker_env(job)["CRUCIBLE_WORKER_TOKEN"]
    with controller.client(token) as http:
        answer = http.get("/api/worker/runs/r1/feedback")
        assert answer.status_code == 200, answer.text
        assert answer.json()["component"] == "app"
        assert [i["body"] for i in answer.json()["items"]] == ["tidy the file"]
        assert http.get("/api/worker/runs/r2/feedback").status_code == 403
    with controller.client(None) as http:
        assert http.get("/api/worker/runs/r1/feedback").status_code == 401
    with controller.client(OPERATOR) as http:
        assert http.get("/api/worker/runs/r1/feedback").status_code == 401
