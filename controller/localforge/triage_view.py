"""What an issue or pull request shows of its triage: labels, assignees, requested reviewers.

One read for every place that renders a pull request or its issue (REST answers, webhook
payloads), so they never disagree about who is assigned or which labels are on it.
"""

from __future__ import annotations

from typing import Any

from controller.localforge import render, render_issues
from controller.localforge.models import Account, Pull, Repo, Team
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]


def labels(forge: Forge, ctx: Ctx, repo: Repo, number: int) -> list[Json]:
    return [render_issues.label(ctx.urls, repo, item) for item in forge.store.issue_labels(repo.id, number)]


def assignees(forge: Forge, ctx: Ctx, repo: Repo, number: int) -> list[Json]:
    users = [forge.account(user_id) for user_id in forge.store.assignees(repo.id, number)]
    return [render.user(ctx.urls, account) for account in users]


def requested_users(forge: Forge, pull: Pull) -> list[Account]:
    return [forge.account(user_id) for user_id in forge.store.review_requests(pull.id, "user")]


def requested_teams(forge: Forge, pull: Pull) -> list[tuple[Account, Team]]:
    out = []
    for team_id in forge.store.review_requests(pull.id, "team"):
        team = forge.store.team_by_id(team_id)
        if team is not None:
            out.append((forge.account(team.org_id), team))
    return out


def issue_fields(forge: Forge, ctx: Ctx, repo: Repo, number: int) -> Json:
    """``labels``, ``assignee`` and ``assignees`` of issue ``number``."""
    people = assignees(forge, ctx, repo, number)
    return {
        "labels": labels(forge, ctx, repo, number),
        "assignee": people[0] if people else None,
        "assignees": people,
    }


def pull_fields(forge: Forge, ctx: Ctx, repo: Repo, pull: Pull) -> Json:
    """``issue_fields`` plus ``requested_reviewers`` and ``requested_teams`` of a pull request."""
    return {
        **issue_fields(forge, ctx, repo, pull.number),
        "requested_reviewers": [render.user(ctx.urls, a) for a in requested_users(forge, pull)],
        "requested_teams": [
            render_issues.team_full(ctx.urls, org, t) for org, t in requested_teams(forge, pull)
        ],
    }
