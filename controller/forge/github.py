"""The ``github`` forge adapter: GitHub, GitHub Enterprise and crucible's local forge, via PyGithub.

This module and its team-process half (``github_team.py``) are the only ones that import PyGithub;
everything else sees ``Forge``, ``RepoInfo``, ``PullInfo`` and the ``Forge*`` errors of
``controller.forge.base``.

Why it looks the way it does (docs/github.md, issue 3 deliverables 1, 4, 5):

- PyGithub's default retry re-sends POSTs, which can open a second pull request after a 5xx that
  had in fact created the first. So the client never retries on its own (``retry=None``); this
  adapter retries *reads* itself (5xx, dropped connections, rate limits honouring ``retry-after``
  and ``x-ratelimit-reset``) and never re-sends a write blindly: ``create_pull`` after an
  ambiguous failure first looks for the pull request by ``owner:branch`` and only then posts once
  more.
- PyGithub paces itself with ``time.sleep``; here its pacing is off and writes are spaced by
  ``write_interval`` with an injectable clock and sleep, so tests and benchmarks run at full speed.
- The client is lazy: a method costs one REST call (the repository object is never fetched
  unless its own fields are asked for).
- There is no merge, close, approve, review or comment call here, on purpose; a test reads this
  module's source to keep it that way.
- The feedback reads (repository-wide lists, reviews of a PR) are not here: PyGithub's lists cannot
  send ``If-None-Match``, and a 304 is what keeps polling free against the rate limit, so
  ``feedback_reader()`` hands out the httpx reader of ``polling.py`` with the same credentials
  (tokens and App installation tokens alike).
"""

from __future__ import annotations

import base64
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, TypeVar

import requests
from github import Auth, Github, GithubException, GithubIntegration
from github.GithubObject import NotSet
from github.PullRequest import PullRequest
from github.Repository import Repository

from controller.forge.auth import ForgeCredentials
from controller.forge.base import (
    ForgeError,
    ForgeNotFound,
    ForgeRateLimited,
    ForgeUsage,
    PullInfo,
    RepoInfo,
)
from controller.forge.github_team import GithubTeamProcess, error_message
from controller.forge.polling import GithubReader
from controller.forge.ratelimit import rate_limit_wait

T = TypeVar("T")

READ_ATTEMPTS = 3  # a read is tried at most this often
READ_BACKOFF = 1.0  # seconds before the 2nd read attempt after a 5xx or a dropped connection; doubled after
WRITE_BACKOFF = 2.0  # seconds between an ambiguous failed POST and the look-up that precedes its one retry
ALREADY_EXISTS = "a pull request already exists"


def split_head(head: str) -> tuple[str, str]:
    """``owner:branch`` -> (owner, branch); a bare branch is a ValueError (GitHub ignores it in filters)."""
    owner, sep, branch = head.partition(":")
    if not sep or not owner or not branch or "/" in owner:
        raise ValueError(f"head must be 'owner:branch', got {head!r} (GitHub ignores a bare branch name)")
    return owner, branch


def basic_auth_env(token: str) -> dict[str, str]:
    """git configuration passed through the environment: an ``Authorization`` header for every HTTP
    request of one git command, never on the command line or in ``.git/config``; no prompting."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        "GIT_TERMINAL_PROMPT": "0",
    }


class GithubForge:
    """``Forge`` over GitHub's REST API (``api_url``: ``https://api.github.com``,
    ``https://HOST/api/v3`` for GitHub Enterprise and the local forge).

    write_interval: seconds between two writes (GitHub asks for 1 s; 0 for the local forge).
    timeout: seconds per HTTP request (rounded up to whole seconds: PyGithub takes an int).
    max_wait: a rate limit asking for a longer wait is raised as ``ForgeRateLimited`` instead of
        being slept through.
    sleep / clock: injectable, for the waits and the write spacing (tests never really sleep).
    """

    def __init__(
        self,
        api_url: str,
        credentials: ForgeCredentials,
        *,
        write_interval: float = 1.0,
        timeout: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        max_wait: float = 120.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._options: _ClientOptions = {
            "base_url": self.api_url,
            "timeout": max(1, math.ceil(timeout)),
            "user_agent": "crucible",
            "retry": None,
            "seconds_between_requests": 0,
            "seconds_between_writes": 0,
            "lazy": True,
        }
        self._write_interval = write_interval
        self._timeout = timeout
        self._reader: GithubReader | None = None
        self._reader_lock = threading.Lock()
        self._sleep = sleep
        self._clock = clock
        self._max_wait = max_wait
        self._write_lock = threading.Lock()
        self._last_write: float | None = None
        self._sessions = _Sessions(credentials, self._options, self._read)
        self._calls = 0  # REST calls sent (each one request: the client is lazy), for ``usage``
        self._calls_lock = threading.Lock()

    # -- reads ------------------------------------------------------------------------------

    def repo(self, full_name: str) -> RepoInfo:
        repo = self._repo(full_name)
        return self._read(
            f"get repository {full_name}",
            lambda: RepoInfo(repo.full_name, repo.clone_url, repo.default_branch),
        )

    def branch_sha(self, full_name: str, branch: str) -> str | None:
        """None when GitHub answers 404 (no such branch, or no such repository)."""
        repo = self._repo(full_name)
        try:
            return self._read(
                f"get branch {branch} of {full_name}", lambda: repo.get_branch(branch).commit.sha
            )
        except ForgeNotFound:
            return None

    def find_pull(self, full_name: str, head: str) -> PullInfo | None:
        owner, branch = split_head(head)
        repo = self._repo(full_name)
        pulls = repo.get_pulls(state="all", head=head, sort="created", direction="desc")
        found = self._read(f"list pulls of {full_name} for {head}", lambda: _matching(pulls, owner, branch))
        return max(found, key=lambda p: p.number, default=None)

    def get_pull(self, full_name: str, number: int) -> PullInfo:
        pull = self._repo(full_name).get_pull(number)
        return self._read(f"get pull {full_name}#{number}", lambda: _pull_info(pull))

    def permission(self, full_name: str, login: str) -> str:
        repo = self._repo(full_name)
        return self._read(
            f"get permission of {login} on {full_name}", lambda: repo.get_collaborator_permission(login)
        )

    def git_auth_env(self, full_name: str) -> Mapping[str, str]:
        """Basic ``x-access-token:<token>`` (the installation token for an App), as GitHub documents."""
        return basic_auth_env(self._sessions.git_token(full_name))

    def feedback_reader(self) -> GithubReader:
        """The poller's reader (httpx, conditional GETs) on the same API with the same credentials;
        one per adapter, so its connection pool is shared by every poll."""
        with self._reader_lock:
            if self._reader is None:
                self._reader = GithubReader(
                    self.api_url, self._sessions.git_token, timeout=self._timeout, sleep=self._sleep
                )
            return self._reader

    def team_process(self) -> GithubTeamProcess:
        """Labels, review requests, assignees, statuses and check runs with these credentials
        (check runs only for a GitHub App, as GitHub allows)."""
        app = self._sessions.is_app
        return GithubTeamProcess(self._repo, self._write, self._read, self._classify, app=app)

    def usage(self) -> ForgeUsage:
        """Requests sent so far and the rate limit left (``ForgeUsage``); costs no request."""
        with self._calls_lock:
            requests_sent = self._calls
        left = [self._sessions.rate_remaining()]
        reader = self._reader
        if reader is not None:
            requests_sent += reader.requests
            rate = reader.rate_status()
            left.append(rate.remaining if rate is not None else None)
        known = [n for n in left if n is not None]
        return ForgeUsage(requests_sent, min(known) if known else None)

    # -- writes -----------------------------------------------------------------------------

    def create_pull(
        self, full_name: str, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> PullInfo:
        """POST at most twice: after an ambiguous failure (5xx, timeout, dropped connection) or a
        rate limit, wait, look for an open PR ``head`` -> ``base``, and post again only if there is
        none; a 422 "already exists" resolves to the existing PR."""
        split_head(head)
        repo = self._repo(full_name)
        what = f"create pull {head} -> {base} in {full_name}"
        for attempt in (1, 2):
            try:
                created = self._write(
                    lambda: repo.create_pull(base=base, head=head, title=title, body=body, draft=draft)
                )
                return _pull_info(created)
            except (GithubException, requests.RequestException) as exc:
                if isinstance(exc, GithubException) and _already_exists(exc):
                    return self._existing_open(full_name, head, base, what, exc)
                error, retryable = self._classify(what, exc)
                wait = error.retry_after if isinstance(error, ForgeRateLimited) else WRITE_BACKOFF
                if not retryable or attempt == 2 or wait > self._max_wait:
                    raise error from exc
                self._sleep(wait)
            found = self._find_open(full_name, head, base)
            if found is not None:
                return found
        raise AssertionError("unreachable")  # pragma: no cover

    def update_pull(
        self, full_name: str, number: int, *, body: str | None = None, title: str | None = None
    ) -> PullInfo:
        """One PATCH, never re-sent (a failure raises; the caller publishes again later)."""
        if body is None and title is None:
            return self.get_pull(full_name, number)
        pull = self._repo(full_name).get_pull(number)
        what = f"update pull {full_name}#{number}"
        try:
            self._write(lambda: pull.edit(title=_opt(title), body=_opt(body)))
            return _pull_info(pull)
        except (GithubException, requests.RequestException) as exc:
            raise self._classify(what, exc)[0] from exc

    # -- plumbing ---------------------------------------------------------------------------

    def _repo(self, full_name: str) -> Repository:
        _split_repo(full_name)
        return self._sessions.client(full_name).get_repo(full_name)

    def _read(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, retried on 5xx, dropped connections and rate limits (waiting as told)."""
        for attempt in range(1, READ_ATTEMPTS + 1):
            try:
                self._count()
                return call()
            except (GithubException, requests.RequestException) as exc:
                error, retryable = self._classify(what, exc)
                wait = (
                    error.retry_after
                    if isinstance(error, ForgeRateLimited)
                    else READ_BACKOFF * 2 ** (attempt - 1)
                )
                if not retryable or attempt == READ_ATTEMPTS or wait > self._max_wait:
                    raise error from exc
                self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(self, call: Callable[[], T]) -> T:
        """``call()`` once, at least ``write_interval`` after the previous write ended."""
        with self._write_lock:
            if self._last_write is not None:
                wait = self._last_write + self._write_interval - self._clock()
                if wait > 0:
                    self._sleep(wait)
            try:
                self._count()
                return call()
            finally:
                self._last_write = self._clock()

    def _count(self) -> None:
        with self._calls_lock:
            self._calls += 1

    def _error(self, what: str, exc: GithubException) -> ForgeError:
        message = f"{what}: {exc.status} {error_message(exc)}"
        wait = rate_limit_wait(exc.status, exc.headers or {}, error_message(exc), time.time())
        if wait is not None:
            return ForgeRateLimited(message, wait)
        if exc.status == 404:
            return ForgeNotFound(message)
        return ForgeError(message)

    def _classify(
        self, what: str, exc: GithubException | requests.RequestException
    ) -> tuple[ForgeError, bool]:
        """The crucible error for a failed call, and whether the same call may succeed if repeated."""
        if isinstance(exc, GithubException):
            error = self._error(what, exc)
            return error, isinstance(error, ForgeRateLimited) or exc.status >= 500
        return ForgeError(f"{what}: no complete answer ({type(exc).__name__}: {exc})"), True

    def _find_open(self, full_name: str, head: str, base: str) -> PullInfo | None:
        owner, branch = split_head(head)
        pulls = self._repo(full_name).get_pulls(state="open", head=head, base=base)
        found = self._read(
            f"list open pulls of {full_name} for {head}", lambda: _matching(pulls, owner, branch)
        )
        return max(found, key=lambda p: p.number, default=None)

    def _existing_open(
        self, full_name: str, head: str, base: str, what: str, exc: GithubException
    ) -> PullInfo:
        found = self._find_open(full_name, head, base)
        if found is None:
            raise ForgeError(
                f"{what}: {exc.status} {error_message(exc)} (but no open pull request was found)"
            )
        return found


class _ClientOptions(TypedDict):
    """The keyword arguments every PyGithub client here is built with (one place, so a token client,
    an installation client and the App's integration client behave alike)."""

    base_url: str
    timeout: int
    user_agent: str
    retry: None
    seconds_between_requests: float
    seconds_between_writes: float
    lazy: bool


class _Sessions:
    """PyGithub clients: one for a token; one per App installation, resolved per repository."""

    def __init__(
        self,
        credentials: ForgeCredentials,
        options: _ClientOptions,
        read: Callable[[str, Callable[[], Any]], Any],
    ) -> None:
        self._credentials = credentials
        self._options = options
        self._read = read
        self._lock = threading.Lock()
        self._by_repo: dict[str, tuple[Github, Auth.AppInstallationAuth]] = {}
        self._by_installation: dict[int, tuple[Github, Auth.AppInstallationAuth]] = {}
        self._token_client: Github | None = None
        self._app: Auth.AppAuth | None = None
        self._integration: GithubIntegration | None = None
        if credentials.token is not None:
            self._token_client = Github(auth=Auth.Token(credentials.token), **options)
        else:
            assert credentials.app_id is not None and credentials.private_key is not None
            self._app = Auth.AppAuth(credentials.app_id, credentials.private_key)
            self._integration = GithubIntegration(auth=self._app, **options)

    @property
    def is_app(self) -> bool:
        return self._credentials.token is None

    def client(self, full_name: str) -> Github:
        if self._token_client is not None:
            return self._token_client
        return self._installation(full_name)[0]

    def rate_remaining(self) -> int | None:
        """The smallest ``x-ratelimit-remaining`` PyGithub's clients last saw (None: none seen yet);
        read from their requesters, never by asking ``/rate_limit``."""
        with self._lock:
            clients = [self._token_client] if self._token_client is not None else []
            clients += [client for client, _auth in self._by_installation.values()]
        seen = [c.requester.rate_limiting for c in clients]
        known = [remaining for remaining, limit in seen if limit >= 0]
        return min(known) if known else None

    def git_token(self, full_name: str) -> str:
        if self._credentials.token is not None:
            return self._credentials.token
        auth = self._installation(full_name)[1]
        token: str = self._read(f"get an installation token for {full_name}", lambda: auth.token)
        return token

    def _installation(self, full_name: str) -> tuple[Github, Auth.AppInstallationAuth]:
        with self._lock:
            cached = self._by_repo.get(full_name.lower())
        if cached is not None:
            return cached
        assert self._integration is not None and self._app is not None
        owner, _, name = full_name.partition("/")
        integration = self._integration
        installation_id: int = self._read(
            f"find the App installation for {full_name}",
            lambda: integration.get_repo_installation(owner, name).id,
        )
        with self._lock:
            session = self._by_installation.get(installation_id)
            if session is None:
                auth = self._app.get_installation_auth(installation_id)
                session = (Github(auth=auth, **self._options), auth)
                self._by_installation[installation_id] = session
            self._by_repo[full_name.lower()] = session
        return session


def _pull_info(pull: PullRequest) -> PullInfo:
    """Only fields that both the single-PR and the list answers carry (no extra request)."""
    label = pull.head.label
    return PullInfo(
        number=pull.number,
        url=pull.html_url,
        head_ref=pull.head.ref,
        head_sha=pull.head.sha,
        head_owner=label.partition(":")[0] if label else "",  # None when the head fork was deleted
        base_ref=pull.base.ref,
        state=pull.state,
        merged=pull.merged_at is not None,
        draft=bool(pull.draft),
        body=pull.body or "",
        title=pull.title or "",
    )


def _matching(pulls: Iterable[PullRequest], owner: str, branch: str) -> list[PullInfo]:
    """The listed PRs whose head really is ``owner:branch`` (a server that ignored the filter
    cannot hand us somebody else's PR)."""
    found = []
    for pull in pulls:
        info = _pull_info(pull)
        if info.head_ref == branch and info.head_owner.lower() == owner.lower():
            found.append(info)
    return found


def _opt(value: str | None) -> Any:
    return NotSet if value is None else value


def _already_exists(exc: GithubException) -> bool:
    return exc.status == 422 and ALREADY_EXISTS in error_message(exc).lower()


def _split_repo(full_name: str) -> None:
    owner, _, name = full_name.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"repository must be 'owner/name', got {full_name!r}")
