"""The ``TeamProcess`` contract (controller/forge/base.py), run against every implementation: the
``github`` adapter talking to the local forge over real HTTP, and ``FakeForge``. What a team's
process asks of a bot's PR: labels, review requests (once), assignees, and the measured result as a
commit status; a check run only with App credentials."""

from __future__ import annotations

import pytest

from controller.forge.base import CommitCheck, ForgeError, ForgeNotFound
from tests.forge.conftest import COLLABORATOR, STRANGER, Harness
from tests.forge.test_contract import open_draft

NOT_COLLABORATOR = "may only be requested from collaborators"


def test_labels_are_added_once_and_a_too_long_one_is_refused(harness: Harness) -> None:
    pull, _ = open_draft(harness)
    process = harness.forge.team_process()

    first = process.add_labels(harness.full_name, pull.number, ["performance", "bot"])
    again = process.add_labels(harness.full_name, pull.number, ["performance"])
    long = process.add_labels(harness.full_name, pull.number, ["ok", "x" * 51])

    assert (first.done, first.refused) == (("performance", "bot"), ())
    assert again.done == ("performance",)
    assert long.done == ("ok",) and [name for name, _ in long.refused] == ["x" * 51]
    assert long.refused[0][1].startswith("422 Validation Failed")
    assert harness.triage(pull.number).labels == ("bot", "ok", "performance")


def test_reviews_are_requested_from_collaborators_only_and_never_from_the_author(harness: Harness) -> None:
    harness.add_collaborator(COLLABORATOR, "push")
    pull, _ = open_draft(harness)
    process = harness.forge.team_process()

    applied = process.request_reviewers(
        harness.full_name, pull.number, [COLLABORATOR, STRANGER, harness.owner], ["perf-team"]
    )

    assert applied.done == (COLLABORATOR,)
    reasons = dict(applied.refused)
    assert list(reasons) == [STRANGER, harness.owner, "team:perf-team"]
    assert NOT_COLLABORATOR in reasons[STRANGER] and NOT_COLLABORATOR in reasons["team:perf-team"]
    assert "author" in reasons[harness.owner]
    assert harness.triage(pull.number).requested == (COLLABORATOR,)
    assert process.request_reviewers(harness.full_name, pull.number, [COLLABORATOR], []).done == (
        COLLABORATOR,
    )
    assert harness.triage(pull.number).requested == (COLLABORATOR,)


def test_assignees_without_access_are_reported_not_raised(harness: Harness) -> None:
    harness.add_collaborator(COLLABORATOR, "push")
    pull, _ = open_draft(harness)

    applied = harness.forge.team_process().add_assignees(
        harness.full_name, pull.number, [COLLABORATOR, STRANGER]
    )

    assert applied.done == (COLLABORATOR,) and [name for name, _ in applied.refused] == [STRANGER]
    assert harness.triage(pull.number).assignees == (COLLABORATOR,)


def test_a_missing_pull_request_is_not_found(harness: Harness) -> None:
    with pytest.raises(ForgeNotFound):
        harness.forge.team_process().add_labels(harness.full_name, 999, ["performance"])


def test_the_measurement_is_a_commit_status_and_neutral_reads_as_failure(harness: Harness) -> None:
    _, sha = open_draft(harness)
    process = harness.forge.team_process()
    kept = CommitCheck(
        "crucible/p50_ms",
        "success",
        "p50_ms 41.1 \u2192 10.9 (\u221273.5%, p = 4e-6)",
        details_url="https://ci.example/runs/r1",
    )
    held = CommitCheck("crucible/p50_ms/refinement", "neutral", "round 1 could not hold the score")

    process.report(harness.full_name, sha, kept, check_run=False)
    process.report(harness.full_name, sha, held, check_run=False)

    assert harness.statuses(sha) == [
        ("crucible/p50_ms/refinement", "failure", "round 1 could not hold the score", ""),
        ("crucible/p50_ms", "success", kept.title, "https://ci.example/runs/r1"),
    ]


def test_a_token_cannot_create_a_check_run(harness: Harness) -> None:
    _, sha = open_draft(harness)
    process = harness.forge.team_process()
    assert process.check_runs is False
    with pytest.raises(ForgeError, match="403"):
        process.report(
            harness.full_name, sha, CommitCheck("crucible/m", "success", "m 2 \u2192 1"), check_run=True
        )
