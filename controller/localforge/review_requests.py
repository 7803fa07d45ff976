"""Requested reviewers of pull requests: users and teams.

GitHub's rules: requesting takes triage access; reviews may only be requested from people with
access of their own to the repository (owner, organization members, collaborators; a public
repository's implied read access is not enough) and from teams of the owning organization, and
never from the pull request's author (both 422). A request is answered when that reviewer submits
a review (``reviews``). Each new request fires ``pull_request`` ``review_requested`` with
``requested_reviewer`` or ``requested_team``; each removal ``review_request_removed``.

Teams are a small store of slugs and members (``crucible forge team add``), enough for review
requests: a team reads every repository of its organization.
"""

from __future__ import annotations

from typing import Any

from controller.localforge import render, render_issues, triage_view
from controller.localforge.errors import Invalid, invalid_field
from controller.localforge.models import Account, AccountType, Pull, Repo, Role, Team
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]


def _names(payload: Json, key: str) -> list[str]:
    value = payload.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_field("PullRequest", key)
    return list(dict.fromkeys(value))


class ReviewRequests:
    """Review-request operations of one forge."""

    def __init__(self, forge: Forge, pulls: Pulls) -> None:
        self.forge = forge
        self.pulls = pulls

    def listing(self, ctx: Ctx, pull: Pull) -> Json:
        """``GET /requested_reviewers``: GitHub's ``pull-request-review-request``."""
        users = triage_view.requested_users(self.forge, pull)
        teams = triage_view.requested_teams(self.forge, pull)
        return {
            "users": [render.user(ctx.urls, a) for a in users],
            "teams": [render_issues.team_full(ctx.urls, org, t) for org, t in teams],
        }

    def _not_collaborator(self, repo: Repo) -> Invalid:
        return Invalid(
            message="Reviews may only be requested from collaborators. One or more of the users or teams"
            f" you specified is not a collaborator of the {repo.full_name} repository."
        )

    def _users(self, repo: Repo, pull: Pull, names: list[str]) -> list[Account]:
        accounts = []
        for name in names:
            account = self.forge.store.account_by_login(name)
            if account is None or account.type is AccountType.ORGANIZATION:
                raise self._not_collaborator(repo)
            if account.id == pull.user_id:
                raise Invalid(message="Review cannot be requested from pull request author.")
            explicit = account.id == repo.owner_id or self.forge.association(repo, account) != "NONE"
            if not explicit:
                raise self._not_collaborator(repo)
            accounts.append(account)
        return accounts

    def _teams(self, repo: Repo, slugs: list[str]) -> list[Team]:
        owner = self.forge.account(repo.owner_id)
        teams = []
        for slug in slugs:
            team = self.forge.store.team_by_slug(owner.id, slug)
            if team is None or owner.type is not AccountType.ORGANIZATION:
                raise self._not_collaborator(repo)
            teams.append(team)
        return teams

    def request(self, ctx: Ctx, repo: Repo, pull: Pull, payload: Json) -> Pull:
        """``POST /requested_reviewers`` with ``reviewers`` and/or ``team_reviewers``."""
        self.forge.require(ctx, repo, Role.TRIAGE)
        users = self._users(repo, pull, _names(payload, "reviewers"))
        teams = self._teams(repo, _names(payload, "team_reviewers"))
        store = self.forge.store
        added_users = store.add_review_requests(pull.id, "user", [a.id for a in users])
        added_teams = store.add_review_requests(pull.id, "team", [t.id for t in teams])
        fresh = self.pulls.get(repo, pull.number)
        for account in users:
            if account.id in added_users:
                reviewer = render.user(ctx.urls, account)
                self.pulls.emit(ctx, repo, fresh, "review_requested", requested_reviewer=reviewer)
        self._emit_teams(ctx, repo, fresh, [t for t in teams if t.id in added_teams], "review_requested")
        return fresh

    def remove(self, ctx: Ctx, repo: Repo, pull: Pull, payload: Json) -> Pull:
        """``DELETE /requested_reviewers`` with ``reviewers`` and/or ``team_reviewers``."""
        self.forge.require(ctx, repo, Role.TRIAGE)
        store = self.forge.store
        users = [a for a in map(store.account_by_login, _names(payload, "reviewers")) if a is not None]
        owner = self.forge.account(repo.owner_id)
        slugs = _names(payload, "team_reviewers")
        teams = [t for t in (store.team_by_slug(owner.id, s) for s in slugs) if t is not None]
        gone_users = store.remove_review_requests(pull.id, "user", [a.id for a in users])
        gone_teams = store.remove_review_requests(pull.id, "team", [t.id for t in teams])
        fresh = self.pulls.get(repo, pull.number)
        for account in users:
            if account.id in gone_users:
                reviewer = render.user(ctx.urls, account)
                self.pulls.emit(ctx, repo, fresh, "review_request_removed", requested_reviewer=reviewer)
        self._emit_teams(ctx, repo, fresh, [t for t in teams if t.id in gone_teams], "review_request_removed")
        return fresh

    def _emit_teams(self, ctx: Ctx, repo: Repo, pull: Pull, teams: list[Team], action: str) -> None:
        for team in teams:
            shown = render_issues.team(ctx.urls, self.forge.account(team.org_id), team)
            self.pulls.emit(ctx, repo, pull, action, requested_team=shown)
