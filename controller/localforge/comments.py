"""Issue (conversation) comments on pull requests, and the issue view of a pull request.

On GitHub a pull request is also an issue with the same number; conversation comments live on
the issue. Their ``issue_comment`` webhooks carry the issue with ``pull_request`` set, which is how
receivers tell PR comments from issue comments.
"""

from __future__ import annotations

from typing import Any

from controller.localforge import render, render_pulls, triage_view
from controller.localforge.errors import Forbidden, Invalid, NotFound
from controller.localforge.models import ROLE_RANK, IssueComment, Pull, Repo, Role
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]


class Comments:
    """Issue-comment operations of one forge."""

    def __init__(self, forge: Forge, pulls: Pulls) -> None:
        self.forge = forge
        self.pulls = pulls

    def issue_json(self, ctx: Ctx, repo: Repo, pull: Pull) -> Json:
        author = self.forge.account(pull.user_id)
        count = self.forge.store.count("issue_comments", {"repo_id": repo.id, "number": pull.number})
        closer = self.forge.store.account_by_id(pull.closed_by) if pull.closed_by else None
        closed_by = render.user(ctx.urls, closer) if closer else None
        association = self.forge.association(repo, author)
        triage = triage_view.issue_fields(self.forge, ctx, repo, pull.number)
        return render_pulls.issue(
            ctx.urls, repo, pull, author, association, count, closed_by=closed_by, triage=triage
        )

    def comment_json(self, ctx: Ctx, repo: Repo, comment: IssueComment) -> Json:
        author = self.forge.account(comment.user_id)
        return render_pulls.issue_comment(
            ctx.urls, repo, comment, author, self.forge.association(repo, author)
        )

    def create(self, ctx: Ctx, repo: Repo, number: int, payload: Json) -> IssueComment:
        actor = self.forge.require(ctx, repo, Role.PULL)
        pull = self.pulls.get(repo, number)
        body = payload.get("body")
        if not isinstance(body, str) or not body:
            raise Invalid([{"resource": "IssueComment", "code": "missing_field", "field": "body"}])
        comment = self.forge.store.add_issue_comment(repo.id, pull.number, actor.id, body)
        self._emit(ctx, repo, pull, comment, "created")
        return comment

    def listing(
        self, repo: Repo, number: int | None, params: dict[str, str], since: str | None
    ) -> list[IssueComment]:
        """Comments of one issue or of the whole repository (``sort``/``direction``/``since``)."""
        where: dict[str, Any] = {"repo_id": repo.id}
        if number is not None:
            where["number"] = self.pulls.get(repo, number).number
        column = "updated_at" if params.get("sort") == "updated" else "created_at"
        direction = "desc" if params.get("direction") == "desc" and "sort" in params else "asc"
        return self.forge.store.issue_comments(where, since, f"{column} {direction}, id {direction}")

    def get(self, repo: Repo, comment_id: int) -> IssueComment:
        comment = self.forge.store.issue_comment_by_id(comment_id)
        if comment is None or comment.repo_id != repo.id:
            raise NotFound()
        return comment

    def edit(self, ctx: Ctx, repo: Repo, comment_id: int, payload: Json) -> IssueComment:
        comment = self._own(ctx, repo, self.get(repo, comment_id))
        body = payload.get("body")
        if not isinstance(body, str) or not body:
            raise Invalid([{"resource": "IssueComment", "code": "missing_field", "field": "body"}])
        self.forge.store.update_issue_comment(comment.id, body)
        fresh = self.get(repo, comment.id)
        pull = self.pulls.get(repo, comment.number)
        self._emit(ctx, repo, pull, fresh, "edited", changes={"body": {"from": comment.body}})
        return fresh

    def delete(self, ctx: Ctx, repo: Repo, comment_id: int) -> None:
        comment = self._own(ctx, repo, self.get(repo, comment_id))
        pull = self.pulls.get(repo, comment.number)
        self.forge.store.delete_issue_comment(comment.id)
        self._emit(ctx, repo, pull, comment, "deleted")

    def _own(self, ctx: Ctx, repo: Repo, comment: IssueComment) -> IssueComment:
        actor = self.forge.require(ctx, repo, Role.PULL)
        role = self.forge.role(repo, actor) or Role.PULL
        if actor.id != comment.user_id and ROLE_RANK[role] < ROLE_RANK[Role.PUSH]:
            raise Forbidden("Must have push access to edit others' comments.")
        return comment

    def _emit(
        self, ctx: Ctx, repo: Repo, pull: Pull, comment: IssueComment, action: str, **extra: Any
    ) -> None:
        payload = {
            "action": action,
            **extra,
            "issue": self.issue_json(ctx, repo, pull),
            "comment": self.comment_json(ctx, repo, comment),
        }
        self.forge.emit(ctx, repo, "issue_comment", payload)
