"""The forge interface: where pull requests live (GitHub, GitHub Enterprise, the local forge).

Contract (every implementation, fakes included, passes ``tests/forge/test_contract.py``):

- Reads (``repo``, ``branch_sha``, ``find_pull``, ``get_pull``, ``permission``) are safe to retry;
  an implementation may retry them on 5xx and rate limits, honouring ``retry-after`` and
  ``x-ratelimit-reset``.
- Writes (``create_pull``, ``update_pull``, the ``team_process`` writes) are never re-sent blindly.
  ``create_pull`` that fails ambiguously (5xx, timeout, dropped connection) first looks for the PR
  by its head and returns it if the failed call created it; a 422 "already exists" also resolves to
  the existing PR. So calling it again after any failure yields exactly one PR.
- Writes are spaced by the implementation's write interval (GitHub asks for 1 s between writes).
- There is deliberately no merge, close, approve, review or comment *writing* method: crucible never
  does those (docs/github.md); ``feedback_reader`` only reads feedback. Bodies are edited only through
  ``update_pull``.
- Errors: ``ForgeNotFound`` (no such repo/branch/PR), ``ForgeRateLimited`` (retry after
  ``retry_after`` seconds), ``ForgeError`` for anything else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from controller.domain.errors import CrucibleError, NotFoundError, RetryLaterError


class ForgeError(CrucibleError):
    """The forge refused or failed a call."""


class ForgeNotFound(NotFoundError, ForgeError):
    """The repository, branch or pull request does not exist (or is not visible to us)."""


class ForgeRateLimited(RetryLaterError, ForgeError):
    """Primary or secondary rate limit; ``retry_after`` seconds until a retry may succeed."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RepoInfo:
    full_name: str  # owner/name
    clone_url: str  # https URL git pushes to and fetches from
    default_branch: str


@dataclass(frozen=True)
class PullInfo:
    number: int
    url: str  # the html_url a person opens
    head_ref: str  # branch name
    head_sha: str
    head_owner: str
    base_ref: str
    state: str  # "open" | "closed"
    merged: bool
    draft: bool
    body: str
    title: str = ""


class Forge(Protocol):
    """A forge as crucible uses it; see the module docstring for the contract."""

    def repo(self, full_name: str) -> RepoInfo: ...

    def branch_sha(self, full_name: str, branch: str) -> str | None:
        """The branch's head sha, or None if the branch does not exist."""
        ...

    def find_pull(self, full_name: str, head: str) -> PullInfo | None:
        """The newest PR (any state) whose head is ``owner:branch``, or None."""
        ...

    def get_pull(self, full_name: str, number: int) -> PullInfo: ...

    def create_pull(
        self, full_name: str, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> PullInfo:
        """Open a PR from ``head`` (``owner:branch``) into ``base``; exactly once (see contract)."""
        ...

    def update_pull(
        self, full_name: str, number: int, *, body: str | None = None, title: str | None = None
    ) -> PullInfo: ...

    def permission(self, full_name: str, login: str) -> str:
        """The collaborator permission of ``login``: admin, maintain, write, triage, read or none."""
        ...

    def git_auth_env(self, full_name: str) -> Mapping[str, str]:
        """Environment for a ``git push``/``fetch`` to ``full_name``'s clone URL that authenticates
        without putting the credential on a command line or in any ``.git/config``
        (``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` with ``http.extraHeader``)."""
        ...

    def feedback_reader(self) -> FeedbackReader:
        """The reader the poller uses on this forge (same API and credentials, conditional GETs)."""
        ...

    def team_process(self) -> TeamProcess:
        """The writes that fit a PR into a team's process (labels, reviewers, statuses), same
        credentials; see ``TeamProcess``."""
        ...


@dataclass(frozen=True)
class Applied:
    """What a team-process write did with the names it was given: ``done`` the forge took,
    ``refused`` it answered no for, each with the forge's reason (an unknown reviewer, a label it
    cannot create, an assignee without access). A refusal is final: asking again changes nothing."""

    done: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CommitCheck:
    """A result reported on a commit, as a commit status or a check run.

    ``name`` is the status's context or the check run's name (``crucible/p50_ms``); ``conclusion``
    is success, failure or neutral (a commit status has no neutral: it is reported as failure);
    ``title`` is the status's description (at most 140 characters) and the check run's output title;
    ``summary`` and ``text`` (Markdown) only reach a check run; ``details_url`` may be empty.
    """

    name: str
    conclusion: str  # success | failure | neutral
    title: str
    summary: str = ""
    text: str = ""
    details_url: str = ""


class TeamProcess(Protocol):
    """What makes a bot's PR fit how a team reviews: labels, requested reviewers, assignees, and the
    measured result on the PR's head commit.

    Contract (``tests/forge/test_team_process.py`` runs it over every implementation):

    - Every method is one write, or a few when the forge refused a batch and the names are tried one
      at a time to tell which it refuses; nothing is re-sent after an ambiguous failure (5xx, timeout,
      dropped connection): that raises ``ForgeError`` and the caller tries again at its next publish.
      Adding a label or an assignee twice, or requesting a reviewer twice, changes nothing.
    - ``add_labels``, ``request_reviewers`` and ``add_assignees`` answer ``Applied``: a name the forge
      refuses (422: not a collaborator, the PR's author, an invalid label; an assignee it silently
      drops) is ``refused`` with the reason, never an exception. ``ForgeNotFound`` for a missing PR.
    - ``report`` sets a commit status (``check_run=False``) or creates a check run. A check run needs
      App credentials on GitHub: without them it raises ``ForgeError`` (403), and ``check_runs`` says
      in advance whether these credentials are an App's.
    """

    @property
    def check_runs(self) -> bool: ...

    def add_labels(self, full_name: str, number: int, labels: Sequence[str]) -> Applied: ...

    def request_reviewers(
        self, full_name: str, number: int, reviewers: Sequence[str], team_reviewers: Sequence[str]
    ) -> Applied:
        """Request reviews; team slugs appear in ``Applied`` as ``team:<slug>``."""
        ...

    def add_assignees(self, full_name: str, number: int, assignees: Sequence[str]) -> Applied: ...

    def report(self, full_name: str, sha: str, check: CommitCheck, *, check_run: bool) -> None: ...


class FeedbackReader(Protocol):
    """The poller's reads: the safety net for lost webhooks (docs/github.md, issue 4 deliverable 2).

    Contract (``tests/forge/test_feedback_reads.py`` runs it over every implementation):

    - Every list is a *fixed* URL read conditionally: with the ``etag`` of the previous answer, an
      unchanged list answers ``not_modified`` (a 304 on GitHub, which costs no rate limit). A page's
      ``etag`` is None when the answer spanned several pages (only one page revalidates as a whole).
    - Reads are safe to retry; an implementation may retry 5xx and dropped connections. A rate limit
      raises ``ForgeRateLimited`` at once (the poller waits, not the reader); a missing repository or
      PR ``ForgeNotFound``; anything else ``ForgeError``.
    - ``rate_status`` is what the last answer's ``x-ratelimit-*`` headers said (None before any), so
      the poller can stretch its interval before the quota runs out.
    """

    def list_pulls(self, full_name: str, *, etag: str | None, stop_before: str | None = None) -> PullPage:
        """Pull requests of any state, most recently updated first. Pages are followed until one
        ends with an ``updated_at`` older than ``stop_before`` (the newest value of the previous
        answer: nothing older can have changed), or to the end without it."""
        ...

    def list_review_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        """Every inline review comment of the repository updated at or after ``since`` (all pages,
        oldest update first), as ``review_comment`` events with action ``created`` (a list cannot
        tell an edit from a first sight: ``updated_at`` tells versions apart)."""
        ...

    def list_issue_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        """As ``list_review_comments`` for conversation comments (``issue_comment``), with
        ``pr_number`` the issue's number. GitHub's list also holds comments on plain issues and
        cannot tell them apart without one call per issue, so they are *not* filtered here: callers
        keep the numbers of the pull requests they watch (the poller does)."""
        ...

    def list_reviews(self, full_name: str, number: int) -> ReviewPage:
        """The submitted reviews of one PR (pending ones are invisible), oldest first, as ``review``
        events with action ``submitted`` and ``updated_at`` the submission time; with the server's
        clock at the answer (its ``Date``), which tells whether a later review could still carry
        the same-second ``updated_at`` the PR shows now."""
        ...

    def rate_status(self) -> RateStatus | None: ...


@dataclass(frozen=True)
class FeedbackEvent:
    """One piece of review feedback on a PR, as a webhook or the poller saw it (forge-neutral).

    ``source`` is ``review`` (a submitted review's body), ``review_comment`` (an inline comment) or
    ``issue_comment`` (a comment on the PR's conversation). ``key`` identifies the thing commented
    (``source`` + ``external_id``); ``action`` and ``updated_at`` tell versions apart, so an edit and a
    delete of the same comment with the same ``updated_at`` are still two events.
    """

    repo: str  # owner/name of the PR's repository
    pr_number: int
    source: str  # review | review_comment | issue_comment
    external_id: int  # the review's or comment's id on the forge
    review_id: int | None  # inline comments: the review they belong to
    author: str
    author_type: str  # User | Bot
    association: str  # OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, ...
    body: str
    path: str | None
    line: int | None
    action: str  # created | edited | deleted | submitted | dismissed
    updated_at: str  # as the forge sent it (ISO 8601)
    url: str = ""
    # inline comments: the forge's diff hunk, from its @@ header through the commented line
    diff_hunk: str | None = None


@dataclass(frozen=True)
class CommentPage:
    """One conditional read of a repository-wide comment list.

    ``etag`` is what to send as ``If-None-Match`` next time (None: nothing to revalidate);
    ``not_modified`` means the forge answered 304 and ``events`` is empty.
    """

    events: tuple[FeedbackEvent, ...]
    etag: str | None
    not_modified: bool


@dataclass(frozen=True)
class PullState:
    """One pull request as a list shows it: enough to tell whether it moved or closed."""

    number: int
    state: str  # open | closed
    merged: bool
    updated_at: str  # ISO 8601, second resolution on GitHub
    created_at: str = ""  # nothing on the PR can be older: where comment reads may start


@dataclass(frozen=True)
class PullPage:
    """One conditional read of a repository's pull requests (see ``CommentPage``)."""

    pulls: tuple[PullState, ...]
    etag: str | None
    not_modified: bool


@dataclass(frozen=True)
class ReviewPage:
    """The reviews of one PR and the server's clock when it answered (epoch seconds; None if the
    answer carried no ``Date``)."""

    events: tuple[FeedbackEvent, ...]
    server_time: float | None


@dataclass(frozen=True)
class RateStatus:
    """The rate-limit headers of the newest answer: ``remaining`` of ``limit`` requests until
    ``reset`` (epoch seconds), seen at ``observed`` (epoch seconds, the server's ``Date`` if any)."""

    limit: int
    remaining: int
    reset: float
    observed: float


@dataclass(frozen=True)
class ForgeUsage:
    """What one forge client spent, for ``/metrics``: HTTP requests sent (its REST calls and its
    feedback reader's conditional GETs, 304s included) and the primary rate limit left as the
    newest answers said (the smallest over the credentials it holds; None before any answer)."""

    requests: int
    rate_remaining: int | None
