"""GitHub webhooks, sans-I/O: bytes and headers in, typed events out (after gidgethub).

No web framework and no database here, so the rules that matter (the signature is checked over the
raw bytes in constant time; routing is on event *and* action; only the fields crucible needs are
read) are unit-tested with plain bytes and dicts. The HTTP edge (``controller.api.webhooks``) and
the intake service compose these functions.

Payloads vary with GitHub's age: old ones lack fields added since, new ones carry fields the
examples lack. Each parser reads only what it needs; a payload without one of those raises
``PayloadError`` (a ``ValueError``), never ``KeyError``/``TypeError``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import Any

from controller.forge.base import FeedbackEvent

SIGNATURE_PREFIX = "sha256="

REVIEW_ACTIONS = frozenset({"submitted", "edited", "dismissed"})
COMMENT_ACTIONS = frozenset({"created", "edited", "deleted"})
PULL_STATE_ACTIONS = frozenset({"closed", "reopened"})


class PayloadError(ValueError):
    """A routed payload lacks a field crucible needs (or it has the wrong type)."""


def signature_for(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body`` (also used by tests and senders)."""
    return SIGNATURE_PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_signature(secret: bytes, body: bytes, header: str | None) -> bool:
    """True iff ``header`` is ``sha256=<hex>`` of HMAC-SHA256(secret, body); constant-time compare.

    An empty secret verifies nothing (False): a webhook without a secret is not authenticated.
    """
    if not secret or not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = signature_for(secret, body).encode("ascii")
    try:
        given = header.strip().encode("ascii")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(expected, given)


def parse_feedback(event: str, payload: Mapping[str, Any]) -> list[FeedbackEvent]:
    """The review feedback in one delivery; ``[]`` for every event/action crucible ignores.

    - ``pull_request_review`` submitted/edited/dismissed -> source ``review`` (an empty body is still
      an event: the caller decides; a review's version is its ``submitted_at``);
    - ``pull_request_review_comment`` created/edited/deleted -> ``review_comment`` with path, line
      (``line``, else ``original_line`` for outdated comments), the review id and ``diff_hunk``;
    - ``issue_comment`` created/edited/deleted, only on a PR (``issue.pull_request`` present) ->
      ``issue_comment``.

    PayloadError when a routed payload lacks a needed field.
    """
    action = payload.get("action")
    parser = _PARSERS.get((event, action if isinstance(action, str) else ""))
    found = parser(payload) if parser is not None else None
    return [found] if found is not None else []


def parse_pull_state(event: str, payload: Mapping[str, Any]) -> tuple[str, int, str, bool] | None:
    """``(repo, number, state, merged)`` for ``pull_request`` closed/reopened, else None."""
    action = payload.get("action")
    if event != "pull_request" or action not in PULL_STATE_ACTIONS:
        return None
    pull = _map(payload, "pull_request")
    merged = pull.get("merged")
    if not isinstance(merged, bool):
        merged = pull.get("merged_at") is not None
    state = "closed" if action == "closed" else "open"
    return _repo(payload), _int(pull, "number"), state, merged


# Events after which a person's permission on a repository may have changed (GitHub sends ``member``
# for collaborators added, removed or edited, ``repository`` for transfers, visibility and the like,
# ``team_add`` when a team gets the repository, ``membership``/``organization`` for org membership).
ACCESS_EVENTS = frozenset({"member", "repository", "team_add", "team", "membership", "organization"})


def parse_access_change(event: str, payload: Mapping[str, Any]) -> str | None:
    """The ``owner/name`` whose permissions may have changed, ``"*"`` when any repository's may have
    (organization-wide events), None for any other event."""
    if event not in ACCESS_EVENTS:
        return None
    repository = payload.get("repository")
    if isinstance(repository, Mapping) and isinstance(repository.get("full_name"), str):
        return str(repository["full_name"])
    return "*"


# -- per-event parsers ------------------------------------------------------------------------


def _review(payload: Mapping[str, Any]) -> FeedbackEvent:
    review = _map(payload, "review")
    version = review.get("updated_at") or review.get("submitted_at") or ""
    return _event(
        payload,
        review,
        source="review",
        pr_number=_int(_map(payload, "pull_request"), "number"),
        updated_at=str(version),
    )


def _review_comment(payload: Mapping[str, Any]) -> FeedbackEvent:
    comment = _map(payload, "comment")
    line = comment.get("line")
    if line is None:
        line = comment.get("original_line")
    review_id = comment.get("pull_request_review_id")
    return _event(
        payload,
        comment,
        source="review_comment",
        pr_number=_int(_map(payload, "pull_request"), "number"),
        updated_at=_str(comment, "updated_at"),
        review_id=review_id if isinstance(review_id, int) else None,
        path=_opt_str(comment.get("path")),
        line=line if isinstance(line, int) else None,
        diff_hunk=_opt_str(comment.get("diff_hunk")),
    )


def _issue_comment(payload: Mapping[str, Any]) -> FeedbackEvent | None:
    issue = _map(payload, "issue")
    if not isinstance(issue.get("pull_request"), Mapping):
        return None  # a comment on a plain issue is not PR feedback
    comment = _map(payload, "comment")
    return _event(
        payload,
        comment,
        source="issue_comment",
        pr_number=_int(issue, "number"),
        updated_at=_str(comment, "updated_at"),
    )


def _event(
    payload: Mapping[str, Any],
    item: Mapping[str, Any],
    *,
    source: str,
    pr_number: int,
    updated_at: str,
    review_id: int | None = None,
    path: str | None = None,
    line: int | None = None,
    diff_hunk: str | None = None,
) -> FeedbackEvent:
    user = item.get("user")
    user = user if isinstance(user, Mapping) else {}  # a deleted account arrives as null
    return FeedbackEvent(
        repo=_repo(payload),
        pr_number=pr_number,
        source=source,
        external_id=_int(item, "id"),
        review_id=review_id,
        author=str(user.get("login") or "ghost"),
        author_type=str(user.get("type") or "User"),
        association=str(item.get("author_association") or "NONE"),
        body=_opt_str(item.get("body")) or "",
        path=path,
        line=line,
        action=str(payload["action"]),
        updated_at=updated_at,
        url=_opt_str(item.get("html_url")) or "",
        diff_hunk=diff_hunk,
    )


_PARSERS: dict[tuple[str, str], Callable[[Mapping[str, Any]], FeedbackEvent | None]] = {
    **{("pull_request_review", a): _review for a in REVIEW_ACTIONS},
    **{("pull_request_review_comment", a): _review_comment for a in COMMENT_ACTIONS},
    **{("issue_comment", a): _issue_comment for a in COMMENT_ACTIONS},
}


# -- field access -----------------------------------------------------------------------------


def _map(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise PayloadError(f"payload field {key!r} missing or not an object")
    return value


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PayloadError(f"payload field {key!r} missing or not an integer")
    return value


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"payload field {key!r} missing or not a string")
    return value


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _repo(payload: Mapping[str, Any]) -> str:
    return _str(_map(payload, "repository"), "full_name")
