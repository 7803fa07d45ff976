"""GitHub's JSON (REST lists and pages) turned into crucible's forge-neutral types.

Plain dict handling, no PyGithub: the adapter in ``github.py`` fetches, this module reads only the
fields crucible needs, so older or newer payload shapes keep working.
"""

from __future__ import annotations

from typing import TypedDict

from controller.forge.base import FeedbackEvent

# The fields of GitHub's REST JSON that crucible reads, as TypedDicts. ``total=False`` and every value
# nullable where GitHub sends null: the readers below keep their defaults for a missing or null field,
# so an older or newer GitHub (or the local forge) still reads; a TypedDict only says what is *read*.


class GithubUser(TypedDict, total=False):
    login: str | None
    type: str | None


class _GithubComment(TypedDict, total=False):
    id: int
    user: GithubUser | None
    author_association: str | None
    body: str | None
    html_url: str | None
    created_at: str | None
    updated_at: str | None


class ReviewCommentJson(_GithubComment, total=False):
    """An inline comment (``GET /repos/{o}/{r}/pulls/comments``)."""

    pull_request_url: str
    pull_request_review_id: int | None
    path: str | None
    line: int | None
    original_line: int | None
    diff_hunk: str | None


class IssueCommentJson(_GithubComment, total=False):
    """A comment on the PR's conversation (``GET /repos/{o}/{r}/issues/comments``)."""

    issue_url: str


class ReviewJson(_GithubComment, total=False):
    """A review (``GET /repos/{o}/{r}/pulls/{n}/reviews``)."""

    state: str | None
    submitted_at: str | None


class PullJson(TypedDict, total=False):
    """A pull request as listed (``GET /repos/{o}/{r}/pulls``)."""

    number: int
    state: str | None
    merged_at: str | None
    created_at: str | None
    updated_at: str | None


def next_link(link: str) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, or None on the last page."""
    for part in link.split(","):
        target, _, rel = part.partition(";")
        if 'rel="next"' in rel:
            return target.strip().removeprefix("<").removesuffix(">")
    return None


def number_at_end(url: str) -> int:
    return int(url.rstrip("/").rsplit("/", 1)[-1])


def feedback_event(
    full_name: str,
    number: int,
    source: str,
    item: _GithubComment,
    *,
    action: str,
    review_id: int | None = None,
    path: str | None = None,
    line: int | None = None,
    updated_at: str | None = None,
    diff_hunk: str | None = None,
) -> FeedbackEvent:
    user = item.get("user") or {}
    return FeedbackEvent(
        repo=full_name,
        pr_number=number,
        source=source,
        external_id=int(item["id"]),
        review_id=review_id,
        author=str(user.get("login") or "ghost"),
        author_type=str(user.get("type") or "User"),
        association=str(item.get("author_association") or "NONE"),
        body=str(item.get("body") or ""),
        path=path,
        line=line,
        action=action,
        updated_at=str(updated_at or item.get("updated_at") or ""),
        url=str(item.get("html_url") or ""),
        diff_hunk=diff_hunk,
    )


def review_comment_event(full_name: str, item: ReviewCommentJson) -> FeedbackEvent:
    line = item.get("line")
    hunk = item.get("diff_hunk")
    return feedback_event(
        full_name,
        number_at_end(str(item["pull_request_url"])),
        "review_comment",
        item,
        review_id=item.get("pull_request_review_id"),
        path=item.get("path"),
        line=line if line is not None else item.get("original_line"),
        diff_hunk=hunk if isinstance(hunk, str) else None,
        action=listed_action(item),
    )


def issue_comment_event(full_name: str, item: IssueCommentJson) -> FeedbackEvent:
    return feedback_event(
        full_name, number_at_end(str(item["issue_url"])), "issue_comment", item, action=listed_action(item)
    )


def listed_action(item: _GithubComment) -> str:
    """The webhook action that produced the version of a listed comment: ``edited`` once its
    ``updated_at`` differs from ``created_at``, else ``created``. A list cannot say it, and the
    version must carry the same (action, updated_at) as the webhook's, or one edit is stored twice."""
    created, updated = item.get("created_at"), item.get("updated_at")
    return "edited" if created and updated and created != updated else "created"


def review_event(full_name: str, number: int, item: ReviewJson) -> FeedbackEvent:
    """A review as listed; a dismissed one keeps its ``submitted_at`` and says ``dismissed``, so the
    dismissal is a version of its own (told apart by action, as webhooks tell it)."""
    action = "dismissed" if str(item.get("state") or "").upper() == "DISMISSED" else "submitted"
    return feedback_event(
        full_name, number, "review", item, action=action, updated_at=item.get("submitted_at")
    )
