"""The issue side of pull requests: ``PATCH /issues/{n}`` and ``GET /repos/{o}/{r}/issues``.

Every issue of the forge is a pull request (the forge has no plain issues), so editing an issue
edits its pull request (title, body, state: the ``pull_request`` webhooks follow) and its
triage (labels, assignees: dropped silently for callers without write access, as GitHub does).
"""

from __future__ import annotations

from typing import Any

from controller.localforge.assignees import Assignees, logins
from controller.localforge.errors import invalid_field
from controller.localforge.labels import Labels
from controller.localforge.models import ROLE_RANK, Pull, Repo, Role
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

_SORTS = {"created": "created_at", "updated": "updated_at"}


class Issues:
    """Issue edits and listings of one forge."""

    def __init__(self, forge: Forge, pulls: Pulls, labels: Labels, assignees: Assignees) -> None:
        self.forge = forge
        self.pulls = pulls
        self.labels = labels
        self.assignees = assignees

    def update(self, ctx: Ctx, repo: Repo, number: int, payload: Json) -> Pull:
        """Title, body, state, labels, assignees (or the older ``assignee``), ``milestone: null``."""
        pull = self.pulls.get(repo, number)
        if payload.get("milestone") is not None:
            raise invalid_field("Issue", "milestone")
        if payload.get("state") not in {None, "open", "closed"}:
            raise invalid_field("Issue", "state")
        edits: Json = {k: payload[k] for k in ("title", "body", "state") if k in payload}
        if edits:
            self.pulls.update(ctx, repo, pull, edits)
        role = self.forge.role(repo, ctx.actor) if ctx.actor is not None else None
        writer = role is not None and ROLE_RANK[role] >= ROLE_RANK[Role.PUSH]
        if "labels" in payload and writer:
            self.labels.replace(ctx, repo, number, {"labels": payload["labels"] or []})
        if "assignees" in payload:
            self.assignees.replace(ctx, repo, number, logins(payload))
        elif "assignee" in payload:
            single = payload["assignee"]
            self.assignees.replace(ctx, repo, number, [] if single is None else logins(payload, "assignee"))
        return self.pulls.get(repo, number)

    def listing(self, repo: Repo, params: dict[str, str], since: str | None) -> list[Pull]:
        """``state``, ``labels`` (all of them), ``assignee`` (a login, ``none`` or ``*``),
        ``creator``, ``sort`` (created, updated, comments) and ``direction``, ``since``."""
        store = self.forge.store
        where: Json = {}
        state = params.get("state", "open")
        if state in {"open", "closed"}:
            where["state"] = state
        if params.get("creator"):
            creator = store.account_by_login(params["creator"])
            where["user_id"] = creator.id if creator else -1
        sort = params.get("sort", "created")
        direction = params.get("direction", "desc")
        direction = direction if direction in {"asc", "desc"} else "desc"
        column = _SORTS.get(sort, "created_at")
        pulls = store.pulls(repo.id, where, f"{column} {direction}, id {direction}")
        label_ids = self._label_filter(repo, params.get("labels", ""))
        assignee = self._assignee_filter(params.get("assignee"))
        if label_ids is None or assignee == -2:
            return []
        if label_ids or assignee is not None:
            numbers = store.issue_numbers(repo.id, label_ids=label_ids, assignee_id=assignee)
            pulls = [p for p in pulls if p.number in numbers]
        if since is not None:
            pulls = [p for p in pulls if p.updated_at >= since]
        if sort == "comments":

            def comments(p: Pull) -> int:
                return store.count("issue_comments", {"repo_id": repo.id, "number": p.number})

            pulls.sort(key=comments, reverse=direction == "desc")
        return pulls

    def _label_filter(self, repo: Repo, raw: str) -> list[int] | None:
        """Label ids to require; None when a named label does not exist (nothing matches)."""
        ids = []
        for name in (n.strip() for n in raw.split(",") if n.strip()):
            label = self.forge.store.label_by_name(repo.id, name)
            if label is None:
                return None
            ids.append(label.id)
        return ids

    def _assignee_filter(self, raw: str | None) -> int | None:
        """None: any; -1: none; 0: someone; -2: an unknown login (nothing matches); else a user id."""
        if not raw:
            return None
        if raw == "none":
            return -1
        if raw == "*":
            return 0
        account = self.forge.store.account_by_login(raw)
        return account.id if account is not None else -2
