"""The forge's records: plain frozen dataclasses that storage returns and the renderer shapes.

Timestamps are ISO-8601 UTC strings with second precision (``2024-05-01T12:00:00Z``), exactly as
GitHub prints them, so they sort as text and round-trip through SQLite unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AccountType(StrEnum):
    """GitHub's ``type`` of an account."""

    USER = "User"
    ORGANIZATION = "Organization"
    BOT = "Bot"


class Role(StrEnum):
    """A collaborator role as ``PUT /collaborators`` takes it, weakest first."""

    PULL = "pull"
    TRIAGE = "triage"
    PUSH = "push"
    MAINTAIN = "maintain"
    ADMIN = "admin"


ROLE_RANK = {Role.PULL: 1, Role.TRIAGE: 2, Role.PUSH: 3, Role.MAINTAIN: 4, Role.ADMIN: 5}


class ReviewState(StrEnum):
    """A review's state; the REST ``event`` names map onto these."""

    PENDING = "PENDING"
    COMMENTED = "COMMENTED"
    APPROVED = "APPROVED"
    CHANGES_REQUESTED = "CHANGES_REQUESTED"
    DISMISSED = "DISMISSED"


@dataclass(frozen=True)
class Account:
    """A user or an organization."""

    id: int
    login: str
    type: AccountType
    site_admin: bool
    created_at: str


@dataclass(frozen=True)
class Repo:
    """A repository; its git data lives in ``<root>/git/<owner>/<name>.git``."""

    id: int
    owner_id: int
    owner_login: str
    name: str
    description: str | None
    private: bool
    default_branch: str
    created_at: str
    updated_at: str
    pushed_at: str | None
    parent_id: int | None = None

    @property
    def full_name(self) -> str:
        return f"{self.owner_login}/{self.name}"


@dataclass(frozen=True)
class Pull:
    """A pull request (also issue number ``number`` of its repository)."""

    id: int
    repo_id: int
    number: int
    user_id: int
    title: str
    body: str | None
    state: str
    draft: bool
    head_repo_id: int
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    created_at: str
    updated_at: str
    closed_at: str | None
    closed_by: int | None = None


@dataclass(frozen=True)
class Review:
    """A pull-request review."""

    id: int
    pull_id: int
    user_id: int
    body: str
    state: ReviewState
    commit_id: str
    submitted_at: str | None


@dataclass(frozen=True)
class ReviewComment:
    """An inline (diff) comment; ``position`` counts lines below the file's first hunk header."""

    id: int
    pull_id: int
    review_id: int | None
    user_id: int
    body: str
    path: str
    line: int | None
    side: str
    start_line: int | None
    start_side: str | None
    position: int | None
    commit_id: str
    diff_hunk: str
    in_reply_to: int | None
    subject_type: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class IssueComment:
    """A conversation comment on issue (= pull request) ``number``."""

    id: int
    repo_id: int
    number: int
    user_id: int
    body: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class Hook:
    """A repository webhook (``POST /repos/{o}/{r}/hooks``)."""

    id: int
    repo_id: int
    url: str
    secret: str | None
    events: tuple[str, ...]
    active: bool
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class Label:
    """A repository label; ``color`` is six hex digits without ``#``, as GitHub stores it."""

    id: int
    repo_id: int
    name: str
    color: str
    description: str | None
    is_default: bool = False


@dataclass(frozen=True)
class Team:
    """A team of an organization (only what review requests need: a slug, a name, members)."""

    id: int
    org_id: int
    slug: str
    name: str
    description: str | None
    created_at: str


class StatusState(StrEnum):
    """A commit status's ``state``."""

    ERROR = "error"
    FAILURE = "failure"
    PENDING = "pending"
    SUCCESS = "success"


class CheckStatus(StrEnum):
    """A check run's ``status``."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    WAITING = "waiting"
    REQUESTED = "requested"
    PENDING = "pending"


class CheckConclusion(StrEnum):
    """A completed check run's ``conclusion``."""

    ACTION_REQUIRED = "action_required"
    CANCELLED = "cancelled"
    FAILURE = "failure"
    NEUTRAL = "neutral"
    SUCCESS = "success"
    SKIPPED = "skipped"
    STALE = "stale"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class CommitStatus:
    """One status posted to a commit (``POST /statuses/{sha}``); the latest per context counts."""

    id: int
    repo_id: int
    sha: str
    state: StatusState
    context: str
    description: str | None
    target_url: str | None
    creator_id: int
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class CheckRun:
    """A check run of a GitHub App (a ``[bot]`` account here); ``output`` is its JSON object."""

    id: int
    repo_id: int
    suite_id: int
    head_sha: str
    name: str
    app_id: int
    status: CheckStatus
    conclusion: CheckConclusion | None
    details_url: str | None
    external_id: str | None
    started_at: str | None
    completed_at: str | None
    output: str
    created_at: str
    updated_at: str
