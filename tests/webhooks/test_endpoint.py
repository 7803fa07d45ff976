"""``POST /webhooks/github`` over real HTTP (ASGI via TestClient) into a real store, then processed."""

from __future__ import annotations

import logging
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.domain.enums import EventKind
from controller.forge.webhooks import signature_for
from controller.services.feedback.intake import ingest, process_deliveries
from controller.store import Store
from tests.webhooks.helpers import (
    ORACLE_FILES,
    PR,
    SECRET,
    Client,
    Wakeups,
    comment_event,
    encode,
    event_of,
    on_pull_request,
    oracle,
    post,
    publish,
)


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """One SQLite file: the shared ``store`` fixture (``tests/support``) over it, not over both backends."""
    return f"sqlite:///{tmp_path / 'crucible.db'}"


def test_a_signed_delivery_is_queued_once_and_wakes_the_processor(client_for: Client, store: Store) -> None:
    wakeups = Wakeups()
    client = client_for(store, on_delivery=wakeups)
    body = encode(oracle("pull_request_review.submitted.0.json"))
    first = post(client, "pull_request_review", body)
    again = post(client, "pull_request_review", body)
    assert (first.status_code, first.json()) == (202, {"status": "queued"})
    assert (again.status_code, again.json()) == (202, {"status": "duplicate"})
    assert wakeups.settled(1) == 1
    assert [d.id for d in store.pending_deliveries()] == ["d-1"]


@pytest.mark.parametrize(
    "signature",
    [None, "sha256=" + "0" * 64, "garbage", signature_for(b"another secret", b"{}")],
)
def test_forged_or_missing_signatures_get_401_and_store_nothing(
    client_for: Client, store: Store, signature: str | None
) -> None:
    response = post(
        client_for(store),
        "issue_comment",
        encode(oracle("issue_comment.created.0.json")),
        signature=signature,
    )
    assert response.status_code == 401
    assert store.pending_deliveries() == []


def test_a_signature_of_other_bytes_is_refused(client_for: Client, store: Store) -> None:
    body = encode(oracle("issue_comment.created.0.json"))
    forged = signature_for(SECRET.encode(), body + b" ")
    assert post(client_for(store), "issue_comment", body, signature=forged).status_code == 401
    assert store.pending_deliveries() == []


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"a": NaN}', b"\xff\xfe", b""])
def test_malformed_bodies_get_400(client_for: Client, store: Store, body: bytes) -> None:
    assert post(client_for(store), "issue_comment", body).status_code == 400
    assert store.pending_deliveries() == []


@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
def test_missing_github_headers_get_400(client_for: Client, store: Store, missing: str) -> None:
    body = b"{}"
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": "d-1",
        "X-Hub-Signature-256": signature_for(SECRET.encode(), body),
    }
    del headers[missing]
    assert client_for(store).post("/webhooks/github", content=body, headers=headers).status_code == 400
    assert store.pending_deliveries() == []


def test_bodies_over_the_cap_get_413(client_for: Client, store: Store) -> None:
    client = client_for(store, max_bytes=100)
    body = encode({"action": "created", "pad": "x" * 200})
    assert post(client, "issue_comment", body).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap applies to the bytes read
        yield body[:50]
        yield body[50:]

    headers = {"X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "d-2"}
    headers["X-Hub-Signature-256"] = signature_for(SECRET.encode(), body)
    assert client.post("/webhooks/github", content=chunks(), headers=headers).status_code == 413
    assert post(client, "issue_comment", b'{"action": "created"}').status_code == 202
    assert [d.id for d in store.pending_deliveries()] == ["d-1"]


@pytest.mark.parametrize("secret", [None, ""])
def test_without_a_secret_every_delivery_is_refused(
    client_for: Client, store: Store, secret: str | None
) -> None:
    body = encode(oracle("ping.event.0.json"))
    assert post(client_for(store, secret), "ping", body).status_code == 503
    assert store.pending_deliveries() == []


def test_ping_answers_200_without_queuing(client_for: Client, store: Store) -> None:
    response = post(client_for(store), "ping", encode(oracle("ping.event.1.json")))
    assert (response.status_code, response.json()) == (200, {"status": "pong"})
    assert store.pending_deliveries() == []


def test_every_oracle_payload_is_accepted_and_processed(client_for: Client, store: Store) -> None:
    publish(store)  # the examples' PR (Codertocat/Hello-World#2) is one crucible published
    client = client_for(store)
    for index, path in enumerate(ORACLE_FILES):
        response = post(client, event_of(path), path.read_bytes(), delivery=f"d-{index}")
        assert response.status_code in (200, 202), path.name
    queued = len([p for p in ORACLE_FILES if event_of(p) != "ping"])
    assert process_deliveries(store) == queued
    assert store.pending_deliveries() == []
    sources = {f.source.value for f in store.list_feedback("r1")}
    assert sources == {"review", "review_comment"}  # no example issue_comment is on a PR
    kinds = [e.kind for e in store.list_events("r1")]
    # Sent in name order: closed twice (one change, one event), then reopened twice.
    assert kinds.count(EventKind.PR_CLOSED) == 1
    assert store.list_pulls("r1")[0].state == "open"
    assert process_deliveries(store) == 0


def test_an_issue_comment_on_a_pull_request_becomes_feedback(client_for: Client, store: Store) -> None:
    publish(store)
    payload = on_pull_request(oracle("issue_comment.created.1.json"))
    payload["issue"]["number"] = PR
    assert post(client_for(store), "issue_comment", encode(payload)).status_code == 202
    process_deliveries(store)
    (item,) = store.list_feedback("r1")
    assert (item.source.value, item.pr_number, item.external_id) == (
        "issue_comment",
        PR,
        payload["comment"]["id"],
    )
    assert item.body == payload["comment"]["body"]


def test_ten_deliveries_and_the_poller_yield_one_item(client_for: Client, store: Store) -> None:
    publish(store)
    client = client_for(store)
    payload = oracle("pull_request_review_comment.created.1.json")
    body = encode(payload)
    statuses = [
        post(client, "pull_request_review_comment", body, delivery="same").status_code for _ in range(10)
    ]
    assert statuses == [202] * 10
    # GitHub's manual redelivery of a lost webhook gets a new delivery id: also the same item.
    assert post(client, "pull_request_review_comment", body, delivery="other").status_code == 202
    assert process_deliveries(store) == 2
    comment = payload["comment"]
    polled = comment_event(
        external_id=comment["id"], action="created", updated_at=comment["updated_at"], body=comment["body"]
    )
    assert ingest(store, "r1", "router", [polled]) == []
    assert len(store.list_feedback("r1")) == 1
    assert [e.kind for e in store.list_events("r1")].count(EventKind.FEEDBACK_RECEIVED) == 1


def test_an_edit_and_a_delete_with_one_updated_at_are_two_items(client_for: Client, store: Store) -> None:
    publish(store)
    client = client_for(store)
    edited = oracle("pull_request_review_comment.edited.4.json")
    deleted = oracle("pull_request_review_comment.deleted.3.json")
    assert edited["comment"]["updated_at"] == deleted["comment"]["updated_at"]
    post(client, "pull_request_review_comment", encode(edited), delivery="e")
    post(client, "pull_request_review_comment", encode(deleted), delivery="d")
    process_deliveries(store)
    assert sorted(f.action for f in store.list_feedback("r1")) == ["deleted", "edited"]


def test_crucibles_own_comments_and_unknown_prs_are_ignored(client_for: Client, store: Store) -> None:
    publish(store)
    client = client_for(store)
    mine = oracle("pull_request_review_comment.created.2.json")
    other_pr = oracle("pull_request_review_comment.created.1.json")
    other_pr["pull_request"]["number"] = PR + 40
    post(client, "pull_request_review_comment", encode(mine), delivery="mine")
    post(client, "pull_request_review_comment", encode(other_pr), delivery="other")
    assert process_deliveries(store, own_logins=["codertocat"]) == 2
    assert store.list_feedback("r1") == []
    kept = ingest(store, "r1", "router", [comment_event(author="alice")], own_logins=["Codertocat"])
    assert [f.author for f in kept] == ["alice"]


def test_a_payload_missing_fields_is_accepted_then_skipped(client_for: Client, store: Store) -> None:
    publish(store)
    body = encode({"action": "created", "comment": {"id": 5}})
    assert post(client_for(store), "pull_request_review_comment", body).status_code == 202
    assert process_deliveries(store) == 1
    assert store.list_feedback("r1") == []
    assert store.pending_deliveries() == []


def test_postgresql_end_to_end(client_for: Client, postgres_url: str) -> None:
    with Store.open(postgres_url, upgrade=True) as store:
        publish(store)
        client = client_for(store)
        body = encode(oracle("pull_request_review.submitted.2.json"))
        assert post(client, "pull_request_review", body).status_code == 202
        assert post(client, "pull_request_review", body).json() == {"status": "duplicate"}
        assert post(client, "pull_request_review", body, signature=None).status_code == 401
        assert process_deliveries(store) == 1
        assert [f.source.value for f in store.list_feedback("r1")] == ["review"]


def _half_sent(url: str, declared: int = 1000) -> socket.socket:
    """A connection that sends headers and the start of a body, then nothing (a slow-loris client)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = (
        f"POST /webhooks/github HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: ping\r\nX-GitHub-Delivery: slow\r\nContent-Length: {declared}\r\n\r\n{{"
    )
    sock.sendall(head.encode())
    return sock


def test_a_body_that_never_completes_gets_408(client_for: Client, store: Store) -> None:
    # issue 11 §4: half-sent bodies were held open indefinitely.
    client = client_for(store, body_deadline_s=0.2)
    with _half_sent(str(client.base_url)) as sock:
        answer = sock.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 408"), answer


def test_bodies_read_at_once_are_bounded_and_a_signed_delivery_still_gets_an_answer(
    client_for: Client, store: Store
) -> None:
    client = client_for(store, max_reading=2, body_deadline_s=60)
    body = encode(oracle("pull_request_review.submitted.0.json"))
    slow = [_half_sent(str(client.base_url)) for _ in range(2)]
    try:
        # The two half-sent bodies hold both slots; the server has them once a third is refused.
        refused = post(client, "pull_request_review", body, delivery="d-busy")
        for sock in slow:
            sock.close()
        for _ in range(500):  # the server notices the disconnects asynchronously
            answered = post(client, "pull_request_review", body, delivery="d-ok").status_code
            if answered != 503:
                break
    finally:
        for sock in slow:
            sock.close()
    assert refused.status_code == 503 and "being received" in refused.json()["detail"]
    assert answered == 202, "slots freed by disconnected clients must be reused"


def _hold_the_slot(client: httpx.Client, body: bytes) -> socket.socket:
    """A half-sent body that holds the only ``max_reading`` slot, shown by a competing delivery's 503.

    The half-sent request may reach the server while the previous competing delivery is still being
    read (its bytes come on the client's kept-alive connection, which the server may read before it
    accepts the new one): then it is itself refused with 503 and holds nothing, and every competing
    delivery after it is accepted. That race, not the slot accounting, is why a second disconnect
    once looked as if its slot was not held; such a socket is replaced."""
    for _ in range(10):
        sock = _half_sent(str(client.base_url))
        for _ in range(200):
            if post(client, "pull_request_review", body, delivery="d-busy").status_code == 503:
                return sock  # the client posts one at a time: the slot is the half-sent body's
            if select.select([sock], [], [], 0)[0]:
                answer = sock.recv(4096).decode()
                assert answer.startswith("HTTP/1.1 503") and "being received" in answer, answer
                break
        sock.close()
    raise AssertionError("no half-sent body held the slot")


def test_a_client_that_disconnects_mid_body_leaves_no_traceback_and_frees_its_slot_once(
    client_for: Client, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # One slot: a 503 proves the server is reading the half-sent body, a 200 after the close proves it
    # has seen the disconnect; three rounds prove the slot is released exactly once each time (a
    # release too many would let the next round's competing deliveries through; one too few, the ping).
    # A long body deadline: on a loaded machine the half-sent body must still hold the slot (a 408 at
    # the default deadline would free it).
    client = client_for(store, max_reading=1, body_deadline_s=120)
    server_log = logging.getLogger("uvicorn")  # configured by the server: no propagation to the root
    server_log.addHandler(caplog.handler)
    try:
        body = encode(oracle("pull_request_review.submitted.0.json"))
        for attempt in range(3):
            with _hold_the_slot(client, body):
                pass
            for _ in range(500):  # the server notices the disconnect asynchronously
                if (status := post(client, "ping", b"{}", delivery=f"p-{attempt}").status_code) != 503:
                    break
            assert status == 200, attempt
        assert post(client, "pull_request_review", body, delivery="d-after").status_code == 202
    finally:
        server_log.removeHandler(caplog.handler)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
