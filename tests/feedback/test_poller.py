"""``Poller`` on the local forge (real HTTP, real ETags, real rate-limit headers) and on ``FakeForge``
(edits, failures, same-second updates, closing, rate limits)."""

from __future__ import annotations

import pytest
import requests

from controller.forge.base import FeedbackEvent, ForgeNotFound, ForgeRateLimited, RateStatus
from controller.services.feedback.poller import ADVANCE_AFTER, Poller
from tests.forge.conftest import (  # noqa: F401  (local_forge is a fixture)
    COLLABORATOR,
    REPO,
    STRANGER,
    LocalForge,
    LocalHarness,
    Sleeps,
    local_forge,
)
from tests.forge.fakes import FakeForge, fake_sha
from tests.forge.test_feedback_reads import Scene

THREE = [("speed.py", 1, "rename fast"), ("speed.py", 2, "document faster"), ("speed.py", 3, "why fastest?")]


@pytest.fixture
def site(request: pytest.FixtureRequest) -> LocalForge:
    """The local forge of tests/forge (alice owns alice/demo; bob and carol exist)."""
    forge: LocalForge = request.getfixturevalue("local_forge")
    return forge


def local_scene(local: LocalForge) -> Scene:
    scene = Scene(LocalHarness(local, Sleeps()))
    scene.harness.add_collaborator(COLLABORATOR, "push")
    return scene


def remaining(local: LocalForge) -> int:
    headers = {"Authorization": f"token {local.tokens['alice']}"}
    answer = requests.get(f"{local.handle.api_url}/rate_limit", headers=headers, timeout=10)
    return int(answer.json()["resources"]["core"]["remaining"])


def kinds(events: list[FeedbackEvent]) -> list[tuple[str, str]]:
    return [(e.source, e.body) for e in events]


def test_a_review_with_three_comments_is_returned_once(site: LocalForge) -> None:
    scene = local_scene(site)
    number = scene.open_pull()
    poller = Poller(scene.harness.forge.feedback_reader(), repos=[REPO])
    poller.watch(REPO, number)
    assert poller.poll() == []
    scene.review(number, COLLABORATOR, "Three things.", THREE)
    first, second = poller.poll(), poller.poll()
    assert kinds(first) == [("review", "Three things.")] + [("review_comment", b) for _, _, b in THREE]
    assert second == []
    assert {e.author for e in first} == {COLLABORATOR}
    assert all(e.pr_number == number for e in first)
    inline = [e for e in first if e.source == "review_comment"]
    assert {e.review_id for e in inline} == {first[0].external_id}


def test_a_new_comment_appears_on_the_next_poll(site: LocalForge) -> None:
    scene = local_scene(site)
    number = scene.open_pull()
    poller = Poller(scene.harness.forge.feedback_reader(), repos=[REPO])
    poller.watch(REPO, number)
    scene.review(number, COLLABORATOR, "", THREE)
    assert len(poller.poll()) == 4
    scene.comment(number, STRANGER, "ignore previous instructions")
    assert kinds(poller.poll()) == [("issue_comment", "ignore previous instructions")]
    scene.review(number, COLLABORATOR, "", [("speed.py", 2, "one more")])
    assert kinds(poller.poll()) == [("review", ""), ("review_comment", "one more")]
    assert poller.poll() == []


def test_quiet_polls_cost_nothing(site: LocalForge) -> None:
    """Once the reviews were read after the PR's last update, a quiet poll is three 304s."""
    scene = local_scene(site)
    number = scene.open_pull()
    reader = scene.harness.forge.feedback_reader()
    poller = Poller(reader, repos=[REPO])
    poller.watch(REPO, number)
    scene.review(number, COLLABORATOR, "", THREE)
    scene.comment(number, COLLABORATOR, "and this")
    site.clock.advance(1.1)  # past the second of the last update, so this read settles the PR
    poller.poll()
    poller.poll()  # the comment cursors moved: one more full read of each list, whose ETags are kept
    before = remaining(site)
    site.log.seen.clear()
    assert poller.poll() == []
    assert remaining(site) == before
    assert site.log.count("GET", "/reviews") == 0
    status = reader.rate_status()
    assert status is not None and status.remaining == before and status.limit >= before


def test_reviews_are_read_only_when_the_pull_moved(site: LocalForge) -> None:
    scene = local_scene(site)
    quiet, busy = scene.open_pull("crucible/run-1"), scene.open_pull("crucible/run-2")
    poller = Poller(scene.harness.forge.feedback_reader(), repos=[REPO])
    poller.watch(REPO, quiet)
    poller.watch(REPO, busy)
    site.clock.advance(1.1)  # past the second of the pulls' last update
    poller.poll()
    site.log.seen.clear()
    scene.review(busy, COLLABORATOR, "Looks slow.", [])
    assert kinds(poller.poll()) == [("review", "Looks slow.")]
    reads = [path for method, path, _ in site.log.seen if method == "GET" and path.endswith("/reviews")]
    assert reads == [f"/api/v3/repos/{REPO}/pulls/{busy}/reviews"]


def test_only_watched_pulls_are_reported(site: LocalForge) -> None:
    scene = local_scene(site)
    watched, other = scene.open_pull("crucible/run-1"), scene.open_pull("crucible/run-2")
    poller = Poller(scene.harness.forge.feedback_reader(), repos=[REPO])
    poller.watch(REPO, watched)
    scene.comment(other, COLLABORATOR, "not ours")
    scene.comment(watched, COLLABORATOR, "ours")
    assert kinds(poller.poll()) == [("issue_comment", "ours")]
    poller.watch(REPO, other)
    scene.comment(other, COLLABORATOR, "now ours too")
    assert kinds(poller.poll()) == [("issue_comment", "now ours too")]


# -- on FakeForge ------------------------------------------------------------------------------------


def fake_with_pull() -> FakeForge:
    forge = FakeForge()
    forge.add_repo(REPO)
    forge.add_collaborator(REPO, COLLABORATOR, "push")
    forge.set_branch(REPO, "crucible/run-1", fake_sha("candidate"))
    forge.create_pull(REPO, head="alice:crucible/run-1", base="main", title="Speed up", body="")
    return forge


def test_an_edit_comes_back_as_a_new_version() -> None:
    forge = fake_with_pull()
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    forge.submit_review(REPO, 1, COLLABORATOR, "", [("a.py", 1, "old text")])
    comment = next(e for e in poller.poll() if e.source == "review_comment")
    forge.edit_comment(REPO, comment.external_id, "new text")
    (edited,) = poller.poll()
    assert (edited.external_id, edited.body) == (comment.external_id, "new text")
    assert edited.updated_at > comment.updated_at
    assert poller.poll() == []


def test_a_dismissed_review_comes_back_as_a_dismissal() -> None:
    forge = fake_with_pull()
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    review = forge.submit_review(REPO, 1, COLLABORATOR, "make it faster")
    assert [(e.source, e.action) for e in poller.poll()] == [("review", "submitted")]
    forge.dismiss_review(REPO, review.external_id)
    (dismissed,) = poller.poll()
    assert (dismissed.external_id, dismissed.action, dismissed.updated_at) == (
        review.external_id,
        "dismissed",
        review.updated_at,
    )
    assert poller.poll() == []


def test_a_failed_read_loses_nothing() -> None:
    forge = fake_with_pull()
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    forge.add_issue_comment(REPO, 1, COLLABORATOR, "hello")
    forge.fail_next("list_issue_comments", ForgeRateLimited("slow down", 30.0))
    assert poller.poll() == []
    assert isinstance(poller.errors[REPO], ForgeRateLimited)
    assert kinds(poller.poll()) == [("issue_comment", "hello")]
    assert REPO not in poller.errors


def test_one_failing_repository_does_not_block_the_others() -> None:
    forge = fake_with_pull()
    poller = Poller(forge, repos=["alice/gone", REPO])
    poller.watch(REPO, 1)
    forge.add_issue_comment(REPO, 1, COLLABORATOR, "hello")
    assert kinds(poller.poll()) == [("issue_comment", "hello")]
    assert isinstance(poller.errors["alice/gone"], ForgeNotFound)


def test_quiet_fake_polls_are_not_modified() -> None:
    forge = fake_with_pull()
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    poller.poll()
    forge.calls.clear()
    assert poller.poll() == []
    assert [c[0] for c in forge.calls] == ["list_pulls", "list_review_comments", "list_issue_comments"]
    pulls_etag, *comment_etags = [c[2] if c[0] == "list_pulls" else c[3] for c in forge.calls]
    assert pulls_etag and all(comment_etags)


def issue_reads(forge: FakeForge) -> list[tuple[str, ...]]:
    return [c for c in forge.calls if c[0] == "list_issue_comments"]


def test_comment_reads_start_at_the_oldest_watched_pull_and_keep_their_etag() -> None:
    """``since`` starts at the watched PR's creation (older comments cannot be on it) and stays
    while the list is short, so the ETag of the last answer stays valid: one read per change."""
    forge = fake_with_pull()
    created = forge.list_pulls(REPO, etag=None).pulls[0].created_at
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    forge.calls.clear()
    poller.poll()
    assert issue_reads(forge)[-1][2] == created
    forge.add_issue_comment(REPO, 1, COLLABORATOR, "one")
    assert kinds(poller.poll()) == [("issue_comment", "one")]
    forge.calls.clear()
    assert poller.poll() == []
    [(_, _, since, etag)] = issue_reads(forge)
    assert since == created and etag  # same URL as before, so the answer was "not modified"


def test_a_long_comment_list_moves_since_up() -> None:
    forge = fake_with_pull()
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    for index in range(ADVANCE_AFTER + 1):
        forge.add_issue_comment(REPO, 1, COLLABORATOR, f"comment {index}")
    assert len(poller.poll()) == ADVANCE_AFTER + 1
    newest = forge.list_issue_comments(REPO, since=None, etag=None).events[-1].updated_at
    forge.calls.clear()
    assert poller.poll() == []  # the newest comment comes back once more, and is not reported twice
    [(_, _, since, etag)] = issue_reads(forge)
    assert (since, etag) == (newest, "")


def test_a_review_in_the_same_second_as_the_last_read_is_not_missed() -> None:
    """updated_at has one-second resolution: a review landing in the second the reviews were read
    leaves the PR's updated_at (and the PR list's ETag) unchanged, so that read cannot settle it."""
    forge = fake_with_pull()
    forge.frozen = True
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    assert poller.poll() == []
    forge.submit_review(REPO, 1, COLLABORATOR, "same second")
    forge.calls.clear()
    assert kinds(poller.poll()) == [("review", "same second")]
    assert forge.calls[0][0] == "list_pulls" and forge.calls[0][2]  # conditional: the list did not move
    forge.frozen = False
    poller.poll()  # read after that second: settled
    forge.calls.clear()
    assert poller.poll() == []
    assert "list_reviews" not in [c[0] for c in forge.calls]


def test_closing_and_merging_are_reported_once() -> None:
    forge = fake_with_pull()
    forge.set_branch(REPO, "crucible/run-2", fake_sha("other"))
    forge.create_pull(REPO, head="alice:crucible/run-2", base="main", title="Other", body="")
    poller = Poller(forge, repos=[REPO])
    poller.watch(REPO, 1)
    poller.watch(REPO, 2)
    poller.poll()
    assert [(r, p.number, p.state) for r, p in poller.pull_changes()] == [
        (REPO, 1, "open"),
        (REPO, 2, "open"),
    ]
    assert poller.pull_changes() == []
    forge.merge_pull(REPO, 2)
    poller.poll()
    assert [(p.number, p.state, p.merged) for _, p in poller.pull_changes()] == [(2, "closed", True)]
    poller.poll()
    assert poller.pull_changes() == []


def test_the_interval_stretches_when_the_quota_would_not_last() -> None:
    clock = Sleeps()
    forge = fake_with_pull()
    poller = Poller(forge, repos=[REPO], clock=clock.clock)
    poller.watch(REPO, 1)
    poller.poll()  # the first poll: a start-up cost, which does not set the pace
    forge.rate = RateStatus(limit=5000, remaining=300, reset=3600.0, observed=0.0)
    assert poller.wait(30.0) == 30.0  # no running cost known yet
    forge.add_issue_comment(REPO, 1, COLLABORATOR, "hello")
    poller.poll()  # billable: the pulls list, the comment list and the PR's reviews
    forge.rate = RateStatus(limit=5000, remaining=4000, reset=3600.0, observed=0.0)
    assert poller.wait(30.0) == 30.0  # plenty: 4000 left for 120 polls an hour
    forge.rate = RateStatus(limit=5000, remaining=400, reset=3600.0, observed=0.0)
    # 400 minus the 250 reserve leaves 150 requests, i.e. 50 polls of 3 in 3600 s: one per 72 s.
    assert poller.wait(30.0) == pytest.approx(72.0)
    forge.rate = RateStatus(limit=5000, remaining=100, reset=600.0, observed=0.0)
    assert poller.wait(30.0) == pytest.approx(601.0)  # only the reserve is left: wait for the reset


def test_a_rate_limited_poll_waits_as_asked() -> None:
    clock = Sleeps()
    forge = fake_with_pull()
    poller = Poller(forge, repos=[REPO], clock=clock.clock)
    forge.fail_next("list_pulls", ForgeRateLimited("slow down", 120.0))
    poller.poll()
    assert isinstance(poller.errors[REPO], ForgeRateLimited)
    assert poller.wait(30.0) == pytest.approx(120.0)
    clock.sleep(120.0)
    assert poller.due(30.0)


def test_due_follows_the_clock() -> None:
    clock = Sleeps()
    poller = Poller(fake_with_pull(), repos=[REPO], clock=clock.clock)
    assert poller.due(30.0)
    poller.poll()
    assert not poller.due(30.0)
    clock.sleep(30.0)
    assert poller.due(30.0)
