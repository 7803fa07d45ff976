"""The ``github`` adapter's team-process writes (``TeamProcess``): labels, review requests,
assignees, commit statuses and check runs, through PyGithub. Part of the adapter (``github.py``
builds it with its own clients, write spacing and error mapping); the only other module that
imports PyGithub.

GitHub answers a batch it cannot take whole with one 422 that does not say which name it refused
("Reviews may only be requested from collaborators. One or more of the users or teams you specified
is not a collaborator"). Nothing of the batch was written then, so the names are tried one at a time
to tell the taken from the refused: each single try is a first attempt, not a re-send. Assignees are
different: GitHub drops the ones it cannot assign without an error, so the answer's list tells.

A check run that was created although the answer was lost would be created twice by the next
publish; so before creating one, the commit's check runs of that name are read, and one with the
same conclusion and title means it is there already.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import requests
from github import GithubException
from github.GithubObject import NotSet
from github.Repository import Repository

from controller.forge.base import Applied, CommitCheck, ForgeError, ForgeNotFound

T = TypeVar("T")
REFUSALS = (403, 422)  # the forge said no to these names; asking again changes nothing
MAX_DESCRIPTION = 140  # GitHub's limit on a commit status description
STATUS_STATE = {"success": "success", "failure": "failure", "neutral": "failure"}

Write = Callable[[Callable[[], Any]], Any]
Read = Callable[[str, Callable[[], Any]], Any]
Classify = Callable[[str, GithubException | requests.RequestException], tuple[ForgeError, bool]]


class GithubTeamProcess:
    """``TeamProcess`` over PyGithub; ``repo_of`` gives the lazy repository object (no request),
    ``write``/``read`` are the adapter's spaced write and retried read, ``classify`` its error map."""

    def __init__(
        self,
        repo_of: Callable[[str], Repository],
        write: Write,
        read: Read,
        classify: Classify,
        *,
        app: bool,
    ) -> None:
        self._repo_of = repo_of
        self._write = write
        self._read = read
        self._classify = classify
        self._app = app

    @property
    def check_runs(self) -> bool:
        """True with GitHub App credentials: GitHub lets only Apps create check runs."""
        return self._app

    def add_labels(self, full_name: str, number: int, labels: Sequence[str]) -> Applied:
        issue = self._repo_of(full_name).get_issue(number)
        what = f"add labels to {full_name}#{number}"
        return self._batch(what, list(labels), lambda names: issue.add_to_labels(*names))

    def request_reviewers(
        self, full_name: str, number: int, reviewers: Sequence[str], team_reviewers: Sequence[str]
    ) -> Applied:
        pull = self._repo_of(full_name).get_pull(number)
        what = f"request reviews on {full_name}#{number}"
        names = [*reviewers, *(f"team:{slug}" for slug in team_reviewers)]

        def post(batch: list[str]) -> None:
            users = [n for n in batch if not n.startswith("team:")]
            teams = [n.removeprefix("team:") for n in batch if n.startswith("team:")]
            pull.create_review_request(reviewers=users or NotSet, team_reviewers=teams or NotSet)

        return self._batch(what, names, post)

    def add_assignees(self, full_name: str, number: int, assignees: Sequence[str]) -> Applied:
        if not assignees:
            return Applied()
        issue = self._repo_of(full_name).get_issue(number)
        what = f"add assignees to {full_name}#{number}"
        try:
            self._write(lambda: issue.add_to_assignees(*assignees))
        except (GithubException, requests.RequestException) as exc:
            if isinstance(exc, GithubException) and exc.status in REFUSALS:
                reason = f"{exc.status} {error_message(exc)}"
                return Applied(refused=tuple((name, reason) for name in assignees))
            raise self._classify(what, exc)[0] from exc
        taken = {user.login.lower() for user in issue.assignees}
        return Applied(
            done=tuple(n for n in assignees if n.lower() in taken),
            refused=tuple(
                (n, "GitHub did not assign them (they need access to the repository)")
                for n in assignees
                if n.lower() not in taken
            ),
        )

    def report(self, full_name: str, sha: str, check: CommitCheck, *, check_run: bool) -> None:
        repo = self._repo_of(full_name)
        what = f"report {check.name} on {full_name}@{sha[:12]}"
        try:
            if check_run:
                if not self._has_check_run(repo, sha, check):
                    self._write(lambda: _create_check_run(repo, sha, check))
                return
            description = check.title if len(check.title) <= MAX_DESCRIPTION else check.title[:139] + "…"
            commit = repo.get_commit(sha)
            self._write(
                lambda: commit.create_status(
                    STATUS_STATE[check.conclusion],
                    target_url=check.details_url or NotSet,
                    description=description,
                    context=check.name,
                )
            )
        except (GithubException, requests.RequestException) as exc:
            raise self._classify(what, exc)[0] from exc

    # -- plumbing ---------------------------------------------------------------------------

    def _batch(self, what: str, names: list[str], post: Callable[[list[str]], None]) -> Applied:
        """Post all ``names`` at once; if the forge refuses the batch, each alone to tell which."""
        if not names:
            return Applied()
        try:
            self._write(lambda: post(names))
            return Applied(done=tuple(names))
        except (GithubException, requests.RequestException) as exc:
            if not (isinstance(exc, GithubException) and exc.status in REFUSALS):
                raise self._refine(what, exc) from exc
            if len(names) == 1:
                return Applied(refused=((names[0], f"{exc.status} {error_message(exc)}"),))
        done: list[str] = []
        refused: list[tuple[str, str]] = []
        for name in names:
            one = self._batch(what, [name], post)
            done += one.done
            refused += one.refused
        return Applied(tuple(done), tuple(refused))

    def _refine(self, what: str, exc: GithubException | requests.RequestException) -> ForgeError:
        error = self._classify(what, exc)[0]
        if isinstance(exc, GithubException) and exc.status == 404:
            return ForgeNotFound(str(error))
        return error

    def _has_check_run(self, repo: Repository, sha: str, check: CommitCheck) -> bool:
        runs = repo.get_commit(sha).get_check_runs(check_name=check.name)

        def same() -> bool:
            for run in runs:
                title = run.output.title if run.output is not None else None
                if run.conclusion == check.conclusion and title == check.title:
                    return True
            return False

        return bool(self._read(f"list check runs {check.name} of {sha[:12]}", same))


def _create_check_run(repo: Repository, sha: str, check: CommitCheck) -> None:
    output: dict[str, str | list[dict[str, str | int]]] = {
        "title": check.title,
        "summary": check.summary or check.title,
    }
    if check.text:
        output["text"] = check.text
    repo.create_check_run(
        check.name,
        sha,
        status="completed",
        conclusion=check.conclusion,
        output=output,
        details_url=check.details_url or NotSet,
    )


def error_message(exc: GithubException) -> str:
    """GitHub's message and its field errors, as one line."""
    data = exc.data
    if not isinstance(data, dict):
        return str(data or "")
    parts = [str(data.get("message", ""))]
    for error in data.get("errors") or []:
        if isinstance(error, dict) and error.get("message"):
            parts.append(str(error["message"]))
        elif isinstance(error, dict) and error.get("code"):  # {"resource": "Label", "field": "name", ...}
            where = " ".join(str(error[k]) for k in ("resource", "field") if error.get(k))
            parts.append(f"{where} {error['code']}".strip())
        elif isinstance(error, str):
            parts.append(error)
    return "; ".join(p for p in parts if p)
