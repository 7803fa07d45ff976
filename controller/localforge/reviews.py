"""Reviews and review (inline) comments, placed on the PR's diff as GitHub places them.

A comment names ``path`` and ``line`` (with ``side`` LEFT/RIGHT) or the legacy ``position``; the
forge finds that line in the three-dot diff of the commented commit and stores the position and
the ``diff_hunk`` (hunk header through the commented line). A line outside the diff is a 422, as
on GitHub. A lone comment or a reply creates a one-comment review, and both the
``pull_request_review_comment`` and the ``pull_request_review`` webhooks fire, as GitHub does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from controller.localforge import gitops, render_pulls
from controller.localforge.errors import Forbidden, Invalid, NotFound, invalid_custom
from controller.localforge.models import ROLE_RANK, Pull, Repo, Review, ReviewComment, ReviewState, Role
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

_EVENTS = {
    "COMMENT": ReviewState.COMMENTED,
    "APPROVE": ReviewState.APPROVED,
    "REQUEST_CHANGES": ReviewState.CHANGES_REQUESTED,
}
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class Placement:
    """Where a comment sits in the diff."""

    position: int | None
    line: int | None
    side: str
    diff_hunk: str


def locate(
    patch: str, *, line: int | None = None, side: str = "RIGHT", position: int | None = None
) -> Placement | None:
    """Find ``line`` on ``side`` (or the legacy ``position``) in one file's patch."""
    lines = patch.split("\n")
    old = new = 0
    hunk_start = 0
    for index, text in enumerate(lines):
        header = _HUNK.match(text)
        if header:
            old, new, hunk_start = int(header.group(1)), int(header.group(2)), index
            continue
        kind = text[:1] or "?"
        here = {"-": (old, None), "+": (None, new), " ": (old, new)}.get(kind, (None, None))
        hit_side = "LEFT" if kind == "-" else "RIGHT"
        if position is not None:
            hit = index == position and kind in "-+ "
            found = (here[0] if kind == "-" else here[1], hit_side)
        else:
            number = here[0] if side == "LEFT" else here[1]
            hit = number is not None and number == line
            found = (line, side)
        if hit:
            return Placement(index, found[0], found[1], "\n".join(lines[hunk_start : index + 1]))
        old += kind in "- "
        new += kind in "+ "
    return None


class Reviews:
    """Review and review-comment operations of one forge."""

    def __init__(self, forge: Forge, pulls: Pulls) -> None:
        self.forge = forge
        self.pulls = pulls

    # -- json ----------------------------------------------------------------------------------

    def review_json(self, ctx: Ctx, repo: Repo, pull: Pull, review: Review) -> Json:
        author = self.forge.account(review.user_id)
        return render_pulls.review(ctx.urls, repo, pull, review, author, self.forge.association(repo, author))

    def comment_json(self, ctx: Ctx, repo: Repo, comment: ReviewComment) -> Json:
        pull = self.forge.store.pull_by_id(comment.pull_id)
        assert pull is not None
        author = self.forge.account(comment.user_id)
        association = self.forge.association(repo, author)
        return render_pulls.review_comment(ctx.urls, repo, pull, comment, author, association)

    # -- reviews -------------------------------------------------------------------------------

    def create(self, ctx: Ctx, repo: Repo, pull: Pull, payload: Json) -> Review:
        """``POST /pulls/{n}/reviews`` with ``event``, ``body`` and ``comments[]``."""
        actor = self.forge.require(ctx, repo, Role.PULL)
        event = payload.get("event")
        state = _EVENTS.get(event) if isinstance(event, str) else ReviewState.PENDING
        if state is None:
            raise Invalid([{"resource": "PullRequestReview", "code": "invalid", "field": "event"}])
        body = payload.get("body") or ""
        comments = payload.get("comments") or []
        if not isinstance(body, str) or not isinstance(comments, list):
            raise Invalid([{"resource": "PullRequestReview", "code": "invalid", "field": "comments"}])
        self._check_review(actor.id, pull, state, body, comments)
        commit_id = self._commit(repo, pull, payload.get("commit_id"))
        placed = [self._placement(repo, pull, commit_id, c) for c in comments]
        review = self.forge.store.add_review(pull.id, actor.id, body, state, commit_id)
        created = [
            self._store_comment(repo, pull, actor.id, review.id, commit_id, str(c.get("body", "")), c, p)
            for c, p in zip(comments, placed, strict=True)
        ]
        if state is not ReviewState.PENDING:
            self._emit_review(ctx, repo, pull, review)
            for comment in created:
                self._emit_comment(ctx, repo, pull, comment, "created")
        return review

    def _check_review(
        self, actor_id: int, pull: Pull, state: ReviewState, body: str, comments: list[Any]
    ) -> None:
        if actor_id == pull.user_id and state is ReviewState.APPROVED:
            raise Invalid(
                message="Unprocessable Entity",
                errors=[{"code": "custom", "message": ("Review Can not approve your own pull request")}],
            )
        if actor_id == pull.user_id and state is ReviewState.CHANGES_REQUESTED:
            raise Invalid(
                message="Unprocessable Entity",
                errors=[
                    {"code": "custom", "message": ("Review Can not request changes on your own pull request")}
                ],
            )
        if state is ReviewState.CHANGES_REQUESTED and not body:
            raise invalid_custom("PullRequestReview", "Body is required when using REQUEST_CHANGES", "body")
        if state is ReviewState.COMMENTED and not body and not comments:
            raise invalid_custom("PullRequestReview", "Body is required when using COMMENT", "body")
        pending = [r for r in self.forge.store.reviews(pull.id) if r.state is ReviewState.PENDING]
        if any(r.user_id == actor_id for r in pending):
            raise invalid_custom(
                "PullRequestReview", "User can only have one pending review per pull request"
            )

    def visible_reviews(self, ctx: Ctx, pull: Pull) -> list[Review]:
        """Reviews of ``pull``; a pending review is visible to its author only."""
        me = ctx.actor.id if ctx.actor else None
        return [
            r
            for r in self.forge.store.reviews(pull.id)
            if r.state is not ReviewState.PENDING or r.user_id == me
        ]

    def get(self, ctx: Ctx, pull: Pull, review_id: int) -> Review:
        for review in self.visible_reviews(ctx, pull):
            if review.id == review_id:
                return review
        raise NotFound()

    # -- review comments -----------------------------------------------------------------------

    def create_comment(self, ctx: Ctx, repo: Repo, pull: Pull, payload: Json) -> ReviewComment:
        """``POST /pulls/{n}/comments``: a new thread, or a reply with ``in_reply_to``."""
        actor = self.forge.require(ctx, repo, Role.PULL)
        body = payload.get("body")
        if not isinstance(body, str) or not body:
            raise Invalid(
                [{"resource": "PullRequestReviewComment", "code": "missing_field", "field": "body"}]
            )
        if payload.get("in_reply_to") is not None:
            return self.reply(ctx, repo, pull, payload["in_reply_to"], body)
        commit_id = self._commit(repo, pull, payload.get("commit_id"))
        placement = self._placement(repo, pull, commit_id, payload)
        review = self.forge.store.add_review(pull.id, actor.id, "", ReviewState.COMMENTED, commit_id)
        comment = self._store_comment(repo, pull, actor.id, review.id, commit_id, body, payload, placement)
        self._emit_comment(ctx, repo, pull, comment, "created")
        self._emit_review(ctx, repo, pull, review)
        return comment

    def reply(self, ctx: Ctx, repo: Repo, pull: Pull, parent_id: Any, body: str) -> ReviewComment:
        """``POST /pulls/{n}/comments/{id}/replies``: joins the parent's thread."""
        actor = self.forge.require(ctx, repo, Role.PULL)
        parent = self.forge.store.review_comment_by_id(parent_id) if isinstance(parent_id, int) else None
        if parent is None or parent.pull_id != pull.id:
            raise NotFound()
        review = self.forge.store.add_review(pull.id, actor.id, "", ReviewState.COMMENTED, parent.commit_id)
        values = {
            "pull_id": pull.id,
            "review_id": review.id,
            "user_id": actor.id,
            "body": body,
            "path": parent.path,
            "line": parent.line,
            "side": parent.side,
            "start_line": parent.start_line,
            "start_side": parent.start_side,
            "position": parent.position,
            "commit_id": parent.commit_id,
            "diff_hunk": parent.diff_hunk,
            "in_reply_to": parent.in_reply_to or parent.id,
            "subject_type": parent.subject_type,
        }
        comment = self.forge.store.add_review_comment(repo.id, values)
        self._emit_comment(ctx, repo, pull, comment, "created")
        self._emit_review(ctx, repo, pull, review)
        return comment

    def listing(
        self, ctx: Ctx, repo: Repo, pull: Pull | None, params: dict[str, str], since: str | None
    ) -> list[ReviewComment]:
        """Review comments of one PR or of the whole repository, without others' pending ones."""
        where: dict[str, Any] = {"pull_id": pull.id} if pull else {"repo_id": repo.id}
        column = "updated_at" if params.get("sort") == "updated" else "created_at"
        direction = "desc" if params.get("direction") == "desc" and "sort" in params else "asc"
        found = self.forge.store.review_comments(where, since, f"{column} {direction}, id {direction}")
        hidden = self._hidden_reviews(ctx, repo, pull)
        return [c for c in found if c.review_id not in hidden]

    def _hidden_reviews(self, ctx: Ctx, repo: Repo, pull: Pull | None) -> set[int]:
        pulls = [pull] if pull else self.forge.store.pulls(repo.id, {}, "id")
        me = ctx.actor.id if ctx.actor else None
        return {
            r.id
            for p in pulls
            for r in self.forge.store.reviews(p.id)
            if r.state is ReviewState.PENDING and r.user_id != me
        }

    def get_comment(self, ctx: Ctx, repo: Repo, comment_id: int) -> ReviewComment:
        comment = self.forge.store.review_comment_by_id(comment_id)
        if comment is None or self.forge.store.pull_by_id(comment.pull_id) is None:
            raise NotFound()
        pull = self.forge.store.pull_by_id(comment.pull_id)
        if (
            pull is None
            or pull.repo_id != repo.id
            or comment.review_id in self._hidden_reviews(ctx, repo, pull)
        ):
            raise NotFound()
        return comment

    def edit_comment(self, ctx: Ctx, repo: Repo, comment_id: int, body: Any) -> ReviewComment:
        comment = self._own(ctx, repo, self.get_comment(ctx, repo, comment_id))
        if not isinstance(body, str) or not body:
            raise Invalid(
                [{"resource": "PullRequestReviewComment", "code": "missing_field", "field": "body"}]
            )
        self.forge.store.update_review_comment(comment.id, body)
        fresh = self.get_comment(ctx, repo, comment.id)
        pull = self.pulls.get(repo, self._number(comment))
        self._emit_comment(ctx, repo, pull, fresh, "edited", changes={"body": {"from": comment.body}})
        return fresh

    def delete_comment(self, ctx: Ctx, repo: Repo, comment_id: int) -> None:
        comment = self._own(ctx, repo, self.get_comment(ctx, repo, comment_id))
        pull = self.pulls.get(repo, self._number(comment))
        self.forge.store.delete_review_comment(comment.id)
        self._emit_comment(ctx, repo, pull, comment, "deleted")

    # -- helpers -------------------------------------------------------------------------------

    def _number(self, comment: ReviewComment) -> int:
        pull = self.forge.store.pull_by_id(comment.pull_id)
        assert pull is not None
        return pull.number

    def _own(self, ctx: Ctx, repo: Repo, comment: ReviewComment) -> ReviewComment:
        actor = self.forge.require(ctx, repo, Role.PULL)
        role = self.forge.role(repo, actor) or Role.PULL
        if actor.id != comment.user_id and ROLE_RANK[role] < ROLE_RANK[Role.PUSH]:
            raise Forbidden("Must have push access to edit others' comments.")
        return comment

    def _commit(self, repo: Repo, pull: Pull, commit_id: Any) -> str:
        if commit_id is None:
            return pull.head_sha
        path = self.forge.repo_path(repo)
        sha = gitops.resolve(path, commit_id) if isinstance(commit_id, str) else None
        if sha is None or not gitops.is_ancestor(path, sha, pull.head_sha):
            raise invalid_custom(
                "PullRequestReviewComment", "commit_id is not part of the pull request", "commit_id"
            )
        return sha

    def _placement(self, repo: Repo, pull: Pull, commit_id: str, spec: Any) -> Placement:
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
            raise Invalid(
                [{"resource": "PullRequestReviewComment", "code": "missing_field", "field": "path"}]
            )
        base = gitops.merge_base(self.forge.repo_path(repo), pull.base_sha, commit_id) or pull.base_sha
        files = gitops.diff_files(self.forge.repo_path(repo), base, commit_id)
        change = next((f for f in files if f.filename == spec["path"]), None)
        if change is None:
            raise invalid_custom(
                "PullRequestReviewComment", "Path could not be resolved", "pull_request_review_thread.path"
            )
        if spec.get("subject_type") == "file":
            return Placement(None, None, "RIGHT", (change.patch or "").split("\n", 1)[0])
        line, position = spec.get("line"), spec.get("position")
        side = spec.get("side") or "RIGHT"
        found = None
        if change.patch is not None and (isinstance(line, int) or isinstance(position, int)):
            found = locate(
                change.patch,
                line=line if isinstance(line, int) else None,
                side=str(side),
                position=position if line is None and isinstance(position, int) else None,
            )
        if found is None:
            raise invalid_custom(
                "PullRequestReviewComment", "Line could not be resolved", "pull_request_review_thread.line"
            )
        return found

    def _store_comment(
        self,
        repo: Repo,
        pull: Pull,
        user_id: int,
        review_id: int,
        commit_id: str,
        body: str,
        spec: Json,
        placement: Placement,
    ) -> ReviewComment:
        start_line = spec.get("start_line") if isinstance(spec.get("start_line"), int) else None
        values = {
            "pull_id": pull.id,
            "review_id": review_id,
            "user_id": user_id,
            "body": body,
            "path": spec["path"],
            "line": placement.line,
            "side": placement.side,
            "start_line": start_line,
            "start_side": (spec.get("start_side") or placement.side) if start_line is not None else None,
            "position": placement.position,
            "commit_id": commit_id,
            "diff_hunk": placement.diff_hunk,
            "in_reply_to": None,
            "subject_type": "file" if spec.get("subject_type") == "file" else "line",
        }
        return self.forge.store.add_review_comment(repo.id, values)

    def _emit_review(self, ctx: Ctx, repo: Repo, pull: Pull, review: Review) -> None:
        shown = self.review_json(ctx, repo, pull, review)
        shown.update(state=review.state.value.lower(), body=review.body or None)  # webhooks spell it so
        payload = {
            "action": "submitted",
            "review": shown,
            "pull_request": self.pulls.to_json(ctx, pull, full=False),
        }
        self.forge.emit(ctx, repo, "pull_request_review", payload)

    def _emit_comment(
        self, ctx: Ctx, repo: Repo, pull: Pull, comment: ReviewComment, action: str, **extra: Any
    ) -> None:
        payload = {
            "action": action,
            **extra,
            "comment": self.comment_json(ctx, repo, comment),
            "pull_request": self.pulls.to_json(ctx, pull, full=False),
        }
        self.forge.emit(ctx, repo, "pull_request_review_comment", payload)
