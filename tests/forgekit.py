"""The setup that every forge-backed publishing test needs: users, alice/app, crucible pointed at it.

tests/publish and tests/rounds both drive whole runs against the local forge over real HTTP and git. They
used to carry their own copies of the tokens, the forge start, the repository push, the store and run
wiring and the spec text, and tests/rounds imported a git helper from a publish test module. This module
holds those pieces once, as plain functions and small dataclasses, so each test keeps only what it is
about. Nothing here asserts anything a test is about; a failing setup step raises.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from github import Auth, Github
from github.Repository import Repository

from controller.config.settings import Settings
from controller.config.spec import Spec, load_spec
from controller.forge.auth import ForgeCredentials
from controller.forge.github import GithubForge
from controller.localforge.server import ForgeHandle, running_forge
from controller.localforge.users import add_user
from controller.services.execution.context import Hooks, RunContext
from controller.services.execution.runs import create_run, open_context
from controller.services.feedback.publish import Publisher
from controller.store import Store
from tests.conftest import git, make_repo
from tests.support.fixtures import migrated_sqlite_url

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789", "mallory": "tok-mallory-0123456789"}
"""Every forge user and its token: alice owns the repositories, bob may push, mallory may not."""

APP_FILES = {"src/value.txt": "10\n", "README.md": "app\n"}
"""alice/app's first commit: the metric reads src/value.txt; the agent leaves the README alone."""

REVIEW_AGENT = """\
if [ "$CRUCIBLE_ROUND" = "0" ]; then
  echo 8 > src/value.txt
  echo "HYPOTHESIS: lower the value"
else
  grep '^> ' "$CRUCIBLE_CANDIDATE" > src/addressed.txt
  echo "HYPOTHESIS: address the review"
fi
"""
"""An agent that lowers the value in round 0 and, in a feedback round, commits the quoted review lines."""


def auth_env(user: str) -> dict[str, str]:
    """This process's environment plus the header that makes git authenticate to the forge as ``user``."""
    return {
        **os.environ,
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Bearer {TOKENS[user]}",
    }


def git_as(user: str, cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` as forge user ``user`` and return stdout; fail with stderr on a non-zero exit."""
    done = subprocess.run(["git", *args], cwd=cwd, env=auth_env(user), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def github_as(api_url: str, user: str, *, paced: bool = False) -> Github:
    """A PyGithub client that speaks to the forge as ``user``, without retries that would hide errors.

    Unpaced unless asked: PyGithub's default pacing (0.25 s between requests, 1 s between writes) is a
    courtesy to github.com's rate limits that the local forge does not need; every test creating
    alice/app and adding bob paid a second of it in a sleep. ``paced``: a test whose timing has relied on
    it (tests/rounds/test_liveness_e2e.py's review must not outrun the run it signals)."""
    pacing = {} if paced else {"seconds_between_requests": 0, "seconds_between_writes": 0}
    return Github(base_url=api_url, auth=Auth.Token(TOKENS[user]), retry=None, **pacing)


@contextmanager
def forge_with_users(root: Path, **options: Any) -> Iterator[ForgeHandle]:
    """Run a local forge stored at ``root`` whose users are those of ``TOKENS``; ``options`` go to the app."""
    for user, token in TOKENS.items():
        add_user(root, user, token=token)
    with running_forge(root, **options) as handle:
        yield handle


def host_repo(alice: Github, source: Path, name: str, *, collaborator: str | None = None) -> Repository:
    """Create ``alice/<name>``, optionally with a push collaborator, and push ``source``'s main to it."""
    created = alice.get_user().create_repo(name)
    if collaborator is not None:
        created.add_to_collaborators(collaborator, permission="push")
    git_as("alice", source, "push", "-q", created.clone_url, "main:refs/heads/main")
    return created


@dataclass(frozen=True)
class AppForge:
    """A running forge holding alice/app (bob may push), with alice's client and her local repository."""

    handle: ForgeHandle
    alice: Github
    source: Path


@contextmanager
def app_forge(tmp_path: Path, **options: Any) -> Iterator[AppForge]:
    """A forge with ``tmp_path/repo`` (``APP_FILES``) pushed as alice/app; ``options`` go to the forge."""
    source = make_repo(tmp_path / "repo", APP_FILES)
    with (
        forge_with_users(tmp_path / "forge", **options) as handle,
        github_as(handle.api_url, "alice") as alice,
    ):
        host_repo(alice, source, "app", collaborator="bob")
        yield AppForge(handle, alice, source)


def clone_as(user: str, url: str, dest: Path) -> Path:
    """Clone ``url`` into ``dest`` as forge user ``user``, who also becomes the clone's commit author."""
    git_as(user, dest.parent, "clone", "-q", url, str(dest))
    git(dest, "config", "user.email", f"{user}@example.com")
    git(dest, "config", "user.name", user.capitalize())
    return dest


def commit_and_push(work: Path, user: str, branch: str, message: str) -> str:
    """Commit everything in ``work``, push ``branch`` to origin as ``user`` and return the new commit."""
    git(work, "add", "-A")
    git(work, "commit", "-qm", message)
    git_as(user, work, "push", "-q", "origin", branch)
    return git(work, "rev-parse", "HEAD")


def component_toml(name: str, repo: str, *, fork: str | None = None) -> str:
    """A ``[[component]]`` table for alice/<name>, checked out from ``repo``, whose ``src/**`` may change."""
    lines = [
        "[[component]]",
        f'name = "{name}"',
        f'repo = "{repo}"',
        'base = "main"',
        'mutable = ["src/**"]',
        f'upstream = "alice/{name}"',
    ]
    if fork is not None:
        lines.append(f'fork = "{fork}"')
    return "\n".join(lines)


def spec_toml(
    *,
    agent: Path,
    api_url: str,
    components: Sequence[str],
    objective: str = "Lower the value",
    turns: int = 1,
    measured: str = "src/value.txt",
    interleave: bool = False,
    tail: str = "",
    metric: str | None = None,
) -> str:
    """crucible.toml for a run that lowers the number in ``measured`` and publishes to ``api_url``.

    One noiseless sample per measurement, so every keep is decided by the agent alone; ``tail`` is TOML
    appended after ``[publish]`` (e.g. a ``[feedback]`` table); ``metric`` replaces the metric command.
    """
    command = metric or f"echo METRIC value=$(cat {measured})"
    head = f"""\
objective = "{objective}"
turns = {turns}
[agent]
command = "sh {agent}"
[sandbox]
mode = "none"
[metric]
command = "{command}"
name = "value"
samples = 1
warmups = 0
confidence = 0
interleave = {str(interleave).lower()}
"""
    return head + "\n".join(components) + f'\n[publish]\nforge = "{api_url}"\n{tail}\n'


def review_round_spec(agent: Path, api_url: str, *, max_rounds: int = 1, interleave: bool = True) -> str:
    """The spec of the review-round tests: one search turn, then up to ``max_rounds`` feedback rounds."""
    feedback = f"""\
[feedback]
poll_interval = "1s"
quiet_window = "0s"
turns = 2
max_rounds = {max_rounds}
hold = "1%"
"""
    return spec_toml(
        agent=agent,
        api_url=api_url,
        components=[component_toml("app", "repo")],
        interleave=interleave,
        tail=feedback,
    )


def write_agent(tmp_path: Path, script: str) -> Path:
    """Write the agent's shell script to ``tmp_path/agent.sh`` and return its path."""
    path = tmp_path / "agent.sh"
    path.write_text(script)
    return path


def write_spec(tmp_path: Path, text: str) -> Path:
    """Write ``text`` to ``tmp_path/crucible.toml`` and return its path."""
    path = tmp_path / "crucible.toml"
    path.write_text(text)
    return path


def crucible_settings(tmp_path: Path) -> Settings:
    """Settings for a fresh crucible home under ``tmp_path`` with its SQLite database inside (a copy of
    the migrated one: these tests are about publishing, not migrations)."""
    home = tmp_path / "crucible-home"
    home.mkdir()
    return Settings(home=home, database_url=migrated_sqlite_url(home / "crucible.db"))


def forge_client(api_url: str, user: str) -> GithubForge:
    """crucible's own forge adapter acting as ``user``, with no pause between writes."""
    return GithubForge(api_url, ForgeCredentials.for_token(TOKENS[user]), write_interval=0)


@dataclass(frozen=True)
class PublishingRun:
    """A created (not yet started) run that may publish PRs, with everything needed to open it."""

    settings: Settings
    client: GithubForge
    store: Store
    run_id: str
    spec: Spec

    def context(
        self,
        publisher: Publisher | None = None,
        *,
        on_champion: Callable[[RunContext], object] | None = None,
    ) -> RunContext:
        """Open the run's context; with ``publisher`` (or ``on_champion``), every new champion is
        published through it."""
        hooks = Hooks(on_champion=publisher.publish if publisher is not None else on_champion)
        return open_context(
            self.settings, self.store, self.run_id, self.spec, environ=dict(os.environ), hooks=hooks
        )


def create_publishing_run(settings: Settings, client: GithubForge, spec_path: Path) -> PublishingRun:
    """Open (and upgrade) the store of ``settings`` and create a run of ``spec_path`` with PRs enabled."""
    spec = load_spec(spec_path)
    store = Store.open(settings.database_url, upgrade=True)
    run_id = create_run(
        store, spec, spec_path.read_text(), spec_path, options={"publish_prs": True}, forge=client
    )
    return PublishingRun(settings, client, store, run_id, spec)


def start_run(tmp_path: Path, api_url: str, spec: str, *, user: str = "alice") -> PublishingRun:
    """Write ``spec`` and create its run in a fresh crucible home, publishing as ``user``."""
    spec_path = write_spec(tmp_path, spec)
    return create_publishing_run(crucible_settings(tmp_path), forge_client(api_url, user), spec_path)
