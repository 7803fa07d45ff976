"""Shared pieces of the webhook tests: the oracle payloads, a store with one published PR, signed
posts, and a counter of wake-ups."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from controller.forge.base import FeedbackEvent
from controller.forge.webhooks import signature_for
from controller.store import PullRecord, Store
from tests.support import component, new_run
from tests.testdata import WEBHOOKS

ORACLES = WEBHOOKS
ORACLE_FILES = sorted(ORACLES.glob("*.json"))
assert len(ORACLE_FILES) >= 60, f"GitHub's webhook examples are missing from {ORACLES}"
SECRET = "test-secret"
Client = Callable[..., httpx.Client]  # the ``client_for`` fixture (conftest.py)
REPO = "Codertocat/Hello-World"  # the repository and PR (#2) of GitHub's example payloads
PR = 2


def oracle(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ORACLES / name).read_text())
    return data


def event_of(path: Path) -> str:
    """``issue_comment.created.0.json`` -> ``issue_comment`` (the X-GitHub-Event header)."""
    return path.name.split(".")[0]


def on_pull_request(payload: dict[str, Any]) -> dict[str, Any]:
    """An issue_comment payload as GitHub sends it for a PR (it adds ``issue.pull_request``)."""
    issue = dict(payload["issue"])
    url = f"https://github.com/{REPO}/pull/{issue['number']}"
    issue["pull_request"] = {
        "url": f"https://api.github.com/repos/{REPO}/pulls/{issue['number']}",
        "html_url": url,
        "diff_url": url + ".diff",
        "patch_url": url + ".patch",
        "merged_at": None,
    }
    return {**payload, "issue": issue}


def publish(store: Store, run_id: str = "r1", number: int = PR) -> PullRecord:
    """A run with one component whose draft PR is REPO#number."""
    store.create_run(new_run(run_id))
    store.add_component(component(run_id=run_id))
    pull = PullRecord(
        run_id=run_id,
        component="router",
        repo=REPO,
        number=number,
        url=f"https://github.com/{REPO}/pull/{number}",
        branch=f"crucible/{run_id}",
        head_sha="a" * 40,
        pushed_sha="a" * 40,
        base_sha="b" * 40,
    )
    store.save_pull(pull)
    return pull


def comment_event(**changes: Any) -> FeedbackEvent:
    fields: dict[str, Any] = dict(
        repo=REPO,
        pr_number=PR,
        source="review_comment",
        external_id=1001,
        review_id=77,
        author="alice",
        author_type="User",
        association="OWNER",
        body="use a smaller buffer",
        path="src/a.py",
        line=3,
        action="created",
        updated_at="2026-01-01T00:00:00Z",
        url="https://github.com/x/y/pull/2#discussion_r1001",
    )
    fields.update(changes)
    return FeedbackEvent(**fields)


class Wakeups:
    """Counts wake-ups. They run as a background task *after* the answer went out, so a test waits
    for them (bounded) instead of reading the count right after the response."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def __call__(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def settled(self, expected: int, timeout: float = 10.0) -> int:
        """The count once it reached ``expected`` (or after ``timeout``), plus a beat for extras."""
        with self._changed:
            self._changed.wait_for(lambda: self.count >= expected, timeout)
            self._changed.wait(0.2)
            return self.count


def post(
    client: httpx.Client,
    event: str,
    body: bytes,
    *,
    delivery: str = "d-1",
    signature: str | None = "sign",
) -> httpx.Response:
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json"}
    if signature == "sign":
        signature = signature_for(SECRET.encode(), body)
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return client.post("/webhooks/github", content=body, headers=headers)


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()
