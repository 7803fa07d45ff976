"""The operator API's edges (issue 8): 401 without a token, 403 for the read-only token on a write,
422 naming the field for a bad spec or payload, 404 for an unknown id; pages; probes and metrics."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.config.settings import Settings
from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.localforge.server import serve_in_thread
from controller.store import Store
from tests.api.conftest import ADMIN, READER, SPEC, Api, Recorder, new_run
from tests.api.sqlite_only import SQLITE_ONLY


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/runs"),
        ("GET", "/api/runs/x"),
        ("POST", "/api/runs/x/cancel"),
        ("GET", "/api/runs/x/events"),
    ],
)
def test_no_token_or_a_wrong_one_is_401(api: Api, method: str, path: str) -> None:
    for token in (None, "wrong", ADMIN + "x", ""):
        with api.client(token) as client:
            response = client.request(method, path)
        assert response.status_code == 401, (token, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
    with api.client(None) as client:
        assert client.get("/api/runs", headers={"Authorization": f"Basic {ADMIN}"}).status_code == 401


@SQLITE_ONLY
def test_the_read_only_token_reads_but_may_not_write(api: Api) -> None:
    new_run(api.store, "r1")
    with api.client(READER) as client:
        assert client.get("/api/runs").status_code == 200
        assert client.get("/api/runs/r1").status_code == 200
        for path, body in (("/api/runs", {"spec": SPEC}), ("/api/runs/r1/cancel", None)):
            response = client.post(path, json=body)
            assert response.status_code == 403, response.text
    assert api.control.calls == []  # nothing reached the scheduler
    with api.client(ADMIN) as client:
        assert client.post("/api/runs/r1/cancel").json() == {"message": "cancelling"}
    assert api.control.calls == [("cancel", "r1")]


@SQLITE_ONLY
def test_unknown_ids_are_404_on_every_run_route(api: Api) -> None:
    with api.client() as client:
        for sub in ("", "/turns", "/patch", "/pulls", "/feedback", "/replies", "/events"):
            response = client.get(f"/api/runs/nope{sub}")
            assert response.status_code == 404, (sub, response.text)
            assert response.json()["kind"] == "not_found"


def test_a_bad_spec_is_422_naming_the_key_and_stores_nothing(api: Api) -> None:
    bad = SPEC.replace("[metric]", "[metric]\nsamples = 0")
    with api.client() as client:
        response = client.post("/api/runs", json={"spec": bad, "spec_dir": str(api.repo)})
        assert response.status_code == 422
        assert response.json()["key"] == "metric.samples"
        assert "metric.samples" in response.json()["detail"]
        response = client.post("/api/runs", json={"spec": "objective = ", "spec_dir": str(api.repo)})
        assert response.status_code == 422 and response.json()["key"] == "spec"
        response = client.post("/api/runs", json={"spec": SPEC, "spec_dir": str(api.repo), "turns": -1})
        assert response.status_code == 422 and response.json()["key"] == "turns"
        response = client.post("/api/runs", json={"spec": SPEC, "colour": "blue"})
        assert response.status_code == 422 and response.json()["key"] == "colour"
        response = client.post("/api/runs", json={"spec": SPEC, "spec_dir": "relative/dir"})
        assert response.status_code == 422 and response.json()["key"] == "spec_dir"
        response = client.post("/api/runs", content=b"not json", headers={"content-type": "application/json"})
        assert response.status_code == 422
        response = client.get("/api/runs", params={"limit": 0})
        assert response.status_code == 422 and response.json()["key"] == "limit"
        assert client.get("/api/runs").json()["items"] == []


def test_a_good_spec_is_201_and_the_run_is_pending(api: Api) -> None:
    with api.client() as client:
        response = client.post("/api/runs", json={"spec": SPEC, "spec_dir": str(api.repo), "turns": 1})
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        view = client.get(f"/api/runs/{run_id}").json()
    assert view["status"] == "pending" and view["objective"] == "make it faster"
    assert [c["name"] for c in view["components"]] == ["app"]
    run = api.store.get_run(run_id)
    assert run.turns_planned == 1 and run.options["watch_feedback"] is False
    assert ("wake", "") in api.control.calls


def test_runs_are_paged_newest_first_and_filtered_by_status(api: Api) -> None:
    for i in range(5):
        new_run(api.store, f"run{i}")
    api.store.set_run_status("run1", RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED)
    with api.client() as client:
        first = client.get("/api/runs", params={"limit": 2}).json()
        second = client.get("/api/runs", params={"limit": 2, "offset": first["next_offset"]}).json()
        last = client.get("/api/runs", params={"limit": 2, "offset": second["next_offset"]}).json()
        cancelled = client.get("/api/runs", params={"status": "cancelled"}).json()
    ids = [r["run_id"] for page in (first, second, last) for r in page["items"]]
    assert ids == [f"run{i}" for i in reversed(range(5))]
    assert last["next_offset"] is None
    assert [r["run_id"] for r in cancelled["items"]] == ["run1"]


def test_rounds_take_a_steer_and_resume_goes_to_the_scheduler(api: Api) -> None:
    new_run(api.store, "r1")
    with api.client() as client:
        assert client.post("/api/runs/r1/rounds", json={"steer": ""}).status_code == 422
        response = client.post("/api/runs/r1/rounds", json={"steer": "use a cache"})
        assert response.status_code == 202
        assert client.post("/api/runs/r1/resume").status_code == 200
    assert api.control.calls == [("steer", "r1"), ("resume", "r1")]


def test_probes_and_metrics(api: Api) -> None:
    new_run(api.store, "r1")
    api.store.append_event("r1", EventKind.RESUMED, {})
    with api.client(None) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ready"}
        text = client.get("/metrics").text
        assert client.get("/docs").status_code == 200
        assert client.get("/openapi.json").json()["info"]["title"] == "crucible controller"
        dashboard = client.get("/", follow_redirects=False)
        assert dashboard.status_code == 303 and dashboard.headers["location"] == "/login"
    assert 'crucible_runs{status="pending"} 1.0' in text
    assert 'crucible_turns_total{outcome="accepted"} 0.0' in text
    assert "crucible_webhook_deliveries_total 0.0" in text
    assert "crucible_leases_held 0.0" in text
    assert "crucible_broker_rounds_total 0.0" in text
    sent = [line for line in text.splitlines() if line.startswith("crucible_db_statements_total ")]
    assert len(sent) == 1 and float(sent[0].split()[1]) > 0, "the scrape's own reads count"


def test_readyz_is_503_on_a_database_behind_the_schema_head(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    settings = Settings(home=tmp_path / "home", database_url=url)
    store = Store(url)  # never migrated
    try:
        app = create_app(settings, store, ApiTokens(ADMIN), Recorder())
        with serve_in_thread(app) as base, httpx.Client(base_url=base) as client:
            response = client.get("/readyz")
            assert client.get("/healthz").status_code == 200
    finally:
        store.close()
    assert response.status_code == 503 and "crucible db upgrade" in response.json()["detail"]
