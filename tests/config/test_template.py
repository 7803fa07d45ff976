"""`crucible init`'s template: valid as written and with every optional setting enabled."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.agents.template import agent_table
from controller.config.agent import PRESET_NAMES
from controller.config.spec import parse_spec
from controller.config.template import component_name, current_branch, render_template
from tests.conftest import git, make_repo


def enable_everything(text: str) -> str:
    """Uncomment every commented-out setting (``#key = …``, ``#[table]``); prose (``# …``) stays."""
    return re.sub(r"^#(?=[^\s#])", "", text, flags=re.MULTILINE)


def test_the_template_parses_as_written(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "router", {"bench.py": "print('METRIC score=1')\n"}, branch="trunk")
    spec = parse_spec(render_template(repo), repo)
    (component,) = spec.components
    assert (component.name, component.repo, component.base) == ("router", ".", "trunk")
    assert component.repo_path(spec.spec_dir) == repo.resolve()
    assert spec.agent.command and spec.metric.command
    assert spec.validation is None and spec.publish is None and spec.feedback is None


def test_every_commented_setting_is_valid_when_enabled(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "router", {"a.txt": "a\n"})
    text = enable_everything(render_template(repo))
    assert text != render_template(repo)
    spec = parse_spec(text, repo)
    assert spec.validation is not None and spec.publish is not None and spec.feedback is not None
    assert [guard.name for guard in spec.metric.guards] == ["rss_mb"]
    assert spec.budget.disk == 20_000_000_000
    assert spec.components[0].upstream == "owner/router"


def test_the_template_documents_the_builtin_proposer_without_enabling_it(tmp_path: Path) -> None:
    text = render_template(make_repo(tmp_path / "r", {"a": "a"}))
    assert '# builtin = "knobs"' in text
    assert "# [[agent.knob]]" in text


def test_a_detached_head_gives_base_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "a"})
    git(repo, "checkout", "-q", "--detach")
    assert current_branch(repo) is None
    assert parse_spec(render_template(repo), repo).components[0].base == "HEAD"


def test_a_directory_that_is_no_git_repo_gives_base_head(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert current_branch(plain) is None
    assert parse_spec(render_template(plain), plain).components[0].base == "HEAD"


def test_a_branch_with_slashes_and_quotes_is_written_as_a_toml_string(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "a"}, branch='feature/say-"hi"')
    assert parse_spec(render_template(repo), repo).components[0].base == 'feature/say-"hi"'


def test_a_linked_worktree_reads_its_own_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a": "a"})
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    assert (tmp_path / "side" / ".git").is_file()
    assert current_branch(tmp_path / "side") == "side"
    assert current_branch(repo) == "main"


@pytest.mark.parametrize(
    ("directory", "name"),
    [
        ("router", "router"),
        ("my.lib_2-x", "my.lib_2-x"),
        ("My Project!", "My-Project-"),
        ("__private", "private"),
        (".dotted", "dotted"),
        ("!!!", "repo"),
        ("Ünïcode", "Unicode"),
        ("日本", "repo"),
    ],
)
def test_component_names_are_sanitised(tmp_path: Path, directory: str, name: str) -> None:
    path = tmp_path / directory
    path.mkdir()
    assert component_name(path) == name
    assert parse_spec(render_template(path), path).components[0].name == name


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_a_presets_template_parses_as_written_and_with_everything_enabled(tmp_path: Path, name: str) -> None:
    repo = make_repo(tmp_path / "router", {"a.txt": "a\n"})
    text = render_template(repo, agent_table(name))
    spec = parse_spec(text, repo)
    assert (spec.agent.preset, spec.agent.command) == (name, None)
    enabled = parse_spec(enable_everything(text), repo).agent
    assert enabled.model and enabled.base_url and enabled.cli and enabled.prices
