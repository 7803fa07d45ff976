"""GitHub's JSON (REST lists and pages) turned into crucible's forge-neutral types.

Plain dict handling, no PyGithub: the adapter in ``github.py`` fetches, this module reads only the
fields crucible needs, so older or newer payload shapes keep working.
"""

from __future__ import annotations

from typing import Any

from controller.forge.base import FeedbackEvent


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
    full_name: str, number: int, source: str, item: dict[str, Any], **fields: Any
) -> FeedbackEvent:
    user = item.get("user") or {}
    return FeedbackEvent(
        repo=full_name,
        pr_number=number,
        source=source,
        external_id=int(item["id"]),
        review_id=fields.get("review_id"),
        author=str(user.get("login") or "ghost"),
        author_type=str(user.get("type") or "User"),
        association=str(item.get("author_association") or "NONE"),
        body=str(item.get("body") or ""),
        path=fields.get("path"),
        line=fields.get("line"),
        action=fields["action"],
        updated_at=str(fields.get("updated_at") or item.get("updated_at") or ""),
        url=str(item.get("html_url") or ""),
        diff_hunk=fields.get("diff_hunk"),
    )


def review_comment_event(full_name: str, item: dict[str, Any]) -> FeedbackEvent:
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


def issue_comment_event(full_name: str, item: dict[str, Any]) -> FeedbackEvent:
    return feedback_event(
        full_name, number_at_end(str(item["issue_url"])), "issue_comment", item, action=listed_action(item)
    )


def listed_action(item: dict[str, Any]) -> str:
    """The webhook action that produced the version of a listed comment: ``edited`` once its
    ``updated_at`` differs from ``created_at``, else ``created``. A list cannot say it, and the
    version must carry the same (action, updated_at) as the webhook's, or one edit is stored twice."""
    created, updated = item.get("created_at"), item.get("updated_at")
    return "edited" if created and updated and created != updated else "created"


def review_event(full_name: str, number: int, item: dict[str, Any]) -> FeedbackEvent:
    """A review as listed; a dismissed one keeps its ``submitted_at`` and says ``dismissed``, so the
    dismissal is a version of its own (told apart by action, as webhooks tell it)."""
    action = "dismissed" if str(item.get("state") or "").upper() == "DISMISSED" else "submitted"
    return feedback_event(
        full_name, number, "review", item, action=action, updated_at=item.get("submitted_at")
    )
