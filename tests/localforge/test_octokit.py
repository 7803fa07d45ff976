"""Octokit (npm ``@octokit/rest``, installed by scripts/testenv/octokit.sh outside the clone) driving a
PR bot's flow against the forge (``octokit_bot.mjs``), then what the forge holds, read through PyGithub:
the branch, the commit the contents API made, the draft pull request with its labels, review request,
assignee, status and comment, and the answers the bot relied on (``mergeable``, the diff as a string,
the comparison, pagination, a stale write refused)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from tests.localforge.conftest import Forge

OCTOKIT = os.environ.get("CRUCIBLE_OCTOKIT")
NODE = shutil.which("node")
BOT = Path(__file__).with_name("octokit_bot.mjs")


@pytest.fixture
def octokit_dir(tmp_path: Path) -> Path:
    """A folder holding the bot script with Octokit's ``node_modules`` beside it (ESM resolves
    packages from the script's own folder upwards, never from a search path)."""
    if not (OCTOKIT and NODE and Path(OCTOKIT, "node_modules", "@octokit", "rest").is_dir()):
        if os.environ.get("CI"):
            pytest.fail(
                "Octokit is not installed: scripts/testenv/octokit.sh installs it (needs npm and node)"
            )
        pytest.skip(
            "Octokit is not installed (scripts/testenv/octokit.sh installs it and sets CRUCIBLE_OCTOKIT)"
        )
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "node_modules").symlink_to(Path(OCTOKIT, "node_modules"))
    shutil.copy(BOT, folder / BOT.name)
    return folder


def test_an_octokit_pr_bot_runs_its_whole_flow(forge: Forge, octokit_dir: Path) -> None:
    repo, checkout = forge.repo_with_branch()
    git(checkout, "checkout", "-q", "main")
    before = forge.commit(checkout, {"config/cache.toml": "[cache]\nsize_mb = 64\n"}, "cache config")
    forge.push(checkout, "main")
    repo.add_to_collaborators("bob", "push")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(octokit_dir),
        "FORGE_API": forge.handle.api_url,
        "FORGE_TOKEN": forge.tokens["alice"],
        "FORGE_REPO": "alice/demo",
    }
    done = subprocess.run(
        [NODE or "node", BOT.name], cwd=octokit_dir, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)

    assert seen["config"] == "[cache]\nsize_mb = 64\n"
    pull = repo.get_pull(seen["number"])
    assert (pull.draft, pull.head.ref, pull.base.ref, pull.head.sha) == (
        True,
        "bot/cache",
        "main",
        seen["commit"],
    )
    written = repo.get_commit(seen["commit"])
    assert written.parents[0].sha == before and written.commit.message == "perf: double the cache"
    assert (
        repo.get_contents("config/cache.toml", ref="bot/cache").decoded_content == b"[cache]\nsize_mb = 128\n"
    )  # type: ignore[union-attr]
    assert sorted(label.name for label in pull.labels) == seen["labels"] == ["bot", "performance"]
    assert [u.login for u in pull.requested_reviewers] == ["bob"]
    assert [a.login for a in pull.assignees] == ["alice"]
    assert [c.body for c in pull.get_issue_comments()] == [
        "cache: [cache]\nsize_mb = 64 → [cache]\nsize_mb = 128"
    ]

    assert (seen["mergeable"], seen["mergeable_state"]) == (True, "draft")
    assert seen["combined"] == "success"
    assert seen["diff_type"] == "string"  # `; charset=utf-8`: Octokit hands back text, not bytes
    assert seen["diff"].startswith("diff --git a/config/cache.toml b/config/cache.toml")
    assert seen["compare"] == {"status": "ahead", "ahead_by": 1, "files": ["config/cache.toml"]}
    assert seen["open_pulls"] == [seen["number"]]
    assert seen["stale"]["status"] == 409 and "does not match" in seen["stale"]["message"]
