"""Bounded worker input (issue 21): a bundle upload is streamed to disk under the cap, refused with 413 at
the first chunk past it (never read whole into memory), its refusal recorded after the answer (a client
that hangs up changes nothing) and nothing of the token taken in between; a token has one upload in
flight at a time; a bundle adding a symlink that leaves the repository, or a submodule link, is refused
as on the local path."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from controller.domain.enums import Outcome, Reason
from controller.domain.errors import ConflictError, UnauthenticatedError
from controller.store import Store, TurnDecision
from controller.store.http_ledger import HttpLedger
from tests.conftest import git
from tests.support import wait_until
from tests.worker.conftest import Controller
from tests.worker.test_bundles import _refused, commit, keep, seeded, send, start_turn, worker_clone

__all__ = ["seeded"]  # the fixture, shared with the bundle tests


def _commit_symlink(clone: Path, path: str, target: str) -> str:
    (clone / path).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, clone / path)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", f"link {path}")
    return git(clone, "rev-parse", "HEAD")


def test_a_symlink_leaving_the_repository_is_refused(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    outside = "/".join([".."] * 3 + ["etc"])  # spelled out of parts: the self-containment scan reads literals
    head = _commit_symlink(clone, "src/secrets", outside)
    start_turn(controller)
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    _refused(controller, answer, token, f"src/secrets: a symlink to '{outside}' leaves the repository")
    assert git(repo, "for-each-ref", "refs/crucible/r1/worker") == ""


def test_a_symlink_inside_the_repository_is_accepted(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, _repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    head = _commit_symlink(clone, "src/b.py", "a.py")
    start_turn(controller)
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    assert answer.status_code == 200, answer.text


def test_a_submodule_link_is_refused(seeded: tuple[Controller, str, Path], tmp_path: Path) -> None:
    controller, token, _repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    git(clone, "update-index", "--add", "--cacheinfo", f"160000,{start},src/vendored")
    git(clone, "commit", "-q", "-m", "a gitlink")
    head = git(clone, "rev-parse", "HEAD")
    start_turn(controller)
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    _refused(controller, answer, token, "src/vendored: a submodule link (gitlink)")


def _chunks(total: int, sent: list[int], gate: threading.Event | None = None) -> Iterator[bytes]:
    chunk = b"\0" * (1 << 20)
    while sum(sent) < total:
        if gate is not None:
            gate.wait()
        sent.append(len(chunk))
        yield chunk


def _revoked(controller: Controller, token: str) -> bool:
    with controller.client(token) as http:
        return http.get("/api/worker/runs/r1/ledger/run").status_code == 401


def _refusal_recorded(controller: Controller, token: str) -> None:
    """The 413 is answered first; the turn's ``policy_violation`` and the revocation follow it."""
    wait_until(lambda: _revoked(controller, token), "the token revoked after the 413")
    turn = controller.store.get_turn("r1", 1)
    assert (turn.outcome, turn.reason) == (Outcome.REJECTED, Reason.POLICY_VIOLATION)
    assert "larger than" in (turn.detail or "")
    wait_until(
        lambda: not list(controller.settings.home.rglob("upload-*.bundle")), "the partial upload removed"
    )


def test_an_oversized_upload_is_refused_while_it_is_read(seeded: tuple[Controller, str, Path]) -> None:
    """The cap is 8 MiB here; the client sends 64 MiB without a Content-Length. The controller stops
    reading at the cap (uvicorn discards the rest), answers 413, then records the refusal, revokes
    the token and keeps no file of it."""
    controller, token, _repo = seeded
    controller.remote.max_bundle_bytes = 8 << 20
    start_turn(controller)
    sent: list[int] = []
    with controller.client(token) as http:
        try:
            answer = http.post(
                "/api/worker/runs/r1/bundle", params={"turn": 1}, content=_chunks(64 << 20, sent)
            )
            status, detail = answer.status_code, answer.json()["detail"]
        except httpx.TransportError:  # the server closed the connection while we still sent
            status, detail = 413, "closed"
    assert status == 413, detail
    _refusal_recorded(controller, token)


def test_a_declared_oversized_upload_is_refused_before_it_is_read(
    seeded: tuple[Controller, str, Path],
) -> None:
    controller, token, _repo = seeded
    controller.remote.max_bundle_bytes = 1024
    start_turn(controller)
    with controller.client(token) as http:
        answer = http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=b"x" * 2048)
    assert answer.status_code == 413, answer.text
    assert answer.json() == {
        "detail": "policy_violation: bundle refused: the bundle is larger than 1024 bytes",
        "kind": "too_large",
    }
    _refusal_recorded(controller, token)


class _HeldStore:
    """The run's store, whose ``decide_turn`` of a refusal (the 413's record) waits for ``gate``: the
    time between a 413 and its record, held open for as long as the test needs. Any other decision
    goes through at once, so one that slipped in would be taken (and the test fail)."""

    def __init__(self, store: Store, gate: threading.Event) -> None:
        self._store, self._gate = store, gate

    def decide_turn(self, run_id: str, turn: int, decision: TurnDecision, **kwargs: Any) -> Any:
        if decision.reason is Reason.POLICY_VIOLATION:
            assert self._gate.wait(30), "the test never let the refusal be recorded"
        return self._store.decide_turn(run_id, turn, decision, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_client_that_hangs_up_after_the_413_still_has_its_refusal_recorded(
    seeded: tuple[Controller, str, Path],
) -> None:
    """The refusal is recorded after the 413 is sent, whether or not the client is still there: here
    it reads the status line and closes the socket, as a hostile sender would, and only then is the
    record let through."""
    controller, token, _repo = seeded
    controller.remote.max_bundle_bytes = 1024
    start_turn(controller)
    gate = threading.Event()
    controller.remote.store = cast(Store, _HeldStore(controller.store, gate))
    host, port = httpx.URL(controller.url).host, httpx.URL(controller.url).port
    assert port is not None
    with socket.create_connection((host, port)) as sock:
        sock.sendall(
            b"POST /api/worker/runs/r1/bundle?turn=1 HTTP/1.1\r\nHost: controller\r\n"
            + f"Authorization: Bearer {token}\r\n".encode()
            + b"Content-Length: 4096\r\n\r\n"
        )
        assert sock.recv(12) == b"HTTP/1.1 413"
    assert controller.store.get_turn("r1", 1).outcome is None, "the record waits for the gate"
    gate.set()
    _refusal_recorded(controller, token)


def test_nothing_of_the_token_is_taken_between_the_413_and_the_revocation(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    """The refusal is recorded after the 413 is sent. Until then the token is good for nothing (409),
    after it revoked (401): neither a second upload nor a decision keeping an earlier bundle's commit
    slips in between, so the turn is the upload's ``policy_violation`` and nothing is kept."""
    controller, token, _repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    head = commit(clone, "src/a.py", "x = 2\n")
    start_turn(controller)
    proved = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    assert proved.status_code == 200, proved.text  # a verified bundle: its head could be kept
    gate = threading.Event()
    controller.remote.store = cast(Store, _HeldStore(controller.store, gate))
    controller.remote.max_bundle_bytes = 1024
    try:
        with controller.client(token) as http:
            answer = http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=b"x" * 2048)
            assert answer.status_code == 413, answer.text
            again = http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=b"x")
            assert again.status_code in (409, 401), again.text
        with HttpLedger(controller.url, token) as ledger, pytest.raises(ConflictError):
            keep(ledger, head)  # 409 from the token, before the turn (still undecided) is looked at
        assert controller.store.get_turn("r1", 1).outcome is None, "the refusal is held"
    finally:
        gate.set()
    _refusal_recorded(controller, token)
    assert controller.store.get_run("r1").champion_turn is None
    with HttpLedger(controller.url, token) as ledger, pytest.raises(UnauthenticatedError):
        keep(ledger, head)


def test_one_upload_at_a_time_per_token(seeded: tuple[Controller, str, Path]) -> None:
    controller, token, _repo = seeded
    start_turn(controller)
    gate, sent = threading.Event(), [0]
    first: dict[str, int] = {}

    def slow_upload() -> None:
        with controller.client(token) as http:
            answer = http.post(
                "/api/worker/runs/r1/bundle", params={"turn": 1}, content=_chunks(2 << 20, sent, gate)
            )
            first["status"] = answer.status_code

    thread = threading.Thread(target=slow_upload)
    thread.start()
    try:
        while not list(controller.settings.home.rglob("upload-*.bundle")):  # the first is being read
            assert thread.is_alive(), first
            threading.Event().wait(0.02)
        with controller.client(token) as http:
            second = http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=b"junk")
        assert second.status_code == 409 and "one at a time" in second.json()["detail"]
    finally:
        gate.set()
        thread.join()
    assert first["status"] == 403, "the first upload (junk) is then refused as not a bundle"
