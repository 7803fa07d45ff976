"""A malformed spec (issue 2, "Must hold" 8): exit 2, the offending key named on stderr, nothing created."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import COMPONENT, Project

pytestmark = pytest.mark.slow

CASES: dict[str, tuple[dict[str, Any], str]] = {
    "bad-type": ({"metric": {"samples": "three"}}, "metric.samples"),
    "unknown-key": ({"metric": {"sampels": 3}}, "metric.sampels"),
    "samples-zero": ({"metric": {"samples": 0}}, "metric.samples"),
    "unknown-table": ({"metrics": {"samples": 3}}, "metrics"),
    "bad-duration": ({"agent": {"timeout": "soon"}}, "agent.timeout"),
    "bad-enum": ({"sandbox": {"mode": "docker"}}, "sandbox.mode"),
    "component-key": (
        {"component": [{"name": COMPONENT, "repo": "repo", "mutabel": ["src/**"]}]},
        "component[0].mutabel",
    ),
    "missing-repo": ({"component": [{"name": COMPONENT, "repo": "nowhere"}]}, "component[0].repo"),
    "unknown-preset": ({"agent": {"command": None, "preset": "cursor"}}, "agent.preset"),
    "preset-and-command": ({"agent": {"preset": "claude-code"}}, "agent.command or agent.preset, not both"),
    "readonly-missing": ({"sandbox": {"readonly": ["/opt", "/no/such/dir"]}}, "sandbox.readonly[1]"),
    "readonly-covers-denied": ({"sandbox": {"readonly": ["~"]}}, "sandbox.readonly[0]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_spec_exits_2_names_the_key_and_creates_nothing(project: Project, case: str) -> None:
    changes, key = CASES[case]
    project.make()
    project.write_spec(**changes)

    result = project.loop()
    # The same refusal at --dry-run, in-process: the console script's own path is ``result``'s.
    dry = project.cli_in_process("loop", "--spec", str(project.spec_path), "--dry-run")

    for outcome in (result, dry):
        assert outcome.code == 2, outcome.describe()
        assert key in outcome.stderr, outcome.describe()
        assert outcome.stdout == ""
    assert not project.home.exists(), "a bad spec must not create CRUCIBLE_HOME, a database or a run"


def test_no_run_is_listed_after_a_bad_spec(project: Project) -> None:
    project.make()
    project.write_spec(metric={"samples": 0})

    assert project.loop().code == 2
    listed = project.cli("runs", "list", "--json")

    assert listed.code == 0 and listed.json == []
    assert not (project.home / "runs").exists()


def test_invalid_toml_exits_2_with_the_line(project: Project) -> None:
    project.make()
    project.spec_path.write_text('objective = "x"\nturns = = 3\n')

    result = project.loop()

    assert result.code == 2 and "line 2" in result.stderr, result.describe()
    assert not project.home.exists()


FORGE = "https://api.github.com"
PUBLISH_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "title-placeholder": (
        {"forge": FORGE, "title": "{objective} ({improvment})"},
        "publish.title",
        "unknown placeholder {improvment}",
    ),
    "commit-placeholder": (
        {"forge": FORGE, "commit_message": "{hypothesis} at {sha}"},
        "publish.commit_message",
        "unknown placeholder {sha}",
    ),
    "label-too-long": ({"forge": FORGE, "labels": ["x" * 51]}, "publish.labels[0]", "x" * 51),
    "reviewer-login": (
        {"forge": FORGE, "reviewers": ["alice", "not a login"]},
        "publish.reviewers[1]",
        "not a login",
    ),
}


@pytest.mark.parametrize("case", sorted(PUBLISH_CASES))
def test_a_bad_publish_table_exits_2_at_dry_run_naming_the_key_and_the_value(
    project: Project, case: str
) -> None:
    table, key, named = PUBLISH_CASES[case]
    project.make()
    project.write_spec(publish=table)

    # The refusal at --dry-run in-process; the console script's own path is ``published``'s.
    dry = project.cli_in_process("loop", "--spec", str(project.spec_path), "--dry-run")
    published = project.loop("--publish-prs")

    for outcome in (dry, published):
        assert outcome.code == 2, outcome.describe()
        assert f"{key}: " in outcome.stderr and named in outcome.stderr, outcome.describe()
    assert not project.home.exists()


def test_dry_run_shows_the_team_process_it_would_apply(project: Project) -> None:
    project.make()
    project.write_spec(
        publish={
            "forge": FORGE,
            "labels": ["performance"],
            "reviewers": ["alice"],
            "conventional": True,
            "signoff": True,
            "author": {"name": "Perf Bot", "email": "perf-bot@acme.dev"},
            "status": False,
        }
    )

    text = project.cli("loop", "--spec", str(project.spec_path), "--dry-run")
    as_json = project.cli("loop", "--spec", str(project.spec_path), "--dry-run", "--json")

    assert text.code == 0, text.describe()
    assert "  labels: performance" in text.stdout and "  reviewers: alice" in text.stdout
    assert "author: Perf Bot <perf-bot@acme.dev>  conventional signoff" in text.stdout
    published = as_json.json["publish"]
    assert (published["status"], published["title"]) == ("off", "{objective} ({metric} {baseline} → {value})")
