"""The poller's reads over GitHub's REST API with httpx (``FeedbackReader``; issue 4 deliverable 2).

Why not PyGithub: its list objects cannot send ``If-None-Match``, and a 304 answer to a conditional
request is what makes polling free against the rate limit. Here every list is a fixed URL read with
the ETag of the previous answer, through one pooled ``httpx.Client`` (keep-alive: 150 reads a poll
over 50 repositories should not pay 150 TLS handshakes).

Behaviour the poller builds on:

- Reads are retried on 5xx and dropped connections (``attempts`` in all, backing off), never on a
  rate limit: ``ForgeRateLimited`` is raised at once with the wait GitHub asked for, so the poller
  can stop the whole poll (every repository shares the quota) and stretch its interval.
- ``rate_status()`` is the newest answer's ``x-ratelimit-*`` headers (a 304 carries them too).
- Credentials come from ``token_for(repo)`` per request (a token, or an App installation token
  that the caller refreshes); they are sent in ``Authorization`` only, never logged or raised.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from controller.forge.base import (
    CommentPage,
    FeedbackEvent,
    ForgeError,
    ForgeNotFound,
    ForgeRateLimited,
    PullPage,
    PullState,
    RateStatus,
    ReviewPage,
)
from controller.forge.github_json import (
    IssueCommentJson,
    PullJson,
    ReviewCommentJson,
    ReviewJson,
    issue_comment_event,
    next_link,
    review_comment_event,
    review_event,
)
from controller.forge.ratelimit import rate_limit_wait, rate_status, server_time

PER_PAGE = "100"  # the most a GitHub list page holds: fewer requests per poll
ATTEMPTS = 3
BACKOFF = 1.0  # seconds before the second attempt after a 5xx or a dropped connection; doubled after


@dataclass(frozen=True)
class _Answer:
    status: int
    data: Any
    headers: httpx.Headers


class GithubReader:
    """``FeedbackReader`` for GitHub, GitHub Enterprise and the local forge (``api_url`` as for
    ``GithubForge``). ``transport``, ``sleep`` and ``clock`` are seams for tests and benchmarks."""

    def __init__(
        self,
        api_url: str,
        token_for: Callable[[str], str],
        *,
        timeout: float = 15.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        attempts: int = ATTEMPTS,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._token_for = token_for
        self._sleep = sleep
        self._clock = clock
        self._attempts = max(1, attempts)
        self._client = httpx.Client(
            timeout=timeout,
            transport=transport,
            headers={
                "Accept": "application/vnd.github+json",
                "User-Agent": "crucible",
                "X-GitHub-Api-Version": "2022-11-28",
            },
        )
        # Owners should close(); a reader dropped unclosed still closes its pooled sockets.
        self._closer = weakref.finalize(self, self._client.close)
        self._lock = threading.Lock()
        self._rate: RateStatus | None = None
        self.billable = 0  # answers that were not 304: what the poll cost against the quota
        self.requests = 0

    def close(self) -> None:
        self._closer()

    # -- FeedbackReader ----------------------------------------------------------------------

    def list_pulls(self, full_name: str, *, etag: str | None, stop_before: str | None = None) -> PullPage:
        params = {"state": "all", "sort": "updated", "direction": "desc"}
        pages = self._pages(full_name, f"/repos/{full_name}/pulls", params, etag)
        first = next(pages)
        if first.status == 304:
            return PullPage((), etag, True)
        pulls = [_pull_state(item) for item in first.data]
        # Decide before asking for the next page (the iterator fetches it when advanced).
        while stop_before is None or not pulls or pulls[-1].updated_at >= stop_before:
            answer = next(pages, None)
            if answer is None:
                break
            pulls.extend(_pull_state(item) for item in answer.data)
        # Any update moves a PR to the top of the first page, so that page's ETag revalidates all.
        return PullPage(tuple(pulls), first.headers.get("etag"), False)

    def list_review_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        return self._comments(full_name, "pulls/comments", since, etag, review_comment_event)

    def list_issue_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        return self._comments(full_name, "issues/comments", since, etag, issue_comment_event)

    def list_reviews(self, full_name: str, number: int) -> ReviewPage:
        items: list[ReviewJson] = []
        clock: float | None = None
        for answer in self._pages(full_name, f"/repos/{full_name}/pulls/{number}/reviews", {}, None):
            clock = clock if clock is not None else server_time(answer.headers)
            items.extend(answer.data)
        events = tuple(review_event(full_name, number, i) for i in items if i.get("submitted_at"))
        return ReviewPage(events, clock)

    def rate_status(self) -> RateStatus | None:
        with self._lock:
            return self._rate

    # -- internals ---------------------------------------------------------------------------

    def _comments(
        self,
        full_name: str,
        path: str,
        since: str | None,
        etag: str | None,
        convert: Callable[[str, ReviewCommentJson], FeedbackEvent]
        | Callable[[str, IssueCommentJson], FeedbackEvent],
    ) -> CommentPage:
        params = {"sort": "updated", "direction": "asc"}
        if since is not None:
            params["since"] = since
        answers = list(self._pages(full_name, f"/repos/{full_name}/{path}", params, etag))
        if answers[0].status == 304:
            return CommentPage((), etag, True)
        events = tuple(convert(full_name, item) for a in answers for item in a.data)
        return CommentPage(events, answers[0].headers.get("etag") if len(answers) == 1 else None, False)

    def _pages(
        self, full_name: str, path: str, params: dict[str, str], etag: str | None
    ) -> Iterator[_Answer]:
        """The answers of a list, page by page (lazily: a caller may stop early); a 304 ends it."""
        _check_repo(full_name)
        url: str | None = f"{self.api_url}{path}"
        query: dict[str, str] | None = {**params, "per_page": PER_PAGE}
        headers = {"If-None-Match": etag} if etag else {}
        while url is not None:
            answer = self._get(full_name, url, query, headers)
            yield answer
            if answer.status == 304:
                return
            url, query, headers = next_link(answer.headers.get("link", "")), None, {}

    def _get(
        self, full_name: str, url: str, params: dict[str, str] | None, headers: dict[str, str]
    ) -> _Answer:
        what = f"GET {url.removeprefix(self.api_url)}"
        for attempt in range(1, self._attempts + 1):
            try:
                answer = self._once(full_name, url, params, headers)
            except httpx.TransportError as exc:
                if attempt == self._attempts:
                    raise ForgeError(f"{what}: no complete answer ({type(exc).__name__})") from exc
            else:
                if answer.status < 500 or attempt == self._attempts:
                    return self._checked(what, answer)
            self._sleep(BACKOFF * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(
        self, full_name: str, url: str, params: dict[str, str] | None, headers: dict[str, str]
    ) -> _Answer:
        auth = {"Authorization": f"token {self._token_for(full_name)}"}
        response = self._client.get(url, params=params, headers={**headers, **auth})
        status = rate_status(response.headers, self._clock())
        with self._lock:
            self.requests += 1
            if response.status_code != 304:
                self.billable += 1
            if status is not None:
                self._rate = status
        data = response.json() if response.status_code < 300 and response.content else None
        if response.status_code >= 400:
            data = _error_body(response)
        return _Answer(response.status_code, data, response.headers)

    def _checked(self, what: str, answer: _Answer) -> _Answer:
        if answer.status in (200, 304):
            if answer.status == 200 and not isinstance(answer.data, list):
                raise ForgeError(f"{what}: expected a JSON list, got {type(answer.data).__name__}")
            return answer
        message = str(answer.data.get("message", "")) if isinstance(answer.data, dict) else ""
        text = f"{what}: {answer.status} {message}".rstrip()
        wait = rate_limit_wait(answer.status, answer.headers, message, self._clock())
        if wait is not None:
            raise ForgeRateLimited(text, wait)
        if answer.status == 404:
            raise ForgeNotFound(text)
        raise ForgeError(text)


def _pull_state(item: PullJson) -> PullState:
    return PullState(
        number=int(item["number"]),
        state=str(item.get("state") or "open"),
        merged=item.get("merged_at") is not None,
        updated_at=str(item.get("updated_at") or ""),
        created_at=str(item.get("created_at") or ""),
    )


def _error_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _check_repo(full_name: str) -> None:
    owner, sep, name = full_name.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise ValueError(f"repository must be 'owner/name', got {full_name!r}")
