"""The forge interface: where pull requests live (GitHub, GitHub Enterprise, the local forge).

Contract (every implementation, fakes included, passes ``tests/forge/test_contract.py``):

- Reads (``repo``, ``branch_sha``, ``find_pull``, ``get_pull``, ``permission``) are safe to retry;
  an implementation may retry them on 5xx and rate limits, honouring ``retry-after`` and
  ``x-ratelimit-reset``.
- Writes (``create_pull``, ``update_pull``) are never re-sent blindly. ``create_pull`` that fails
  ambiguously (5xx, timeout, dropped connection) first looks for the PR by its head and returns it if
  the failed call created it; a 422 "already exists" also resolves to the existing PR. So calling it
  again after any failure yields exactly one PR.
- Writes are spaced by the implementation's write interval (GitHub asks for 1 s between writes).
- There is deliberately no merge, close, approve, review or comment *writing* method: crucible never
  does those (DESIGN §7); the ``list_*`` methods only read feedback. Bodies are edited only through
  ``update_pull``.
- Errors: ``ForgeNotFound`` (no such repo/branch/PR), ``ForgeRateLimited`` (retry after
  ``retry_after`` seconds), ``ForgeError`` for anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
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

    # -- feedback reads (the poller's safety net for lost webhooks, DESIGN §7) -------------------

    def list_review_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        """Every inline review comment of the repository updated at or after ``since`` (all pages,
        oldest update first), as ``review_comment`` events with action ``created`` (a list cannot
        tell an edit from a first sight: ``updated_at`` tells versions apart). With ``etag``, a
        conditional read: unchanged answers come back as ``CommentPage((), etag, True)``, which
        costs no rate limit. The page's ``etag`` is None when the answer spanned several pages
        (only a one-page answer can be revalidated as a whole)."""
        ...

    def list_issue_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        """As ``list_review_comments`` for conversation comments (``issue_comment``), with
        ``pr_number`` the issue's number. GitHub's list also holds comments on plain issues and
        cannot tell them apart without one call per issue, so they are *not* filtered here: callers
        keep the numbers of the pull requests they watch (the poller does)."""
        ...

    def list_reviews(self, full_name: str, number: int) -> tuple[FeedbackEvent, ...]:
        """The submitted reviews of one PR (pending ones are invisible), oldest first, as
        ``review`` events with action ``submitted`` and ``updated_at`` the submission time."""
        ...


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
