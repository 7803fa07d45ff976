"""The feedback poller: the safety net under webhooks (DESIGN §7 "Feedback sources", issue 4).

GitHub never retries a failed webhook delivery, and a laptop is usually unreachable from GitHub,
so feedback must also be *read*. Reading cheaply is the point of this module: per repository it
asks two fixed, repository-wide lists (review comments and conversation comments, oldest update
first, ``since`` the newest ``updated_at`` already seen) with the ETag of the previous answer, so a
quiet repository answers 304, which costs no rate limit. Reviews have no repository-wide list, so
they are read per watched pull request.

Only feedback on watched pull requests is returned: the conversation-comment list also holds
comments on plain issues, which the forge cannot tell apart without a call per issue, and the PR
numbers crucible published are exactly the ones it cares about. Each version of an item is
returned once (by source, id and ``updated_at``, so an edit comes back as a new version); a version
read while its PR was not watched counts as seen, so ``watch`` reports what comes after it. State
is in memory; the store de-duplicates durably, together with what webhooks delivered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from controller.forge.base import CommentPage, FeedbackEvent, Forge, ForgeError, ForgeRateLimited

SeenKey = tuple[str, int, str]  # (source, external_id, updated_at)


@dataclass
class _Cursor:
    """Where one repository-wide list was left: the ``since`` to ask and the ETag to send."""

    since: str | None = None
    etag: str | None = None

    def advance(self, page: CommentPage) -> None:
        if page.not_modified:
            return
        self.etag = page.etag
        newest = max((e.updated_at for e in page.events), default=None)
        if newest is not None and (self.since is None or newest > self.since):
            self.since = newest


@dataclass
class _RepoState:
    review_comments: _Cursor
    issue_comments: _Cursor
    watched: set[int]


class Poller:
    """``poll()`` -> feedback on watched PRs not returned before; see the module docstring.

    A repository whose read fails is skipped for this poll (its cursors stay put, so nothing is
    lost) and its error kept in ``errors``; a rate limit stops the poll (the other repositories
    share the same quota) and is kept there too.
    """

    def __init__(
        self, forge: Forge, *, repos: Collection[str], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._forge = forge
        self._clock = clock
        self._repos: dict[str, _RepoState] = {}
        self._seen: set[SeenKey] = set()
        self.errors: dict[str, ForgeError] = {}
        self.last_poll: float | None = None
        for repo in repos:
            self._state(repo)

    def watch(self, repo: str, number: int) -> None:
        """Report feedback on PR ``number`` of ``repo`` (polling ``repo`` from now on)."""
        self._state(repo).watched.add(number)

    def unwatch(self, repo: str, number: int) -> None:
        """Stop reporting PR ``number`` (closed or merged); the repository is still polled."""
        self._state(repo).watched.discard(number)

    def due(self, interval_s: float) -> bool:
        """Whether ``interval_s`` seconds passed since the last poll (or there was none)."""
        return self.last_poll is None or self._clock() - self.last_poll >= interval_s

    def poll(self) -> list[FeedbackEvent]:
        self.last_poll = self._clock()
        found: list[FeedbackEvent] = []
        for repo, state in self._repos.items():
            try:
                fresh = self._fresh(self._poll_repo(repo, state))
                found.extend(e for e in fresh if e.pr_number in state.watched)
            except ForgeRateLimited as exc:
                self.errors[repo] = exc
                break
            except ForgeError as exc:
                self.errors[repo] = exc
                continue
            self.errors.pop(repo, None)
        return found

    def _poll_repo(self, repo: str, state: _RepoState) -> list[FeedbackEvent]:
        """Everything read for one repository; cursors move only once all its reads succeeded."""
        inline = self._forge.list_review_comments(
            repo, since=state.review_comments.since, etag=state.review_comments.etag
        )
        conversation = self._forge.list_issue_comments(
            repo, since=state.issue_comments.since, etag=state.issue_comments.etag
        )
        reviews = [e for n in sorted(state.watched) for e in self._forge.list_reviews(repo, n)]
        state.review_comments.advance(inline)
        state.issue_comments.advance(conversation)
        return [*reviews, *inline.events, *conversation.events]

    def _fresh(self, events: list[FeedbackEvent]) -> list[FeedbackEvent]:
        fresh = []
        for event in events:
            key = (event.source, event.external_id, event.updated_at)
            if key not in self._seen:
                self._seen.add(key)
                fresh.append(event)
        return fresh

    def _state(self, repo: str) -> _RepoState:
        key = next((known for known in self._repos if known.lower() == repo.lower()), repo)
        return self._repos.setdefault(key, _RepoState(_Cursor(), _Cursor(), set()))
