"""The sans-I/O half: signatures over raw bytes, and routing payloads on event and action."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.forge.webhooks import (
    PayloadError,
    parse_feedback,
    parse_pull_state,
    signature_for,
    verify_signature,
)
from tests.webhooks.helpers import ORACLE_FILES, PR, REPO, event_of, on_pull_request, oracle

GITHUB_VECTOR = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_signature_matches_githubs_documented_vector() -> None:
    secret, body = b"It's a Secret to Everybody", b"Hello, World!"
    assert signature_for(secret, body) == GITHUB_VECTOR
    assert verify_signature(secret, body, GITHUB_VECTOR)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        GITHUB_VECTOR.removeprefix("sha256="),  # no prefix
        "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        GITHUB_VECTOR[:-1] + "8",  # one digit off
        "sha256=é",
    ],
)
def test_wrong_or_missing_signatures_fail(header: str | None) -> None:
    assert not verify_signature(b"It's a Secret to Everybody", b"Hello, World!", header)


def test_the_signature_covers_every_byte_and_needs_a_secret() -> None:
    assert not verify_signature(b"It's a Secret to Everybody", b"Hello, World! ", GITHUB_VECTOR)
    assert not verify_signature(b"", b"x", signature_for(b"", b"x"))


@pytest.mark.parametrize("path", ORACLE_FILES, ids=lambda p: p.name)
def test_every_oracle_payload_parses(path: Path) -> None:
    payload = oracle(path.name)
    event = event_of(path)
    found = parse_feedback(event, payload)
    routed = event in ("pull_request_review", "pull_request_review_comment")
    assert len(found) == (1 if routed else 0)  # no oracle issue_comment is on a PR
    for item in found:
        assert (item.repo, item.pr_number, item.action) == (REPO, PR, payload["action"])
    state = parse_pull_state(event, payload)
    assert (state is not None) == (event == "pull_request" and payload["action"] in ("closed", "reopened"))


def test_review_comments_carry_path_line_and_review() -> None:
    (item,) = parse_feedback(
        "pull_request_review_comment", oracle("pull_request_review_comment.edited.4.json")
    )
    assert (item.source, item.path, item.line, item.review_id) == (
        "review_comment",
        "README.md",
        265,
        237895671,
    )
    assert item.body == "Maybe you should use more emoji on this line."
    assert item.updated_at == "2019-05-15T15:20:38Z"


@pytest.mark.parametrize(
    "name", [p.name for p in ORACLE_FILES if p.name.startswith("pull_request_review_comment.")]
)
def test_review_comments_carry_githubs_diff_hunk(name: str) -> None:
    """The steer quotes the hunk a reviewer saw (issue 4), so it must survive parsing verbatim."""
    (item,) = parse_feedback("pull_request_review_comment", oracle(name))
    assert item.diff_hunk == "@@ -1 +1 @@\n-# Hello-World"


def test_a_comment_without_a_diff_hunk_and_other_sources_carry_none() -> None:
    """Older or trimmed payloads lack the field; reviews and conversation comments have no hunk."""
    payload = oracle("pull_request_review_comment.created.1.json")
    payload["comment"] = {k: v for k, v in payload["comment"].items() if k != "diff_hunk"}
    (item,) = parse_feedback("pull_request_review_comment", payload)
    assert item.diff_hunk is None
    (review,) = parse_feedback("pull_request_review", oracle("pull_request_review.submitted.0.json"))
    assert review.diff_hunk is None


def test_an_outdated_comment_falls_back_to_original_line() -> None:
    payload = oracle("pull_request_review_comment.created.1.json")
    payload["comment"] = {**payload["comment"], "line": None, "original_line": 12}
    (item,) = parse_feedback("pull_request_review_comment", payload)
    assert item.line == 12


def test_a_review_without_body_is_still_an_event() -> None:
    (item,) = parse_feedback("pull_request_review", oracle("pull_request_review.submitted.0.json"))
    assert (item.source, item.body, item.action, item.association) == ("review", "", "submitted", "OWNER")
    assert item.updated_at == "2019-05-15T15:20:38Z"  # a review's version is its submitted_at


def test_an_issue_comment_counts_only_on_a_pull_request() -> None:
    plain = oracle("issue_comment.edited.7.json")
    assert parse_feedback("issue_comment", plain) == []
    (item,) = parse_feedback("issue_comment", on_pull_request(plain))
    assert item.source == "issue_comment"
    assert item.pr_number == plain["issue"]["number"]
    assert item.external_id == plain["comment"]["id"]
    assert item.action == "edited"
    assert item.path is None and item.line is None


@pytest.mark.parametrize(
    ("event", "action"),
    [
        ("pull_request_review", "created"),
        ("pull_request_review_comment", "submitted"),
        ("issue_comment", "pinned"),
        ("pull_request_review_thread", "resolved"),
        ("push", None),
    ],
)
def test_unknown_event_and_action_pairs_are_ignored(event: str, action: str | None) -> None:
    payload = on_pull_request(oracle("issue_comment.created.1.json"))
    payload["action"] = action
    assert parse_feedback(event, payload) == []


def test_a_routed_payload_without_needed_fields_is_a_payload_error() -> None:
    with pytest.raises(PayloadError):
        parse_feedback("pull_request_review_comment", {"action": "created", "comment": {"id": 1}})
    with pytest.raises(PayloadError):
        parse_pull_state("pull_request", {"action": "closed"})


def test_pull_state_reads_merged() -> None:
    payload = oracle("pull_request.closed.3.json")
    assert parse_pull_state("pull_request", payload) == (REPO, PR, "closed", False)
    payload["pull_request"] = {**payload["pull_request"], "merged": True}
    assert parse_pull_state("pull_request", payload) == (REPO, PR, "closed", True)
    assert parse_pull_state("pull_request", oracle("pull_request.reopened.18.json")) == (
        REPO,
        PR,
        "open",
        False,
    )
    assert parse_pull_state("pull_request", oracle("pull_request.synchronize.22.json")) is None
