"""A warm hypothesis pod's slot (ADR-0034): its token asks for the slot's next hypothesis and nothing
else; what it gets is a hypothesis token scoped exactly as a one-shot hypothesis pod's (ADR-0018).
Offers and takes live in the database, so a restarted controller (or another replica) hands out the
same hypotheses without running one twice at once.

Through the real worker routes (uvicorn, SQLite and PostgreSQL); the long poll is shortened through
``RemoteRounds.slot_wait_s`` so "nothing offered yet" answers at once.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from controller.api.worker_serve import serving, worker_app
from controller.domain.enums import Reason, RunStatus
from controller.domain.jobs import RoundJob
from controller.services.remote.remote_rounds import token_hash
from controller.services.remote.slots import Taken
from controller.store import HypothesisReport
from tests.conftest import git
from tests.worker.conftest import Controller
from tests.worker.test_bundles import commit, worker_clone
from tests.worker.test_bundles import seeded as seeded  # the fixture
from tests.worker.test_hypothesis_tokens import _report

JOB = RoundJob(run_id="r1", round=0, turns=1, first_turn=1, heads={"app": "a" * 40})
NEXT = "/api/worker/runs/r1/slot/next"


@pytest.fixture
def slotted(controller: Controller) -> Controller:
    controller.seed_run("r1")
    controller.remote.slot_wait_s = 0.0
    return controller


def _slot(controller: Controller, index: int) -> str:
    env = controller.remote.mint_slot_env(JOB, index)
    assert (env["CRUCIBLE_SLOT"], env["CRUCIBLE_PARALLEL_INDEX"]) == ("1", str(index))
    return env["CRUCIBLE_WORKER_TOKEN"]


def test_a_slot_token_takes_the_offered_hypothesis_with_a_token_scoped_to_it(slotted: Controller) -> None:
    token = _slot(slotted, 1)
    proposal = {"file": "conf.json", "key": "a", "old": 1, "new": 3, "hypothesis": "h"}
    with slotted.client(token) as http:
        assert http.get(NEXT).json() == {"done": False, "turn": None, "index": None, "token": None}
        slotted.remote.slots.offer(JOB, 4, 1, proposal)
        taken = http.get(NEXT, params={"after": 3}).json()
        assert (taken["done"], taken["turn"], taken["index"]) == (False, 4, 1)
        assert http.get(NEXT, params={"after": 4}).json()["turn"] is None, "handed out once"
    with slotted.client(taken["token"]) as http:
        job = http.get("/api/worker/runs/r1/job").json()
    assert job["hypothesis"] == {"turn": 4, "index": 1, "proposal": proposal}


def test_an_offer_for_a_turn_the_pod_is_past_is_not_handed_out_again(slotted: Controller) -> None:
    token = _slot(slotted, 0)
    slotted.remote.slots.offer(JOB, 2, 0, None)  # on offer still: its pod reported, its token is live
    with slotted.client(token) as http:
        assert http.get(NEXT, params={"after": 2}).json()["turn"] is None, "the pod reported turn 2"
        slotted.remote.slots.offer(JOB, 3, 0, None)
        assert http.get(NEXT, params={"after": 2}).json()["turn"] == 3


def test_a_slot_token_is_refused_everywhere_else_and_no_other_token_asks_for_a_slot(
    slotted: Controller,
) -> None:
    token = _slot(slotted, 0)
    with slotted.client(token) as http:
        for method, path in [
            ("GET", "job"),
            ("GET", "ledger/run"),
            ("GET", "components/app/bundle"),
            ("POST", "outcome"),
            ("POST", "ledger/turns/1/hypotheses"),
        ]:
            answer = http.request(method, f"/api/worker/runs/r1/{path}", json={})
            assert answer.status_code == 403, (path, answer.text)
            assert "slot token" in answer.json()["detail"]
    round_token = slotted.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    hypothesis = slotted.remote.mint_hypothesis_env(JOB, 1, 0, None)["CRUCIBLE_WORKER_TOKEN"]
    for other in (round_token, hypothesis):
        with slotted.client(other) as http:
            assert http.get(NEXT).status_code == 403
    with slotted.client("not-a-token") as http:
        assert http.get(NEXT).status_code == 401


def test_a_new_pod_for_a_slot_revokes_only_that_slots_earlier_token(slotted: Controller) -> None:
    first, other = _slot(slotted, 0), _slot(slotted, 1)
    round_token = slotted.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    again = _slot(slotted, 0)
    for token, live in ((first, False), (other, True), (again, True), (round_token, True)):
        record = slotted.store.worker_round_by_token(token_hash(token))
        assert record is not None and (record.revoked_at is None) is live, token is first
    with slotted.client(first) as http:
        assert http.get(NEXT).status_code == 401


def test_a_slot_of_a_run_that_no_longer_runs_is_told_done(slotted: Controller) -> None:
    token = _slot(slotted, 0)
    slotted.remote.slots.offer(JOB, 1, 0, None)
    slotted.store.set_run_status("r1", RunStatus.CANCELLED)
    with slotted.client(token) as http:
        assert http.get(NEXT).json()["done"] is True


def test_a_long_poll_of_a_run_that_stops_while_it_waits_is_told_done(slotted: Controller) -> None:
    slotted.remote.slot_wait_s = 3600.0  # only the run's end (read at every re-read) can end the wait
    slotted.remote.slots.poll_s = 0.05
    token = _slot(slotted, 0)
    answers: list[dict[str, object]] = []
    with slotted.client(token) as http:
        poll = threading.Thread(
            target=lambda: answers.append(http.get(NEXT, timeout=600).json()), daemon=True
        )
        poll.start()
        slotted.store.set_run_status("r1", RunStatus.CANCELLED)
        poll.join(timeout=600)
    assert [a["done"] for a in answers] == [True], "its pod exits now, not after the wait"


def test_a_long_poll_is_woken_by_an_offer_made_while_it_waits(slotted: Controller) -> None:
    slotted.remote.slots.poll_s = 3600.0  # only the offer's wake-up can end the wait early
    answers: list[Taken] = []
    wait = threading.Thread(target=lambda: answers.append(slotted.remote.slots.take("r1", 0, 2, 0, 3600)))
    wait.start()
    slotted.remote.slots.offer(JOB, 1, 2, None)
    wait.join(timeout=600)
    (taken,) = answers
    assert (taken.turn, taken.index) == (1, 2)
    assert taken.env is not None and taken.env["CRUCIBLE_TURN"] == "1"


def test_closing_the_slots_ends_a_waiting_long_poll_with_nothing_offered(slotted: Controller) -> None:
    slots = slotted.remote.slots
    slots.poll_s = 3600.0  # neither a re-read nor the deadline can end the wait: only ``close``
    answers: list[Taken] = []
    wait = threading.Thread(target=lambda: answers.append(slots.take("r1", 0, 2, 0, 3600)), daemon=True)
    wait.start()
    slots.close()
    wait.join(timeout=600)
    assert answers == [Taken()], "close ended the wait: nothing offered, the pod asks again"
    assert slots.take("r1", 0, 2, 0, 3600) == Taken(), "a take after close does not wait"


def test_a_server_stopping_ends_a_pods_long_poll_before_it_waits_for_open_requests(
    slotted: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn waits for open requests before the app's own shutdown runs: without ``on_stop`` a
    pod's ``slot/next`` would hold the server's stop for its whole wait (an hour here)."""
    slots = slotted.remote.slots
    slotted.remote.slot_wait_s = 3600.0
    slots.poll_s = 3600.0
    asked = threading.Event()
    look = slots._next

    def looked(*args: int | str) -> object:
        found = look(*args)  # type: ignore[arg-type]
        asked.set()  # the request is in ``take``: it waits next
        return found

    monkeypatch.setattr(slots, "_next", looked)
    token = _slot(slotted, 0)
    answers: list[dict[str, object]] = []
    with serving(worker_app(slotted.remote), on_stop=slots.close) as url:
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=600)
        poll = threading.Thread(target=lambda: answers.append(client.get(NEXT).json()), daemon=True)
        poll.start()
        assert asked.wait(timeout=600), "the long poll reached the slots"
    poll.join(timeout=600)
    client.close()
    assert answers == [{"done": False, "turn": None, "index": None, "token": None}], "answered: ask again"


def test_a_report_wakes_a_turn_waiting_for_its_pods(slotted: Controller) -> None:
    slotted.store.start_turn("r1", 1, 0)
    hypothesis = slotted.remote.mint_hypothesis_env(JOB, 1, 0, None)["CRUCIBLE_WORKER_TOKEN"]
    waiting = threading.Event()
    woke = threading.Event()

    def follow() -> None:
        with slotted.remote.slots._reports:  # waiting before the report is sent: it must wake this
            waiting.set()
            slotted.remote.slots._reports.wait(3600)
        woke.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    waiting.wait()
    with slotted.client(hypothesis) as http:
        answer = http.post("/api/worker/runs/r1/ledger/turns/1/hypotheses", json=_report(0))
    assert answer.status_code == 200, answer.text
    thread.join(timeout=600)
    assert woke.is_set(), "the report woke the waiting turn"
    assert [h.index for h in slotted.store.list_hypotheses("r1", 1)] == [0]


def test_an_offer_is_made_once_and_a_pod_asking_again_gets_a_fresh_token(slotted: Controller) -> None:
    slots = slotted.remote.slots
    slots.offer(JOB, 1, 0, None)
    slots.offer(JOB, 1, 0, None)  # a restarted controller offers the turn again
    (offer,) = slotted.store.live_hypotheses("r1", 0, 0)
    first = slots.take("r1", 0, 0, 0, 0)
    assert first.env is not None
    (busy,) = slotted.store.live_hypotheses("r1", 0, 0)
    assert busy.token_hash == token_hash(first.env["CRUCIBLE_WORKER_TOKEN"]) != offer.token_hash
    slots.offer(JOB, 1, 0, None)  # again: the pod is busy with it, its token must stay good
    assert [g.token_hash for g in slotted.store.live_hypotheses("r1", 0, 0)] == [busy.token_hash]
    again = slots.take("r1", 0, 0, 0, 0)  # its answer was lost: the pod asks again
    assert again.turn == 1 and again.env is not None
    revoked = slotted.store.worker_round_by_token(busy.token_hash)
    assert revoked is not None and revoked.revoked_at is not None


def test_a_reported_hypothesis_is_not_handed_out_again(slotted: Controller) -> None:
    slotted.store.start_turn("r1", 1, 0)
    slotted.remote.slots.offer(JOB, 1, 0, None)
    report = HypothesisReport(index=0, reason=Reason.LOST, detail="its pod ended without a report")
    slotted.store.report_hypothesis("r1", 1, report)
    assert slotted.remote.slots.take("r1", 0, 0, -1, 0) == Taken(), "a new pod for the slot skips it"


def test_a_warm_pod_fetches_only_the_commits_past_its_previous_start(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    new = commit(repo, "src/a.py", "x = 3\n")  # the champion moved on the controller's side
    job = RoundJob(run_id="r1", round=0, turns=1, first_turn=2, heads={"app": new})
    hypothesis = controller.remote.mint_hypothesis_env(job, 2, 0, None)["CRUCIBLE_WORKER_TOKEN"]
    with controller.client(hypothesis) as http:
        thin = http.get("/api/worker/runs/r1/components/app/bundle", params={"have": start})
        full = http.get("/api/worker/runs/r1/components/app/bundle")
        unknown = http.get("/api/worker/runs/r1/components/app/bundle", params={"have": "f" * 40})
        odd = http.get("/api/worker/runs/r1/components/app/bundle", params={"have": "--upload-pack=x"})
    assert thin.status_code == 200, thin.text
    assert len(thin.content) < len(full.content)
    assert unknown.content == full.content and odd.content == full.content, "whole when it cannot be thin"
    bundle = tmp_path / "thin.bundle"
    bundle.write_bytes(thin.content)
    git(clone, "fetch", "-q", str(bundle), "refs/crucible/r1/start/app:refs/heads/new")
    assert git(clone, "rev-parse", "new") == new
    assert git(clone, "bundle", "list-heads", str(bundle)).split()[1::2] == ["refs/crucible/r1/start/app"]


def test_the_worker_routes_served_alone_answer_head_as_get(slotted: Controller) -> None:
    """``crucible demo --kubernetes`` serves the worker routes alone: HEAD answers wherever GET does."""
    token = slotted.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    with serving(worker_app(slotted.remote)) as url, httpx.Client(base_url=url, timeout=30) as client:
        auth = {"Authorization": f"Bearer {token}"}
        for path in ("/api/worker/runs/r1/job", "/api/worker/runs/r1/ledger/run"):
            get, head = client.get(path, headers=auth), client.head(path, headers=auth)
            assert (get.status_code, head.status_code, head.content) == (200, 200, b""), path
            assert head.headers["content-type"] == get.headers["content-type"], path
        assert client.head("/api/worker/runs/r1/job").status_code == 401
