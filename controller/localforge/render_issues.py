"""JSON shapes of an issue's triage (labels, teams) and of the GitHub App behind a ``[bot]``
account, as GitHub's REST API and webhooks print them."""

from __future__ import annotations

from urllib.parse import quote

from controller.localforge.models import Account, Label, Repo, Team
from controller.localforge.render import Json, Urls, node_id, user


def label(urls: Urls, repo: Repo, item: Label) -> Json:
    """GitHub's ``label``. ``archived_at``/``archived_by`` (labels are never archived here) are newer
    than the oracle's description, and githubkit's current models require them."""
    return {
        "id": item.id,
        "node_id": node_id("Label", item.id),
        "url": f"{urls.repo_api(repo)}/labels/{quote(item.name, safe='')}",
        "name": item.name,
        "color": item.color,
        "default": item.is_default,
        "description": item.description,
        "archived_at": None,
        "archived_by": None,
    }


def team(urls: Urls, org: Account, item: Team) -> Json:
    """GitHub's ``team-simple`` (and ``team`` with ``parent`` and ``permissions``, which it adds).

    The forge's teams are a store of slugs and members for review requests: each team reads
    everything its organization owns, so ``permission`` is ``pull``.
    """
    api = f"{urls.api}/organizations/{org.id}/team/{item.id}"
    return {
        "id": item.id,
        "node_id": node_id("Team", item.id),
        "url": api,
        "html_url": f"{urls.web}/orgs/{org.login}/teams/{item.slug}",
        "name": item.name,
        "slug": item.slug,
        "description": item.description,
        "privacy": "closed",
        "notification_setting": "notifications_enabled",
        "permission": "pull",
        "members_url": f"{api}/members{{/member}}",
        "repositories_url": f"{api}/repos",
        "type": "organization",
        "organization_id": org.id,
    }


def team_full(urls: Urls, org: Account, item: Team) -> Json:
    """GitHub's ``team`` (as listed under ``teams`` of ``GET /requested_reviewers``)."""
    flags = {"pull": True, "triage": False, "push": False, "maintain": False, "admin": False}
    return {**team(urls, org, item), "parent": None, "permissions": flags}


def app_slug(bot: Account) -> str:
    """A bot account ``name[bot]`` stands for the GitHub App ``name``."""
    return bot.login.removesuffix("[bot]")


def integration(urls: Urls, bot: Account) -> Json:
    """GitHub's ``integration`` (a GitHub App) for the App a ``[bot]`` account acts for."""
    slug = app_slug(bot)
    return {
        "id": bot.id,
        "slug": slug,
        "node_id": node_id("Integration", bot.id),
        "client_id": f"Iv1.{bot.id:016x}",
        "owner": user(urls, bot),
        "name": slug,
        "description": None,
        "external_url": f"{urls.web}/apps/{slug}",
        "html_url": f"{urls.web}/apps/{slug}",
        "created_at": bot.created_at,
        "updated_at": bot.created_at,
        "permissions": {
            "checks": "write",
            "contents": "write",
            "issues": "write",
            "metadata": "read",
            "pull_requests": "write",
            "statuses": "write",
        },
        "events": [],
    }
