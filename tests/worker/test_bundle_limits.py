"""Bounded worker input (issue 21): a bundle upload is streamed to disk under the cap, refused with 413 at
the first chunk past it (never read whole into memory); a token has one upload in flight at a time; a
bundle adding a symlink that leaves the repository, or a submodule link, is refused as on the local path."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx

from controller.domain.enums import Outcome, Reason
from tests.conftest import git
from tests.worker.conftest import Controller
from tests.worker.test_bundles import _refused, seeded, send, start_turn, worker_clone

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


def test_an_oversized_upload_is_refused_while_it_is_read(seeded: tuple[Controller, str, Path]) -> None:
    """The cap is 8 MiB here; the client sends 64 MiB without a Content-Length. The controller stops
    reading at the cap (uvicorn discards the rest), answers 413 and keeps no file of it."""
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
    turn = controller.store.get_turn("r1", 1)
    assert (turn.outcome, turn.reason) == (Outcome.REJECTED, Reason.POLICY_VIOLATION)
    scratch = list(controller.settings.home.rglob("upload-*.bundle"))
    assert scratch == [], "the partial upload is removed"


def test_a_declared_oversized_upload_is_refused_before_it_is_read(
    seeded: tuple[Controller, str, Path],
) -> None:
    controller, token, _repo = seeded
    controller.remote.max_bundle_bytes = 1024
    start_turn(controller)
    with controller.client(token) as http:
        answer = http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=b"x" * 2048)
    assert answer.status_code == 413, answer.text
    assert "larger than 1024 bytes" in answer.json()["detail"]


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
