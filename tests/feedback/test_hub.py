"""``FeedbackHub``, the service-wide intake, on the local forge: many runs watching PRs of one repository
cost the polling of one, and what arrives (polled or delivered by webhook) reaches only the run whose PR
it is about.

Requests are counted at the forge (the request log in front of its app), not inside crucible.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from controller.domain.enums import EventKind
from controller.services.feedback.hub import FeedbackHub
from controller.store import PullRecord, Store
from tests.forge.conftest import (  # noqa: F401  (local_forge is a fixture)
    COLLABORATOR,
    REPO,
    LocalForge,
    LocalHarness,
    Sleeps,
    local_forge,
)
from tests.forge.test_feedback_reads import Scene
from tests.support import component, new_run

INTERVAL = 30.0
POLL_PATHS = ("/pulls", "/pulls/comments", "/issues/comments")


@pytest.fixture
def site(request: pytest.FixtureRequest) -> LocalForge:
    """The local forge of tests/forge (alice owns alice/demo; bob and carol exist)."""
    forge: LocalForge = request.getfixturevalue("local_forge")
    return forge


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """One SQLite file: the shared ``store`` fixture (``tests/support``) over it, not over both backends."""
    return f"sqlite:///{tmp_path / 'crucible.db'}"


def _publish(store: Store, run_id: str, number: int) -> None:
    """A run that published PR ``number`` of REPO (what the hub routes by)."""
    store.create_run(new_run(run_id))
    store.add_component(component(run_id=run_id, name="app"))
    store.save_pull(
        PullRecord(
            run_id=run_id,
            component="app",
            repo=REPO,
            number=number,
            url=f"http://forge/{REPO}/pull/{number}",
            branch=f"crucible/{run_id}",
            head_sha="a" * 40,
            pushed_sha="a" * 40,
            base_sha="b" * 40,
            draft=True,
            state="open",
            paused=False,
        )
    )


def _poll_requests(site: LocalForge) -> int:
    """Reads of the three repository-wide lists (what polling a repository costs, however many PRs
    are watched; a PR's reviews are read only when that PR moved, or in its update's second)."""
    return sum(1 for method, path, _ in site.log.seen if method == "GET" and path.endswith(POLL_PATHS))


def _review_reads(site: LocalForge) -> int:
    return sum(1 for method, path, _ in site.log.seen if method == "GET" and path.endswith("/reviews"))


def _steady_cost(site: LocalForge, store: Store, runs: int, prefix: str) -> tuple[int, int]:
    """(requests of the first poll, requests of the next three polls) with ``runs`` runs watching
    one PR each of REPO through one hub and one forge client."""
    scene = Scene(LocalHarness(site, Sleeps()))
    clock = Sleeps()
    hub = FeedbackHub(store, clock=clock.clock)
    client = site.forge()
    for index in range(runs):
        number = scene.open_pull(f"crucible/{prefix}-{index}")
        run_id = f"{prefix}-{index}"
        _publish(store, run_id, number)
        hub.subscribe(run_id, client, interval_s=INTERVAL, wakeup=threading.Event())
    site.log.seen.clear()
    assert hub.pump()
    first = _poll_requests(site)
    assert _review_reads(site) == runs, "each watched PR's reviews are read once when first seen"
    site.log.seen.clear()
    for _ in range(3):
        clock.sleep(INTERVAL)
        assert hub.next_poll_in() == 0
        hub.pump()
    return first, _poll_requests(site)


def test_ten_runs_on_one_repository_cost_the_polling_of_one(site: LocalForge, store: Store) -> None:
    one_first, one_steady = _steady_cost(site, store, 1, "solo")
    ten_first, ten_steady = _steady_cost(site, store, 10, "many")

    assert one_first == ten_first == len(POLL_PATHS), "each list is read once per poll, not once per run"
    assert one_steady == ten_steady == 3 * len(POLL_PATHS), "three quiet polls: three 304s per list"


def test_a_poll_reaches_only_the_run_whose_pr_it_is_about(site: LocalForge, store: Store) -> None:
    scene = Scene(LocalHarness(site, Sleeps()))
    scene.harness.add_collaborator(COLLABORATOR, "push")
    clock = Sleeps()
    hub = FeedbackHub(store, clock=clock.clock)
    client = site.forge()
    wakeups: dict[str, threading.Event] = {}
    numbers: dict[str, int] = {}
    for index in range(3):
        run_id = f"r{index}"
        numbers[run_id] = scene.open_pull(f"crucible/{run_id}")
        _publish(store, run_id, numbers[run_id])
        wakeups[run_id] = threading.Event()
        hub.subscribe(run_id, client, interval_s=INTERVAL, wakeup=wakeups[run_id])
    hub.pump()
    for event in wakeups.values():
        event.clear()

    scene.comment(numbers["r1"], COLLABORATOR, "please keep it stable")
    clock.sleep(INTERVAL)
    hub.pump()

    assert [run for run, event in wakeups.items() if event.is_set()] == ["r1"]
    assert [i.body for i in store.list_feedback("r1")] == ["please keep it stable"]
    assert store.list_feedback("r0") == [] and store.list_feedback("r2") == []

    hub.unsubscribe("r1")
    scene.comment(numbers["r1"], COLLABORATOR, "one more")
    clock.sleep(INTERVAL)
    site.log.seen.clear()
    hub.pump()
    assert len(store.list_feedback("r1")) == 1, "an unsubscribed run's PR is no longer reported"
    assert _poll_requests(site) == len(POLL_PATHS), "the others are still polled"


def test_a_webhook_delivery_reaches_only_the_run_whose_pr_it_is_about(store: Store) -> None:
    """Deliveries come in at the service's one endpoint (stored by it); the hub routes them by PR."""
    hub = FeedbackHub(store)
    wakeups = {run: threading.Event() for run in ("r0", "r1")}
    for index, run in enumerate(wakeups):
        _publish(store, run, 40 + index)
    payload = {
        "action": "created",
        "repository": {"full_name": REPO},
        "issue": {
            "number": 41,
            "pull_request": {"url": f"https://api.github.com/repos/{REPO}/pulls/41"},
        },
        "comment": {
            "id": 9001,
            "body": "webhook: rename it",
            "user": {"login": "bob", "type": "User"},
            "author_association": "COLLABORATOR",
            "updated_at": "2026-01-01T00:00:00Z",
            "html_url": f"https://github.com/{REPO}/pull/41#issuecomment-9001",
        },
    }
    assert store.save_delivery("d-1", "issue_comment", "created", payload)
    hub.wake()  # what the endpoint calls after storing; without a hub thread it wakes the runs
    assert all(not event.is_set() for event in wakeups.values()), "nobody is subscribed yet"
    for run, event in wakeups.items():
        hub.subscribe(run, object(), interval_s=INTERVAL, wakeup=event, poll=False)  # type: ignore[arg-type]
    hub.pump()

    assert wakeups["r1"].is_set() and not wakeups["r0"].is_set()
    assert [i.body for i in store.list_feedback("r1")] == ["webhook: rename it"]
    assert store.list_feedback("r0") == []
    kinds = [e.kind for e in store.list_events("r1")]
    assert EventKind.FEEDBACK_RECEIVED in kinds
    assert store.pending_deliveries() == []


def test_the_hub_thread_pumps_on_a_wake(store: Store) -> None:
    hub = FeedbackHub(store)
    _publish(store, "r1", 41)
    woken = threading.Event()
    hub.subscribe("r1", object(), interval_s=INTERVAL, wakeup=woken, poll=False)  # type: ignore[arg-type]
    hub.start()
    try:
        payload = {
            "action": "closed",
            "repository": {"full_name": REPO},
            "pull_request": {"number": 41, "state": "closed", "merged": False},
            "number": 41,
        }
        assert store.save_delivery("d-close", "pull_request", "closed", payload)
        hub.wake()
        assert woken.wait(30), "the hub thread processed the delivery and woke the run"
        assert store.list_pulls("r1")[0].state == "closed"
    finally:
        hub.stop()


def test_an_access_webhook_reaches_every_listening_trust_policy(store: Store) -> None:
    # issue 11 §3: a member/repository delivery drops the cached permissions of the runs watching.
    hub = FeedbackHub(store)
    heard: list[str] = []
    hub.listen_access(heard.append)
    assert store.save_delivery(
        "d-m", "member", "edited", {"action": "edited", "repository": {"full_name": REPO}}
    )
    hub.pump()
    hub.unlisten_access(heard.append)
    assert store.save_delivery(
        "d-r", "repository", "renamed", {"action": "renamed", "repository": {"full_name": REPO}}
    )
    hub.pump()
    assert heard == [REPO]
