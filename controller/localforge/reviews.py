"""Reviews and review (inline) comments, with GitHub's review life cycle.

A review created without ``event`` is pending: visible to its author only, with its comments,
until it is submitted (``POST …/reviews/{id}/events``) or deleted. Submitted reviews can have
their body updated; approvals and change requests can be dismissed by writers. A lone comment
or a reply creates a one-comment review, and both the ``pull_request_review_comment`` and the
``pull_request_review`` webhooks fire, as GitHub does. Comments are placed on the diff by
``placement``.
"""

from __future__ import annotations

from typing import Any

from controller.localforge import gitops, render_pulls
from controller.localforge.errors import Forbidden, Invalid, NotFound, invalid_custom, unprocessable
from controller.localforge.models import ROLE_RANK, Pull, Repo, Review, ReviewComment, ReviewState, Role
from controller.localforge.placement import Placement, place
from controller.localforge.pulls import Pulls
from controller.localforge.service import Ctx, Forge

Json = dict[str, Any]

_EVENTS = {
    "COMMENT": ReviewState.COMMENTED,
    "APPROVE": ReviewState.APPROVED,
    "REQUEST_CHANGES": ReviewState.CHANGES_REQUESTED,
}


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
        self._check_event(actor_id, pull, state, body, bool(comments))
        pending = [r for r in self.forge.store.reviews(pull.id) if r.state is ReviewState.PENDING]
        if any(r.user_id == actor_id for r in pending):
            raise unprocessable("User can only have one pending review per pull request")

    @staticmethod
    def _check_event(actor_id: int, pull: Pull, state: ReviewState, body: str, has_comments: bool) -> None:
        if actor_id == pull.user_id and state is ReviewState.APPROVED:
            raise unprocessable("Can not approve your own pull request")
        if actor_id == pull.user_id and state is ReviewState.CHANGES_REQUESTED:
            raise unprocessable("Can not request changes on your own pull request")
        if state is ReviewState.CHANGES_REQUESTED and not body:
            raise invalid_custom("PullRequestReview", "Body is required when using REQUEST_CHANGES", "body")
        if state is ReviewState.COMMENTED and not body and not has_comments:
            raise invalid_custom("PullRequestReview", "Body is required when using COMMENT", "body")

    # -- a review's life cycle -----------------------------------------------------------------

    def _pending(self, ctx: Ctx, pull: Pull, review_id: int, verb: str) -> Review:
        review = self.get(ctx, pull, review_id)
        if review.state is not ReviewState.PENDING:
            raise unprocessable(f"Can not {verb} a non-pending pull request review")
        return review

    def submit(self, ctx: Ctx, repo: Repo, pull: Pull, review_id: int, payload: Json) -> Review:
        """``POST …/reviews/{id}/events``: a pending review becomes COMMENTED/APPROVED/CHANGES_REQUESTED."""
        actor = self.forge.require(ctx, repo, Role.PULL)
        review = self._pending(ctx, pull, review_id, "submit")
        event = payload.get("event")
        state = _EVENTS.get(event) if isinstance(event, str) else None
        if state is None:
            raise Invalid([{"resource": "PullRequestReview", "code": "invalid", "field": "event"}])
        given = payload.get("body")
        body = given if isinstance(given, str) else review.body
        comments = self.forge.store.review_comments({"review_id": review.id}, None, "id")
        self._check_event(actor.id, pull, state, body, bool(comments))
        submitted = self.forge.store.update_review(review.id, state=state, body=body, submit=True)
        self._emit_review(ctx, repo, pull, submitted)
        for comment in comments:
            self._emit_comment(ctx, repo, pull, comment, "created")
        return submitted

    def delete_pending(self, ctx: Ctx, repo: Repo, pull: Pull, review_id: int) -> Review:
        """``DELETE …/reviews/{id}``: only a pending review, with its comments; answers the review."""
        self.forge.require(ctx, repo, Role.PULL)
        review = self._pending(ctx, pull, review_id, "delete")
        self.forge.store.delete_review(review.id)
        return review

    def update(self, ctx: Ctx, repo: Repo, pull: Pull, review_id: int, payload: Json) -> Review:
        """``PUT …/reviews/{id}``: the author changes the body."""
        actor = self.forge.require(ctx, repo, Role.PULL)
        review = self.get(ctx, pull, review_id)
        body = payload.get("body")
        if not isinstance(body, str):
            raise Invalid([{"resource": "PullRequestReview", "code": "missing_field", "field": "body"}])
        if review.user_id != actor.id:
            raise Forbidden("Only the author of a review can update it.")
        return self.forge.store.update_review(review.id, state=review.state, body=body, submit=False)

    def dismiss(self, ctx: Ctx, repo: Repo, pull: Pull, review_id: int, payload: Json) -> Review:
        """``PUT …/reviews/{id}/dismissals``: writers dismiss an approval or a change request."""
        self.forge.require(ctx, repo, Role.PUSH)
        review = self.get(ctx, pull, review_id)
        message = payload.get("message")
        if not isinstance(message, str) or not message:
            raise Invalid([{"resource": "PullRequestReview", "code": "missing_field", "field": "message"}])
        if review.state not in {ReviewState.APPROVED, ReviewState.CHANGES_REQUESTED}:
            kind = {ReviewState.PENDING: "pending", ReviewState.DISMISSED: "dismissed"}.get(review.state)
            raise unprocessable(f"Can not dismiss a {kind or 'commented'} pull request review")
        dismissed = self.forge.store.update_review(
            review.id, state=ReviewState.DISMISSED, body=review.body, submit=False
        )
        self._emit_review(ctx, repo, pull, dismissed, action="dismissed")
        return dismissed

    def review_comments(self, ctx: Ctx, pull: Pull, review_id: int) -> list[ReviewComment]:
        """``GET …/reviews/{id}/comments``."""
        review = self.get(ctx, pull, review_id)
        return self.forge.store.review_comments({"review_id": review.id}, None, "id")

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
        return place(self.forge.repo_path(repo), pull.base_sha, commit_id, spec)

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

    def _emit_review(
        self, ctx: Ctx, repo: Repo, pull: Pull, review: Review, action: str = "submitted"
    ) -> None:
        if action == "submitted":  # a review answers its author's review request, as on GitHub
            self.forge.store.remove_review_requests(pull.id, "user", [review.user_id])
        shown = self.review_json(ctx, repo, pull, review)
        shown.update(state=review.state.value.lower(), body=review.body or None)  # webhooks spell it so
        payload = {
            "action": action,
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
