"""``[publish]``: the team-process keys, their defaults, and every refusal naming its key (and value)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config.publish import (
    DEFAULT_COMMIT_MESSAGE,
    DEFAULT_CONVENTIONAL_TITLE,
    DEFAULT_TITLE,
    placeholders,
    render,
)
from controller.config.spec import Spec, parse_spec
from controller.domain.errors import SpecError

BASE = """\
objective = "Cut p50 latency of the router"
[agent]
command = "my-agent"
[metric]
command = "python bench.py"
name = "p50_ms"
[[component]]
name = "router"
repo = "."
[publish]
forge = "https://api.github.com"
"""


def parse(extra: str, tmp_path: Path) -> Spec:
    return parse_spec(BASE + extra + "\n", tmp_path)


def test_defaults_leave_pull_requests_as_before(tmp_path: Path) -> None:
    publish = parse("", tmp_path).publish
    assert publish is not None
    assert (publish.labels, publish.reviewers, publish.team_reviewers, publish.assignees) == ([], [], [], [])
    assert (publish.conventional, publish.signoff, publish.author, publish.status) == (
        False,
        False,
        None,
        "auto",
    )
    assert publish.title_template() == DEFAULT_TITLE
    assert publish.commit_template() == DEFAULT_COMMIT_MESSAGE


def test_a_whole_team_process_parses(tmp_path: Path) -> None:
    publish = parse(
        """labels = ["performance", "bot: crucible"]
reviewers = ["alice", "bob-the-2nd"]
team_reviewers = ["perf-team"]
assignees = ["carol"]
title = "{objective}: {metric} {improvement}"
commit_message = \"\"\"{hypothesis}

{metric} {baseline} -> {value} ({improvement}) in run {run_id}, turn {turn}\"\"\"
conventional = true
signoff = true
author = { name = "Perf Bot", email = "perf-bot@acme.dev" }
status = "check-run"
""",
        tmp_path,
    ).publish
    assert publish is not None
    assert publish.labels == ["performance", "bot: crucible"]
    assert publish.reviewers == ["alice", "bob-the-2nd"] and publish.team_reviewers == ["perf-team"]
    assert publish.author is not None and publish.author.identity() == ("Perf Bot", "perf-bot@acme.dev")
    assert publish.title_template() == "{objective}: {metric} {improvement}"
    assert publish.status == "check-run"


def test_conventional_without_templates_drops_the_crucible_prefix(tmp_path: Path) -> None:
    publish = parse("conventional = true", tmp_path).publish
    assert publish is not None and publish.title_template() == DEFAULT_CONVENTIONAL_TITLE
    assert not publish.commit_template().startswith("crucible:")


@pytest.mark.parametrize(
    ("written", "mode"), [("false", "off"), ("true", "auto"), ('"commit-status"', "commit-status")]
)
def test_status_takes_a_boolean_or_a_kind(tmp_path: Path, written: str, mode: str) -> None:
    publish = parse(f"status = {written}", tmp_path).publish
    assert publish is not None and publish.status == mode


REFUSED = {
    "label-too-long": ('labels = ["ok", "' + "x" * 51 + '"]', "publish.labels[1]", "at most 50"),
    "label-blank": ('labels = [" "]', "publish.labels[0]", "must not be empty"),
    "label-twice": ('labels = ["perf", "Perf"]', "publish.labels", '"Perf" is listed twice'),
    "reviewer-at": ('reviewers = ["@alice"]', "publish.reviewers[0]", "without the '@'"),
    "reviewer-hyphen": ('reviewers = ["alice-"]', "publish.reviewers[0]", '"alice-"'),
    "reviewer-long": ('reviewers = ["' + "a" * 40 + '"]', "publish.reviewers[0]", "at most 39"),
    "reviewer-space": ('reviewers = ["alice smith"]', "publish.reviewers[0]", "GitHub login"),
    "assignee-bad": ('assignees = ["a_b"]', "publish.assignees[0]", '"a_b"'),
    "too-many-assignees": (
        "assignees = [" + ", ".join(f'"u{i}"' for i in range(11)) + "]",
        "publish.assignees",
        "10",
    ),
    "team-with-org": (
        'team_reviewers = ["acme/perf"]',
        "publish.team_reviewers[0]",
        "without its organization",
    ),
    "title-unknown": ('title = "{objective} {improvment}"', "publish.title", "{improvment}"),
    "title-suggests": ('title = "{objectiv}"', "publish.title", "did you mean {objective}?"),
    "commit-unknown": ('commit_message = "{hypothesis} {sha}"', "publish.commit_message", "{sha}"),
    "commit-attribute": (
        'commit_message = "{hypothesis.__class__}"',
        "publish.commit_message",
        "plain names",
    ),
    "commit-format-spec": ('commit_message = "{value:.2f}"', "publish.commit_message", "no format spec"),
    "title-lone-brace": ('title = "{objective"', "publish.title", "literal braces"),
    "title-hypothesis": ('title = "{hypothesis}"', "publish.title", "{hypothesis}"),
    "signoff-without-author": ("signoff = true", "publish.signoff", "publish.author"),
    "author-email": ('author = { name = "Bot", email = "bot" }', "publish.author.email", "name@host"),
    "author-name-markup": ('author = { name = "Bot <x>", email = "b@x.y" }', "publish.author.name", "'<'"),
    "status-kind": ('status = "checks"', "publish.status", '"checks"'),
    "unknown-key": ('lables = ["perf"]', "publish.lables", "did you mean 'labels'?"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_naming_the_key_and_the_value(tmp_path: Path, case: str) -> None:
    extra, key, words = REFUSED[case]
    with pytest.raises(SpecError) as caught:
        parse(extra, tmp_path)
    assert caught.value.key == key, str(caught.value)
    assert words in str(caught.value)


def test_placeholders_and_rendering() -> None:
    assert placeholders("{a} and {b} {{not}}") == ["a", "b"]
    assert render("{a} {{b}} {a}", {"a": "x"}) == "x {b} x"
    # A value that looks like a template is inserted as text, never expanded again.
    assert render("{a}", {"a": "{b}"}) == "{b}"
