"""``GithubReader`` (httpx) beyond the shared reader contract: retries, rate limits, paging, headers.

Failures come from the local forge's fault injection (real HTTP); paging and GitHub-only header
shapes from the scripted server of ``scripted.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.forge.base import ForgeError, ForgeNotFound, ForgeRateLimited
from controller.forge.polling import GithubReader
from controller.localforge.faults import Fault
from tests.forge.conftest import REPO, LocalForge, Sleeps
from tests.forge.scripted import Answer, ScriptedServer, scripted_server

TOKEN = "poll-secret-token-123"
PULLS = f"/api/v3/repos/{REPO}/pulls"


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    with scripted_server() as server:
        yield server


def reader_for(url: str, sleeps: Sleeps, token: str = TOKEN) -> GithubReader:
    return GithubReader(
        f"{url}/api/v3", lambda repo: token, sleep=sleeps.sleep, clock=lambda: 1_700_000_000.0
    )


def pull(number: int, updated: str, state: str = "open", merged: bool = False) -> dict[str, object]:
    return {
        "number": number,
        "state": state,
        "updated_at": updated,
        "merged_at": "2024-01-01T00:00:00Z" if merged else None,
    }


def test_a_5xx_and_a_dropped_connection_are_retried(local_forge: LocalForge, sleeps: Sleeps) -> None:
    reader = local_forge.forge(sleeps).feedback_reader()
    plan = local_forge.handle.faults
    plan.add(Fault("GET", r"/pulls$", "error_before", status=502))
    plan.add(Fault("GET", r"/pulls$", "drop_before"))
    page = reader.list_pulls(REPO, etag=None)
    assert page.pulls == () and not page.not_modified and page.etag
    assert len(sleeps.calls) == 2 and sleeps.calls[1] > sleeps.calls[0]


def test_a_rate_limit_is_raised_at_once_with_its_wait(local_forge: LocalForge, sleeps: Sleeps) -> None:
    reader = local_forge.forge(sleeps).feedback_reader()
    local_forge.handle.faults.add(Fault("GET", r"/issues/comments$", "rate_limit", retry_after=42))
    with pytest.raises(ForgeRateLimited) as caught:
        reader.list_issue_comments(REPO, since=None, etag=None)
    assert caught.value.retry_after == 42
    assert sleeps.calls == []  # the poller decides how long to wait, not the reader


def test_rate_status_follows_the_answers(local_forge: LocalForge, sleeps: Sleeps) -> None:
    reader = local_forge.forge(sleeps).feedback_reader()
    assert reader.rate_status() is None
    first = reader.list_pulls(REPO, etag=None)
    after_first = reader.rate_status()
    reader.list_pulls(REPO, etag=first.etag)  # a 304: free, and it still reports the quota
    after_304 = reader.rate_status()
    assert after_first is not None and after_304 is not None
    assert after_304.remaining == after_first.remaining < after_first.limit
    assert after_first.reset >= after_first.observed
    assert (reader.requests, reader.billable) == (2, 1)


def test_errors_name_the_request_but_never_the_token(scripted: ScriptedServer, sleeps: Sleeps) -> None:
    scripted.answer("GET", PULLS, Answer.json(500, {"message": "boom"}))
    scripted.answer(
        "GET", f"/api/v3/repos/{REPO}/pulls/7/reviews", Answer.json(404, {"message": "Not Found"})
    )
    reader = reader_for(scripted.url, sleeps)
    with pytest.raises(ForgeError) as caught:
        reader.list_pulls(REPO, etag=None)
    assert "500" in str(caught.value) and "/pulls" in str(caught.value) and TOKEN not in str(caught.value)
    assert len(scripted.seen("GET", PULLS)) == 3  # tried three times in all
    with pytest.raises(ForgeNotFound):
        reader.list_reviews(REPO, 7)
    assert all(r.headers["authorization"] == f"token {TOKEN}" for r in scripted.requests)


def test_pulls_pages_stop_below_the_previous_newest(scripted: ScriptedServer, sleeps: Sleeps) -> None:
    """Sorted by update, newest first: once a page ends below what the previous answer's newest
    update was, nothing further down can have changed, so the next page is not read."""
    next_page = f'<{scripted.url}{PULLS}?page=2>; rel="next"'
    third_page = f'<{scripted.url}{PULLS}?page=3>; rel="next"'
    scripted.answer(
        "GET",
        PULLS,
        Answer.json(
            200,
            [pull(9, "2024-05-03T00:00:00Z"), pull(8, "2024-05-02T00:00:00Z")],
            ETag='"p1"',
            Link=next_page,
        ),
        Answer.json(200, [pull(7, "2024-04-01T00:00:00Z", "closed", True)], Link=third_page),
        Answer.json(200, [pull(6, "2024-01-01T00:00:00Z")]),
    )
    reader = reader_for(scripted.url, sleeps)
    page = reader.list_pulls(REPO, etag=None, stop_before="2024-05-01T00:00:00Z")
    assert [p.number for p in page.pulls] == [9, 8, 7]  # page 2 still needed (8 was newer); not page 3
    assert page.pulls[2].state == "closed" and page.pulls[2].merged
    assert page.etag == '"p1"'  # the first page's ETag revalidates the whole list
    assert len(scripted.seen("GET", PULLS)) == 2
    query = scripted.seen("GET", PULLS)[0].query
    assert "state=all" in query and "sort=updated" in query and "direction=desc" in query


def test_a_bad_repository_name_is_refused_before_any_request(
    scripted: ScriptedServer, sleeps: Sleeps
) -> None:
    reader = reader_for(scripted.url, sleeps)
    with pytest.raises(ValueError, match="owner/name"):
        reader.list_pulls("no-slash", etag=None)
    assert scripted.requests == []


def test_an_answer_that_is_not_a_list_is_an_error(scripted: ScriptedServer, sleeps: Sleeps) -> None:
    scripted.answer("GET", f"/api/v3/repos/{REPO}/issues/comments", Answer.json(200, {"message": "odd"}))
    with pytest.raises(ForgeError, match="expected a JSON list"):
        reader_for(scripted.url, sleeps).list_issue_comments(REPO, since=None, etag=None)


def test_reviews_skip_pending_ones_and_mark_dismissals(scripted: ScriptedServer, sleeps: Sleeps) -> None:
    def review(review_id: int, state: str, submitted: str | None) -> dict[str, object]:
        user = {"login": "bob", "type": "User"}
        return {"id": review_id, "state": state, "submitted_at": submitted, "body": "b", "user": user}

    reviews = [
        review(1, "COMMENTED", "2024-05-01T00:00:00Z"),
        review(2, "DISMISSED", "2024-05-02T00:00:00Z"),
        review(3, "PENDING", None),  # only its author sees it, and it is not feedback yet
    ]
    path = f"/api/v3/repos/{REPO}/pulls/4/reviews"
    scripted.answer("GET", path, Answer.json(200, reviews))
    page = reader_for(scripted.url, sleeps).list_reviews(REPO, 4)
    assert [(e.external_id, e.action, e.updated_at) for e in page.events] == [
        (1, "submitted", "2024-05-01T00:00:00Z"),
        (2, "dismissed", "2024-05-02T00:00:00Z"),
    ]
    assert page.server_time is not None  # the server's Date
