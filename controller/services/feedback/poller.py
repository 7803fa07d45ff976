"""The feedback poller: the safety net under webhooks (docs/github.md, "Feedback", issue 4).

GitHub never retries a failed webhook delivery, and a laptop is usually unreachable from GitHub,
so feedback must also be *read*. Reading cheaply is the point of this module. Per repository, each
poll asks three fixed lists with the ETag of the previous answer, so a quiet repository answers
304 three times, which costs no rate limit:

- pull requests, most recently updated first: which PRs moved (and which closed or merged);
- review comments and conversation comments, oldest update first, ``since`` the newest
  ``updated_at`` already seen.

Reviews have no repository-wide list, so they are read per watched PR, and only when that PR's
``updated_at`` moved since its reviews were last read. ``updated_at`` has one-second resolution, so
a review submitted in the same second as a read could hide behind an unchanged ``updated_at``: a
PR whose reviews were read no later than its ``updated_at`` second (by the server's ``Date``) stays
*unsettled* and is read once more next poll.

The interval stretches when the rate-limit headers say the quota would not last until its reset at
the current cost per poll (keeping a reserve for crucible's own writes), and a rate-limited poll
waits as long as GitHub asked.

Only feedback on watched PRs is returned: the conversation-comment list also holds comments on
plain issues. Each version of an item is returned once (by source, id, action and ``updated_at``, so
an edit or a review's dismissal comes back as a new version); a version read while its PR was not
watched counts as seen. A deletion is invisible to lists (the item is simply gone): only webhooks
report it. State is in memory; the store de-duplicates durably, together with what webhooks delivered.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime

from controller.forge.base import (
    CommentPage,
    FeedbackEvent,
    FeedbackReader,
    ForgeError,
    ForgeRateLimited,
    PullPage,
    PullState,
)

SeenKey = tuple[str, int, str, str]  # (source, external_id, action, updated_at)
RESERVE_SHARE = 0.05  # of the hourly quota, kept for crucible's own writes (PR bodies, pushes' reads)
MIN_RESERVE = 50
COST_WINDOW = 9  # polls whose median billable reads is the running cost per poll
ADVANCE_AFTER = 50  # items in one comment-list answer before its ``since`` moves up


@dataclass
class _Cursor:
    """Where one repository-wide comment list is read from: the ``since`` to ask and the ETag to send.

    ``since`` moves only when an answer grew past ``ADVANCE_AFTER`` items (or pages): every move
    changes the URL, which makes the stored ETag useless and costs one more full read, while a
    short list re-read as a 304 costs nothing. Items re-read below the newest are de-duplicated.
    """

    since: str | None = None
    etag: str | None = None

    def start(self, floor: str | None) -> None:
        """Begin at ``floor`` (the oldest watched PR's creation: nothing on it is older)."""
        if self.since is None and self.etag is None and floor:
            self.since = floor

    def advance(self, page: CommentPage) -> None:
        if page.not_modified:
            return
        self.etag = page.etag
        if len(page.events) <= ADVANCE_AFTER and page.etag is not None:
            return
        newest = max((e.updated_at for e in page.events), default=None)
        if newest is not None and (self.since is None or newest > self.since):
            self.since = newest
            self.etag = None  # it belonged to the old URL


@dataclass
class _Pull:
    """What the poller knows of one PR: its newest ``updated_at`` and when its reviews were read."""

    state: PullState | None = None
    reviews_read_at: str | None = None  # the PR's updated_at when its reviews were last read
    settled: bool = False  # that read happened after the updated_at second ended
    reported: tuple[str, bool] | None = None  # (state, merged) last handed to the caller

    def needs_reviews(self) -> bool:
        if self.state is None or self.reviews_read_at is None:
            return True
        return self.state.updated_at != self.reviews_read_at or not self.settled


@dataclass
class _RepoState:
    review_comments: _Cursor = field(default_factory=_Cursor)
    issue_comments: _Cursor = field(default_factory=_Cursor)
    pulls_etag: str | None = None
    pulls_newest: str | None = None
    pulls: dict[int, _Pull] = field(default_factory=dict)
    watched: set[int] = field(default_factory=set)

    def floor(self) -> str | None:
        """The oldest creation time of the watched PRs, or None while one of them is unknown."""
        created = [self.pulls[n].state for n in self.watched if n in self.pulls]
        if (
            not self.watched
            or len(created) < len(self.watched)
            or any(s is None or not s.created_at for s in created)
        ):
            return None
        return min(s.created_at for s in created if s is not None)

    def take(self, page: PullPage) -> None:
        if page.not_modified:
            return
        for pull in page.pulls:
            self.pulls.setdefault(pull.number, _Pull()).state = pull
        self.pulls_etag = page.etag
        newest = max((p.updated_at for p in page.pulls), default=None)
        if newest is not None and (self.pulls_newest is None or newest > self.pulls_newest):
            self.pulls_newest = newest


class Poller:
    """``poll()`` -> feedback on watched PRs not returned before; see the module docstring.

    A repository whose read fails is skipped for this poll (its cursors stay put, so nothing is
    lost) and its error kept in ``errors``; a rate limit stops the poll (the other repositories
    share the same quota), is kept there too, and holds the next poll back as long as it asked.
    ``clock`` is monotonic seconds (injectable: tests and the budget benchmark never really wait).
    """

    def __init__(
        self,
        reader: FeedbackReader,
        *,
        repos: Collection[str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._clock = clock
        self._repos: dict[str, _RepoState] = {}
        self._seen: set[SeenKey] = set()
        self._not_before: float | None = None
        self._costs: deque[int] = deque(maxlen=COST_WINDOW)  # billable reads of the latest polls
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

    # -- scheduling -----------------------------------------------------------------------------

    def wait(self, interval_s: float) -> float:
        """Seconds until the next poll is due: ``interval_s`` after the last one, stretched so the
        quota lasts until its reset at the current cost per poll, and never before a rate-limited
        poll's wait is over. 0 when due now."""
        if self.last_poll is None:
            due = self._clock()
        else:
            due = self.last_poll + max(interval_s, self._stretched(interval_s))
        if self._not_before is not None:
            due = max(due, self._not_before)
        return max(0.0, due - self._clock())

    def due(self, interval_s: float) -> bool:
        """Whether a poll is due (see ``wait``)."""
        return self.wait(interval_s) <= 0

    def _stretched(self, interval_s: float) -> float:
        rate = self._reader.rate_status()
        if rate is None or not self._costs:
            return interval_s
        window = rate.reset - rate.observed  # seconds until the quota refills (server clock)
        if window <= 0:
            return interval_s
        spare = rate.remaining - max(MIN_RESERVE, RESERVE_SHARE * rate.limit)
        if spare <= 0:
            return window + 1.0  # only the reserve is left: wait for the reset
        # The median: one burst (a PR first seen, a busy minute) must not stretch the next interval.
        polls_affordable = spare / max(1.0, statistics.median(self._costs))
        return max(interval_s, window / polls_affordable)

    # -- polling --------------------------------------------------------------------------------

    def poll(self) -> list[FeedbackEvent]:
        first = self.last_poll is None
        self.last_poll = self._clock()
        found: list[FeedbackEvent] = []
        billable = 0
        for repo, state in self._repos.items():
            try:
                events, cost = self._poll_repo(repo, state)
                billable += cost
                found.extend(e for e in self._fresh(events) if e.pr_number in state.watched)
            except ForgeRateLimited as exc:
                self.errors[repo] = exc
                self._not_before = self._clock() + exc.retry_after
                break
            except ForgeError as exc:
                self.errors[repo] = exc
                continue
            self.errors.pop(repo, None)
        if not first:  # the first poll reads every list without an ETag: a start-up cost
            self._costs.append(billable)
        return found

    def pull_changes(self) -> list[tuple[str, PullState]]:
        """Watched PRs whose state (open/closed, merged) differs from what was last handed out
        (the first sight of each counts as a change); each change is handed out once."""
        changes = []
        for repo, state in self._repos.items():
            for number in sorted(state.watched):
                pull = state.pulls.get(number)
                if pull is None or pull.state is None:
                    continue
                now = (pull.state.state, pull.state.merged)
                if now != pull.reported:
                    pull.reported = now
                    changes.append((repo, pull.state))
        return changes

    def _poll_repo(self, repo: str, state: _RepoState) -> tuple[list[FeedbackEvent], int]:
        """Everything read for one repository and how many reads were billable; comment cursors
        move only once all its reads succeeded."""
        pulls = self._reader.list_pulls(repo, etag=state.pulls_etag, stop_before=state.pulls_newest)
        state.take(pulls)
        floor = state.floor()
        state.review_comments.start(floor)
        state.issue_comments.start(floor)
        inline = self._reader.list_review_comments(
            repo, since=state.review_comments.since, etag=state.review_comments.etag
        )
        conversation = self._reader.list_issue_comments(
            repo, since=state.issue_comments.since, etag=state.issue_comments.etag
        )
        reviews: list[FeedbackEvent] = []
        read: list[tuple[_Pull, str | None, bool]] = []
        due = [n for n in sorted(state.watched) if state.pulls.setdefault(n, _Pull()).needs_reviews()]
        for number in due:
            page = self._reader.list_reviews(repo, number)
            reviews.extend(page.events)
            pull = state.pulls[number]
            seen = pull.state.updated_at if pull.state is not None else None
            settled = (
                seen is not None and page.server_time is not None and page.server_time >= _epoch(seen) + 1
            )
            read.append((pull, seen, settled))
        state.review_comments.advance(inline)
        state.issue_comments.advance(conversation)
        # First reads of a PR's reviews are a one-time cost of starting to watch it, not what
        # polling costs from now on, so they do not count toward the cost that stretches the interval.
        first_sight = sum(1 for pull, _, _ in read if pull.reviews_read_at is None)
        billable = sum(not p.not_modified for p in (pulls, inline, conversation)) + len(due) - first_sight
        for pull, seen, settled in read:
            pull.reviews_read_at, pull.settled = seen, settled
        return [*reviews, *inline.events, *conversation.events], billable

    def _fresh(self, events: list[FeedbackEvent]) -> list[FeedbackEvent]:
        fresh = []
        for event in events:
            key = (event.source, event.external_id, event.action, event.updated_at)
            if key not in self._seen:
                self._seen.add(key)
                fresh.append(event)
        return fresh

    def _state(self, repo: str) -> _RepoState:
        key = next((known for known in self._repos if known.lower() == repo.lower()), repo)
        return self._repos.setdefault(key, _RepoState())


def _epoch(stamp: str) -> float:
    """GitHub's ``2024-01-01T00:00:00Z`` as epoch seconds (an unreadable stamp never settles)."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("inf")
