"""``FakeForge``: an in-memory ``Forge`` for unit tests of the code that uses one (the publisher).

It passes the same contract suite as the real adapter (``tests/forge/test_contract.py``), so it
cannot drift from it. Besides the ``Forge`` methods it offers what a test needs to play the other
people around a pull request: pushes (``set_branch``), collaborators and organization members, a
person closing, merging or editing a PR, reviewers submitting reviews and comments (``submit_review``,
``add_issue_comment``, ``edit_comment``), scripted failures (``fail_next``), and a log of every
``Forge`` call (``calls``). Timestamps come from a counter (one second per write), and list ETags are
digests of the answer, so a repeated read of an unchanged list is "not modified" as on GitHub.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from controller.forge.base import (
    Applied,
    CommentPage,
    CommitCheck,
    FeedbackEvent,
    ForgeError,
    ForgeNotFound,
    PullInfo,
    PullPage,
    PullState,
    RateStatus,
    RepoInfo,
    ReviewPage,
)
from controller.forge.github import basic_auth_env

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)

# The collaborator-permission API answers admin|write|read|none; roles map onto it as on GitHub.
PERMISSION_OF_ROLE = {
    "admin": "admin",
    "maintain": "write",
    "push": "write",
    "triage": "read",
    "pull": "read",
}


@dataclass
class FakeRepo:
    full_name: str
    default_branch: str
    private: bool
    branches: dict[str, str] = field(default_factory=dict)
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> role
    members: set[str] = field(default_factory=set)  # of the owning organization (association MEMBER)
    teams: set[str] = field(default_factory=set)  # team slugs of the owning organization

    @property
    def owner(self) -> str:
        return self.full_name.split("/")[0]


@dataclass
class FakePull:
    number: int
    title: str
    body: str
    head_owner: str
    head_ref: str
    head_sha: str
    base_ref: str
    draft: bool
    state: str = "open"
    merged: bool = False
    updated_at: str = ""  # moved by every change and every piece of feedback, as on GitHub
    created_at: str = ""
    author: str = ""  # who opened it (the token's user)
    labels: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)  # logins, and teams as "team:<slug>"
    assignees: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Report:
    """A commit status (``kind`` "status", ``state`` success/failure) or check run ("check_run",
    ``state`` its conclusion) as the fake stored it."""

    kind: str
    name: str
    state: str
    title: str
    details_url: str
    text: str = ""


@dataclass
class _Failure:
    error: Exception
    after: bool


class FakeForge:
    """In-memory forge; see the module docstring. URLs are under ``base_url``."""

    def __init__(
        self,
        base_url: str = "https://forge.test",
        token: str = "fake-token",
        *,
        login: str = "crucible-bot",
        app: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.login = login  # the token's user: who opens pull requests
        self.app = app  # GitHub App credentials: check runs allowed
        self.reports: dict[str, list[Report]] = {}  # "owner/name@sha" -> what was reported on it
        self.repos: dict[str, FakeRepo] = {}
        self.pulls: dict[str, list[FakePull]] = {}
        self.users: set[str] = set()
        self.calls: list[tuple[str, ...]] = []
        self._failures: dict[str, list[_Failure]] = {}
        self.feedback: dict[str, list[FeedbackEvent]] = {}  # repo -> reviews and comments, latest versions
        self._ticks = 0
        self.frozen = False  # True: every write lands in the same second (GitHub's updated_at resolution)
        self.rate: RateStatus | None = None  # what rate_status() answers

    # -- setting the scene (not part of Forge) -----------------------------------------------

    def add_user(self, login: str) -> None:
        self.users.add(login)

    def add_repo(
        self, full_name: str, *, default_branch: str = "main", sha: str | None = None, private: bool = False
    ) -> FakeRepo:
        repo = FakeRepo(full_name, default_branch, private)
        repo.branches[default_branch] = sha or fake_sha(f"{full_name} initial")
        self.repos[full_name.lower()] = repo
        self.pulls.setdefault(full_name.lower(), [])
        self.users.add(repo.owner)
        return repo

    def set_branch(self, full_name: str, branch: str, sha: str) -> None:
        """A push: the branch moves, and open PRs from it follow (GitHub's ``synchronize``)."""
        repo = self._repo(full_name)
        repo.branches[branch] = sha
        for pulls in self.pulls.values():
            for pull in pulls:
                if pull.state == "open" and (pull.head_owner, pull.head_ref) == (repo.owner, branch):
                    pull.head_sha, pull.updated_at = sha, self._stamp()

    def add_collaborator(self, full_name: str, login: str, role: str = "push") -> None:
        if role not in PERMISSION_OF_ROLE:
            raise ValueError(f"unknown role {role!r}")
        self.users.add(login)
        self._repo(full_name).collaborators[login] = role

    def close_pull(self, full_name: str, number: int) -> None:
        """A person closed the PR (crucible never does)."""
        pull = self._pull(full_name, number)
        pull.state, pull.updated_at = "closed", self._stamp()

    def merge_pull(self, full_name: str, number: int) -> None:
        """A person merged the PR (crucible never does)."""
        pull = self._pull(full_name, number)
        pull.state, pull.merged, pull.updated_at = "closed", True, self._stamp()

    def edit_body(self, full_name: str, number: int, body: str) -> None:
        """A person edited the description."""
        pull = self._pull(full_name, number)
        pull.body, pull.updated_at = body, self._stamp()

    def fail_next(self, method: str, error: Exception, *, after: bool = False) -> None:
        """The next call of ``method`` raises ``error``; with ``after``, a write happens first
        (an ambiguous failure the adapter could not resolve)."""
        self._failures.setdefault(method, []).append(_Failure(error, after))

    def pull_infos(self, full_name: str) -> list[PullInfo]:
        return [self._info(full_name, p) for p in self.pulls.get(full_name.lower(), [])]

    def add_member(self, full_name: str, login: str) -> None:
        """``login`` joins the owning organization: association MEMBER, permission unchanged."""
        self.users.add(login)
        self._repo(full_name).members.add(login)

    def submit_review(
        self,
        full_name: str,
        number: int,
        author: str,
        body: str = "",
        comments: Sequence[tuple[str, int, str]] = (),
    ) -> FeedbackEvent:
        """A reviewer submits a review with inline ``(path, line, body)`` comments; the review."""
        self._pull(full_name, number)
        review = self._feedback(full_name, number, "review", author, body, action="submitted")
        for path, line, text in comments:
            self._feedback(
                full_name,
                number,
                "review_comment",
                author,
                text,
                review_id=review.external_id,
                path=path,
                line=line,
            )
        return review

    def dismiss_review(self, full_name: str, review_id: int) -> FeedbackEvent:
        """A maintainer dismisses a review: same ``submitted_at``, state DISMISSED."""
        items = self.feedback.get(full_name.lower(), [])
        for index, item in enumerate(items):
            if item.external_id == review_id and item.source == "review":
                items[index] = replace(item, action="dismissed")
                self._pull(full_name, item.pr_number).updated_at = self._stamp()
                return items[index]
        raise ForgeNotFound(f"no review {review_id} in {full_name}")

    def add_issue_comment(self, full_name: str, number: int, author: str, body: str) -> FeedbackEvent:
        """A comment on the PR's conversation."""
        self._pull(full_name, number)
        return self._feedback(full_name, number, "issue_comment", author, body)

    def edit_comment(self, full_name: str, comment_id: int, body: str) -> FeedbackEvent:
        """Someone edits a comment: new body, later ``updated_at``."""
        items = self.feedback.get(full_name.lower(), [])
        for index, item in enumerate(items):
            if item.external_id == comment_id and item.source != "review":
                items[index] = replace(item, body=body, updated_at=self._stamp())
                self._pull(full_name, item.pr_number).updated_at = items[index].updated_at
                return items[index]
        raise ForgeNotFound(f"no comment {comment_id} in {full_name}")

    # -- Forge ----------------------------------------------------------------------------------

    def repo(self, full_name: str) -> RepoInfo:
        self._enter("repo", full_name)
        repo = self._repo(full_name)
        return RepoInfo(repo.full_name, f"{self.base_url}/{repo.full_name}.git", repo.default_branch)

    def branch_sha(self, full_name: str, branch: str) -> str | None:
        self._enter("branch_sha", full_name, branch)
        repo = self.repos.get(full_name.lower())
        return None if repo is None else repo.branches.get(branch)

    def find_pull(self, full_name: str, head: str) -> PullInfo | None:
        owner, branch = _split_head(head)
        self._enter("find_pull", full_name, head)
        found = [
            p for p in self._pulls(full_name) if (p.head_owner.lower(), p.head_ref) == (owner.lower(), branch)
        ]
        return self._info(full_name, max(found, key=lambda p: p.number)) if found else None

    def get_pull(self, full_name: str, number: int) -> PullInfo:
        self._enter("get_pull", full_name, str(number))
        return self._info(full_name, self._pull(full_name, number))

    def create_pull(
        self, full_name: str, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> PullInfo:
        owner, branch = _split_head(head)
        failure = self._enter("create_pull", full_name, head, base)
        repo = self._repo(full_name)
        existing = [
            p
            for p in self._pulls(full_name)
            if p.state == "open"
            and (p.head_owner.lower(), p.head_ref, p.base_ref) == (owner.lower(), branch, base)
        ]
        if existing:
            return self._raise_after(failure, self._info(full_name, existing[0]))
        head_sha = self._head_sha(repo, owner, branch)
        if not title.strip():
            raise ForgeError(f"create pull {head}: 422 Validation Failed (title missing)")
        if base not in repo.branches:
            raise ForgeError(f"create pull {head}: 422 Validation Failed (base {base!r})")
        if head_sha == repo.branches[base]:
            raise ForgeError(f"create pull {head}: 422 No commits between {base} and {branch}")
        pull = FakePull(len(self._pulls(full_name)) + 1, title, body, owner, branch, head_sha, base, draft)
        pull.updated_at = pull.created_at = self._stamp()
        pull.author = self.login
        self._pulls(full_name).append(pull)
        return self._raise_after(failure, self._info(full_name, pull))

    def update_pull(
        self, full_name: str, number: int, *, body: str | None = None, title: str | None = None
    ) -> PullInfo:
        failure = self._enter("update_pull", full_name, str(number))
        pull = self._pull(full_name, number)
        if body is not None:
            pull.body = body
        if title is not None:
            pull.title = title
        pull.updated_at = self._stamp()
        return self._raise_after(failure, self._info(full_name, pull))

    def permission(self, full_name: str, login: str) -> str:
        self._enter("permission", full_name, login)
        repo = self._repo(full_name)
        if login.lower() not in {u.lower() for u in self.users}:
            raise ForgeNotFound(f"{login} is not a user")
        if login.lower() == repo.owner.lower():
            return "admin"
        role = {k.lower(): v for k, v in repo.collaborators.items()}.get(login.lower())
        if role is not None:
            return PERMISSION_OF_ROLE[role]
        return "none" if repo.private else "read"

    def git_auth_env(self, full_name: str) -> Mapping[str, str]:
        self._enter("git_auth_env", full_name)
        return basic_auth_env(self.token)  # the same environment the real adapter builds

    def feedback_reader(self) -> FakeForge:
        """The fake reads feedback itself (``FeedbackReader`` below)."""
        return self

    def team_process(self) -> FakeForge:
        """The fake writes labels, review requests and statuses itself (``TeamProcess`` below)."""
        return self

    # -- TeamProcess ----------------------------------------------------------------------------

    @property
    def check_runs(self) -> bool:
        return self.app

    def add_labels(self, full_name: str, number: int, labels: Sequence[str]) -> Applied:
        self._enter("add_labels", full_name, str(number), *labels)
        pull = self._pull(full_name, number)
        done, refused = [], []
        for name in labels:
            if len(name) > 50:
                refused.append((name, "422 Validation Failed; Label name invalid"))
                continue
            if name.lower() not in {label.lower() for label in pull.labels}:
                pull.labels.append(name)
            done.append(name)
        return Applied(tuple(done), tuple(refused))

    def request_reviewers(
        self, full_name: str, number: int, reviewers: Sequence[str], team_reviewers: Sequence[str]
    ) -> Applied:
        self._enter("request_reviewers", full_name, str(number), *reviewers, *team_reviewers)
        repo, pull = self._repo(full_name), self._pull(full_name, number)
        not_collaborator = (
            "422 Reviews may only be requested from collaborators. One or more of the users or teams "
            f"you specified is not a collaborator of the {repo.full_name} repository."
        )
        done, refused = [], []
        for login in reviewers:
            if login.lower() == pull.author.lower():
                refused.append((login, "422 Review cannot be requested from pull request author."))
            elif self._association(repo, login) == "NONE":
                refused.append((login, not_collaborator))
            else:
                done.append(login)
        for slug in team_reviewers:
            if slug in repo.teams:
                done.append(f"team:{slug}")
            else:
                refused.append((f"team:{slug}", not_collaborator))
        for name in done:
            if name not in pull.requested:
                pull.requested.append(name)
        return Applied(tuple(done), tuple(refused))

    def add_assignees(self, full_name: str, number: int, assignees: Sequence[str]) -> Applied:
        self._enter("add_assignees", full_name, str(number), *assignees)
        repo, pull = self._repo(full_name), self._pull(full_name, number)
        done, refused = [], []
        for login in assignees:
            if self._association(repo, login) == "NONE":
                refused.append((login, "GitHub did not assign them (they need access to the repository)"))
                continue
            if login not in pull.assignees:
                pull.assignees.append(login)
            done.append(login)
        return Applied(tuple(done), tuple(refused))

    def report(self, full_name: str, sha: str, check: CommitCheck, *, check_run: bool) -> None:
        self._enter("report", full_name, sha, check.name)
        repo = self._repo(full_name)
        if check_run and not self.app:
            raise ForgeError(f"report {check.name}: 403 You must authenticate via a GitHub App.")
        kind = "check_run" if check_run else "status"
        state = (
            check.conclusion if check_run else {"neutral": "failure"}.get(check.conclusion, check.conclusion)
        )
        title = check.title if check_run else check.title[:140]
        entry = Report(kind, check.name, state, title, check.details_url, check.text)
        self.reports.setdefault(f"{repo.full_name}@{sha}", []).append(entry)

    # -- FeedbackReader -------------------------------------------------------------------------

    def list_pulls(self, full_name: str, *, etag: str | None, stop_before: str | None = None) -> PullPage:
        self._enter("list_pulls", full_name, etag or "")
        ordered = sorted(self._pulls(full_name), key=lambda p: (p.updated_at, p.number), reverse=True)
        pulls = tuple(PullState(p.number, p.state, p.merged, p.updated_at, p.created_at) for p in ordered)
        digest = f'W/"{hashlib.sha256(repr(pulls).encode()).hexdigest()}"'
        if etag == digest:
            return PullPage((), etag, True)
        return PullPage(pulls, digest, False)

    def list_review_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        self._enter("list_review_comments", full_name, since or "", etag or "")
        return self._page(full_name, "review_comment", since, etag)

    def list_issue_comments(self, full_name: str, *, since: str | None, etag: str | None) -> CommentPage:
        self._enter("list_issue_comments", full_name, since or "", etag or "")
        return self._page(full_name, "issue_comment", since, etag)

    def list_reviews(self, full_name: str, number: int) -> ReviewPage:
        self._enter("list_reviews", full_name, str(number))
        self._pull(full_name, number)
        found = [e for e in self._events(full_name, "review") if e.pr_number == number]
        events = tuple(sorted(found, key=lambda e: (e.updated_at, e.external_id)))
        # The server's clock: one tick after the newest write, so nothing read here is "same
        # second" -- unless the clock is frozen (then reads share the writes' second).
        ticks = self._ticks if self.frozen else self._ticks + 1
        return ReviewPage(events, (EPOCH + timedelta(seconds=ticks)).timestamp())

    def rate_status(self) -> RateStatus | None:
        return self.rate

    # -- internals ------------------------------------------------------------------------------

    def _enter(self, method: str, *args: str) -> _Failure | None:
        """Log the call; raise a scripted failure now, or return it to raise after the write."""
        self.calls.append((method, *args))
        queue = self._failures.get(method)
        if not queue:
            return None
        failure = queue.pop(0)
        if not failure.after:
            raise failure.error
        return failure

    @staticmethod
    def _raise_after(failure: _Failure | None, result: PullInfo) -> PullInfo:
        if failure is not None:
            raise failure.error
        return result

    def _repo(self, full_name: str) -> FakeRepo:
        repo = self.repos.get(full_name.lower())
        if repo is None:
            raise ForgeNotFound(f"no repository {full_name}")
        return repo

    def _pulls(self, full_name: str) -> list[FakePull]:
        self._repo(full_name)
        return self.pulls[full_name.lower()]

    def _pull(self, full_name: str, number: int) -> FakePull:
        for pull in self._pulls(full_name):
            if pull.number == number:
                return pull
        raise ForgeNotFound(f"no pull request {full_name}#{number}")

    def _events(self, full_name: str, source: str) -> list[FeedbackEvent]:
        self._repo(full_name)
        return [e for e in self.feedback.get(full_name.lower(), []) if e.source == source]

    def _page(self, full_name: str, source: str, since: str | None, etag: str | None) -> CommentPage:
        found = [e for e in self._events(full_name, source) if since is None or e.updated_at >= since]
        events = tuple(sorted(found, key=lambda e: (e.updated_at, e.external_id)))
        digest = f'W/"{hashlib.sha256(repr(events).encode()).hexdigest()}"'
        if etag == digest:
            return CommentPage((), etag, True)
        return CommentPage(events, digest, False)

    def _stamp(self) -> str:
        self._ticks += 0 if self.frozen and self._ticks else 1
        return (EPOCH + timedelta(seconds=self._ticks)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _association(self, repo: FakeRepo, login: str) -> str:
        if login.lower() == repo.owner.lower():
            return "OWNER"
        if login.lower() in {m.lower() for m in repo.members}:
            return "MEMBER"
        if login.lower() in {c.lower() for c in repo.collaborators}:
            return "COLLABORATOR"
        return "NONE"

    def _feedback(
        self,
        full_name: str,
        number: int,
        source: str,
        author: str,
        body: str,
        *,
        action: str = "created",
        review_id: int | None = None,
        path: str | None = None,
        line: int | None = None,
    ) -> FeedbackEvent:
        repo = self._repo(full_name)
        self.users.add(author)
        items = self.feedback.setdefault(full_name.lower(), [])
        event = FeedbackEvent(
            repo=repo.full_name,
            pr_number=number,
            source=source,
            external_id=len(items) + 1,
            review_id=review_id,
            author=author,
            author_type="Bot" if author.endswith("[bot]") else "User",
            association=self._association(repo, author),
            body=body,
            path=path,
            line=line,
            action=action,
            updated_at=self._stamp(),
            url=f"{self.base_url}/{repo.full_name}/pull/{number}#{source}-{len(items) + 1}",
        )
        items.append(event)
        self._pull(full_name, number).updated_at = event.updated_at
        return event

    def _head_sha(self, repo: FakeRepo, owner: str, branch: str) -> str:
        head_repo = (
            repo
            if owner.lower() == repo.owner.lower()
            else self.repos.get(f"{owner}/{repo.full_name.split('/')[1]}".lower())
        )
        sha = None if head_repo is None else head_repo.branches.get(branch)
        if sha is None:
            raise ForgeError(f"create pull {owner}:{branch}: 422 Validation Failed (head)")
        return sha

    def _info(self, full_name: str, pull: FakePull) -> PullInfo:
        repo = self._repo(full_name)
        return PullInfo(
            number=pull.number,
            url=f"{self.base_url}/{repo.full_name}/pull/{pull.number}",
            head_ref=pull.head_ref,
            head_sha=pull.head_sha,
            head_owner=pull.head_owner,
            base_ref=pull.base_ref,
            state=pull.state,
            merged=pull.merged,
            draft=pull.draft,
            body=pull.body,
            title=pull.title,
        )


def fake_sha(text: str) -> str:
    """A 40-hex commit id derived from ``text`` (for ``set_branch``)."""
    return hashlib.sha1(text.encode()).hexdigest()


def _split_head(head: str) -> tuple[str, str]:
    owner, sep, branch = head.partition(":")
    if not sep or not owner or not branch or "/" in owner:
        raise ValueError(f"head must be 'owner:branch', got {head!r} (GitHub ignores a bare branch name)")
    return owner, branch
