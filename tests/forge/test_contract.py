"""The ``Forge`` contract (controller/forge/base.py), run against every implementation: the
``github`` adapter talking to the local forge over real HTTP, and ``FakeForge``."""

from __future__ import annotations

import base64

import pytest

from controller.forge.base import ForgeError, ForgeNotFound, PullInfo
from tests.forge.conftest import COLLABORATOR, STRANGER, Harness

BRANCH = "crucible/run-1"


def open_draft(h: Harness, branch: str = BRANCH, body: str = "the body") -> tuple[PullInfo, str]:
    sha = h.push_branch(branch, {"speed.py": f"fast = True  # {branch}\n"})
    pull = h.forge.create_pull(
        h.full_name, head=f"{h.owner}:{branch}", base="main", title="Speed up", body=body, draft=True
    )
    return pull, sha


def test_repo_info(harness: Harness) -> None:
    info = harness.forge.repo(harness.full_name)
    assert (info.full_name, info.default_branch) == (harness.full_name, "main")
    assert info.clone_url.endswith(f"/{harness.full_name}.git")
    with pytest.raises(ForgeNotFound):
        harness.forge.repo(f"{harness.owner}/no-such-repo")


def test_branch_sha_of_existing_and_missing_branches(harness: Harness) -> None:
    assert harness.forge.branch_sha(harness.full_name, "main") == harness.main_sha()
    sha = harness.push_branch(BRANCH, {"a.txt": "a\n"})
    assert harness.forge.branch_sha(harness.full_name, BRANCH) == sha
    assert harness.forge.branch_sha(harness.full_name, "crucible/no-such-run") is None


def test_create_a_draft_then_find_and_get_it(harness: Harness) -> None:
    pull, sha = open_draft(harness)
    assert (pull.head_ref, pull.head_sha, pull.head_owner, pull.base_ref) == (
        BRANCH,
        sha,
        harness.owner,
        "main",
    )
    assert (pull.state, pull.merged, pull.draft, pull.body) == ("open", False, True, "the body")
    assert pull.url.endswith(f"/{harness.full_name}/pull/{pull.number}")
    assert harness.forge.find_pull(harness.full_name, f"{harness.owner}:{BRANCH}") == pull
    assert harness.forge.get_pull(harness.full_name, pull.number) == pull


def test_find_needs_owner_and_branch(harness: Harness) -> None:
    open_draft(harness)
    assert harness.forge.find_pull(harness.full_name, f"{harness.owner}:crucible/other") is None
    assert harness.forge.find_pull(harness.full_name, f"{STRANGER}:{BRANCH}") is None
    for bare in (BRANCH, f":{BRANCH}", f"{harness.owner}:"):
        with pytest.raises(ValueError, match="owner:branch"):
            harness.forge.find_pull(harness.full_name, bare)
    with pytest.raises(ValueError, match="owner:branch"):
        harness.forge.create_pull(harness.full_name, head=BRANCH, base="main", title="t", body="")


def test_find_returns_the_newest_pull_in_any_state(harness: Harness) -> None:
    first, _ = open_draft(harness)
    harness.close_pull(first.number)
    closed = harness.forge.find_pull(harness.full_name, f"{harness.owner}:{BRANCH}")
    assert closed is not None and (closed.number, closed.state) == (first.number, "closed")
    second, _ = open_draft(harness, body="second")
    assert second.number != first.number
    assert harness.forge.find_pull(harness.full_name, f"{harness.owner}:{BRANCH}") == second


def test_get_and_update_the_body_and_title(harness: Harness) -> None:
    pull, _ = open_draft(harness)
    updated = harness.forge.update_pull(harness.full_name, pull.number, body="new body")
    assert updated.body == "new body"
    assert harness.forge.get_pull(harness.full_name, pull.number).body == "new body"
    retitled = harness.forge.update_pull(harness.full_name, pull.number, title="Faster")
    assert retitled.body == "new body"  # a title change leaves the body alone
    assert harness.forge.update_pull(harness.full_name, pull.number) == retitled
    with pytest.raises(ForgeNotFound):
        harness.forge.get_pull(harness.full_name, pull.number + 100)
    with pytest.raises(ForgeNotFound):
        harness.forge.update_pull(harness.full_name, pull.number + 100, body="x")


def test_the_head_sha_follows_the_branch(harness: Harness) -> None:
    pull, _ = open_draft(harness)
    moved = harness.push_branch(BRANCH, {"speed.py": "fast = 'even more'\n"})
    assert harness.forge.get_pull(harness.full_name, pull.number).head_sha == moved


def test_creating_twice_gives_the_same_pull(harness: Harness) -> None:
    first, _ = open_draft(harness)
    again = harness.forge.create_pull(
        harness.full_name, head=f"{harness.owner}:{BRANCH}", base="main", title="Speed up", body="other"
    )
    assert again.number == first.number
    found = harness.forge.find_pull(harness.full_name, f"{harness.owner}:{BRANCH}")
    assert found is not None and found.number == first.number


def test_a_pull_from_a_missing_branch_is_refused(harness: Harness) -> None:
    with pytest.raises(ForgeError) as caught:
        harness.forge.create_pull(
            harness.full_name, head=f"{harness.owner}:no-such-branch", base="main", title="t", body=""
        )
    assert not isinstance(caught.value, ForgeNotFound)


def test_permissions(harness: Harness) -> None:
    harness.add_collaborator(COLLABORATOR, "push")
    assert harness.forge.permission(harness.full_name, harness.owner) == "admin"
    assert harness.forge.permission(harness.full_name, COLLABORATOR) == "write"
    assert harness.forge.permission(harness.full_name, STRANGER) == "read"  # a public repository
    harness.add_collaborator(STRANGER, "triage")
    assert harness.forge.permission(harness.full_name, STRANGER) == "read"
    harness.add_collaborator(STRANGER, "maintain")
    assert harness.forge.permission(harness.full_name, STRANGER) == "write"
    with pytest.raises(ForgeNotFound):
        harness.forge.permission(harness.full_name, "nobody-at-all")


def test_git_auth_env_is_an_extra_header(harness: Harness) -> None:
    env = harness.forge.git_auth_env(harness.full_name)
    assert (env["GIT_CONFIG_COUNT"], env["GIT_CONFIG_KEY_0"]) == ("1", "http.extraHeader")
    scheme, _, encoded = env["GIT_CONFIG_VALUE_0"].removeprefix("Authorization: ").partition(" ")
    assert scheme == "Basic"
    user, _, token = base64.b64decode(encoded).decode().partition(":")
    assert user == "x-access-token" and token
    assert all(token not in key for key in env)
