"""Git smart HTTP on the forge: clone, fetch and push with real ``git``; refusals; PR heads follow."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from tests.localforge.conftest import Forge, ForgeStarter, Receiver


def _git_fails(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode != 0, f"git {' '.join(args)} unexpectedly succeeded"
    return proc.stderr


def test_push_with_header_or_basic_auth_and_refusals(forge: Forge) -> None:
    repo, checkout = forge.repo_with_branch()
    forge.commit(checkout, {"b.txt": "b\n"})
    git(
        checkout,
        "push",
        "-q",
        f"http://alice:{forge.tokens['alice']}@{forge.url[7:]}/alice/demo.git",
        "feature",
    )
    assert repo.get_branch("feature").commit.sha == git(checkout, "rev-parse", "HEAD")
    forge.commit(checkout, {"c.txt": "c\n"})
    challenged = "could not read Username"  # a 401 challenge, and prompts are disabled
    assert challenged in _git_fails(checkout, "push", "-q", "origin", "feature")
    wrong = "http.extraHeader=Authorization: Bearer wrong"
    assert challenged in _git_fails(checkout, "-c", wrong, "push", "origin", "feature")
    stderr = _git_fails(checkout, "-c", forge.auth_header("bob"), "push", "-q", "origin", "feature")
    assert "403" in stderr
    forge.gh().get_repo("alice/demo").add_to_collaborators("bob", "push")
    forge.push(checkout, "feature", user="bob")
    assert repo.get_branch("feature").commit.sha == git(checkout, "rev-parse", "HEAD")


def test_non_fast_forward_and_delete_pushes_are_refused(forge: Forge) -> None:
    repo, checkout = forge.repo_with_branch()
    published = git(checkout, "rev-parse", "HEAD")
    git(checkout, "reset", "-q", "--hard", "HEAD~1")
    forge.commit(checkout, {"other.txt": "diverged\n"})
    stderr = _git_fails(checkout, "-c", forge.auth_header("alice"), "push", "--force", "origin", "feature")
    assert "non-fast-forward" in stderr
    stderr = _git_fails(checkout, "-c", forge.auth_header("alice"), "push", "origin", ":feature")
    assert "deletion prohibited" in stderr or "rejected" in stderr
    assert repo.get_branch("feature").commit.sha == published


def test_push_moves_pull_request_head_and_fires_synchronize(
    forge_factory: ForgeStarter, receiver: Receiver
) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret="s3cret")
    pull, checkout = forge.open_pull()
    before = pull.head.sha
    after = forge.commit(checkout, {"app.py": "one\n2\nthree\n"}, "second")
    forge.push(checkout, "feature")
    fresh = forge.gh().get_repo("alice/demo").get_pull(pull.number)
    assert fresh.head.sha == after and fresh.commits == 2
    assert [f.filename for f in fresh.get_files()] == ["app.py"]
    assert forge.handle.flush_webhooks()
    sync = [r.payload for r in receiver.drain() if r.payload.get("action") == "synchronize"]
    assert len(sync) == 1
    assert (sync[0]["before"], sync[0]["after"]) == (before, after)
    assert sync[0]["pull_request"]["head"]["sha"] == after and sync[0]["sender"]["login"] == "alice"


def test_base_branch_moves_keep_three_dot_diff(forge: Forge) -> None:
    pull, checkout = forge.open_pull()
    git(checkout, "checkout", "-q", "main")
    forge.commit(checkout, {"README.md": "# changed on main\n"}, "main moves")
    forge.push(checkout, "main")
    fresh = forge.gh().get_repo("alice/demo").get_pull(pull.number)
    assert fresh.base.sha == git(checkout, "rev-parse", "HEAD")
    assert [f.filename for f in fresh.get_files()] == ["app.py"]  # base...head, not base..head


def test_private_repositories_need_credentials_to_fetch(forge: Forge, tmp_path: Path) -> None:
    forge.gh().get_user().create_repo("hidden", private=True, auto_init=True)
    url = f"{forge.url}/alice/hidden.git"
    stderr = _git_fails(tmp_path, "clone", "-q", url, str(tmp_path / "anon"))
    assert "could not read Username" in stderr
    _git_fails(tmp_path, "-c", forge.auth_header("bob"), "clone", "-q", url, str(tmp_path / "bob"))
    git(tmp_path, "-c", forge.auth_header("alice"), "clone", "-q", url, str(tmp_path / "alice"))
    assert (tmp_path / "alice" / "README.md").read_text() == "# hidden\n"


@pytest.mark.parametrize(
    "path", ["/alice/nothing.git/info/refs?service=git-upload-pack", "/alice/demo.git/HEAD"]
)
def test_unknown_repositories_and_dumb_protocol(forge: Forge, path: str) -> None:
    forge.gh().get_user().create_repo("demo", auto_init=True)
    status, _, _ = forge.gh().requester.requestJson("GET", f"{forge.url}{path}")
    assert status in {401, 403, 404}


def test_pull_request_from_a_fork_follows_pushes_to_the_fork(forge: Forge) -> None:
    upstream, _ = forge.repo_with_branch()
    fork = forge.gh("bob").get_repo("alice/demo").create_fork()
    assert (fork.full_name, fork.fork, fork.parent.full_name) == ("bob/demo", True, "alice/demo")
    checkout = forge.clone("bob/demo", "bob-fork")
    git(checkout, "checkout", "-q", "-b", "fix")
    first = forge.commit(checkout, {"fix.txt": "fixed\n"})
    forge.push(checkout, "fix", user="bob")
    pull = (
        forge.gh("bob").get_repo("alice/demo").create_pull(title="Fix", body="", head="bob:fix", base="main")
    )
    assert (pull.head.sha, pull.head.label, pull.head.repo.full_name) == (first, "bob:fix", "bob/demo")
    assert [f.filename for f in pull.get_files()] == ["fix.txt"]
    second = forge.commit(checkout, {"fix.txt": "fixed twice\n"})
    forge.push(checkout, "fix", user="bob")
    assert upstream.get_pull(pull.number).head.sha == second
    assert [p.number for p in upstream.get_pulls(head="bob:fix")] == [pull.number]
    assert forge.gh("bob").get_repo("alice/demo").create_fork().id == fork.id  # forking again reuses it
