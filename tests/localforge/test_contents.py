"""The contents API, ``compare`` and a computed ``mergeable``, through PyGithub as a bot without a
checkout uses them: read a file, write one on a branch, compare, open a pull request, wait for
``mergeable``. Text media types carry ``charset=utf-8``."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from github import GithubException

from tests.conftest import git
from tests.localforge.conftest import Forge, ForgeStarter, Receiver


def test_a_bot_reads_and_writes_one_file_without_a_checkout(
    forge_factory: ForgeStarter, receiver: Receiver
) -> None:
    forge = forge_factory(webhook_url=receiver.url, webhook_secret="s")
    repo, _ = forge.repo_with_branch(files={"src/app.py": "one\n"})
    readme = repo.get_contents("README.md")
    assert not isinstance(readme, list)
    assert (readme.decoded_content, readme.path, readme.type) == (b"# demo\n", "README.md", "file")
    listing = repo.get_contents("src", ref="feature")
    assert isinstance(listing, list) and [(c.name, c.type) for c in listing] == [("app.py", "file")]
    assert {c.type for c in repo.get_contents("", ref="feature")} == {"file", "dir"}  # type: ignore[union-attr]

    repo.create_git_ref("refs/heads/bump", repo.get_branch("main").commit.sha)
    assert forge.handle.flush_webhooks()
    receiver.drain()
    created = repo.create_file("config/x.toml", "add x", "size = 64\n", branch="bump")
    commit: Any = created["commit"]
    written = repo.get_commit(commit.sha)
    assert (written.commit.message, written.commit.author.name, written.parents[0].sha) == (
        "add x",
        "alice",
        repo.get_branch("main").commit.sha,
    )
    assert repo.get_branch("bump").commit.sha == commit.sha
    old = repo.get_contents("config/x.toml", ref="bump")
    assert not isinstance(old, list)
    updated = repo.update_file("config/x.toml", "bigger", "size = 128\n", old.sha, branch="bump")
    assert repo.get_contents("config/x.toml", ref="bump").decoded_content == b"size = 128\n"  # type: ignore[union-attr]
    assert [c.sha for c in repo.get_commits(sha="bump")][:2] == [updated["commit"].sha, commit.sha]  # type: ignore[union-attr]
    assert forge.handle.flush_webhooks()
    pushes = [d.payload for d in receiver.drain() if d.event == "push"]
    assert [p["after"] for p in pushes] == [commit.sha, updated["commit"].sha]  # type: ignore[union-attr]

    # The file raw at its download_url, which names the branch (as raw.githubusercontent.com's does).
    assert httpx.get(old.download_url).text == "size = 128\n"


def test_contents_writes_follow_githubs_rules(forge: Forge) -> None:
    repo, _ = forge.repo_with_branch()
    readme = repo.get_contents("README.md")
    assert not isinstance(readme, list)
    heads = {b.name: b.commit.sha for b in repo.get_branches()}
    with pytest.raises(GithubException) as stale:
        repo.update_file("README.md", "edit", "x", "0" * 40)
    assert stale.value.status == 409 and stale.value.data["message"] == f"README.md does not match {'0' * 40}"
    with pytest.raises(GithubException) as missing_sha:
        repo.create_file("README.md", "edit", "x")  # the file exists: its sha is required
    assert missing_sha.value.status == 422 and '"sha" wasn\'t supplied' in missing_sha.value.data["message"]
    with pytest.raises(GithubException) as no_branch:
        repo.create_file("new.txt", "add", "x", branch="nope")
    assert no_branch.value.status == 404 and no_branch.value.data["message"] == "Branch nope not found"
    with pytest.raises(GithubException) as reader:
        forge.gh("bob").get_repo("alice/demo").create_file("new.txt", "add", "x")
    assert reader.value.status == 403
    with pytest.raises(GithubException) as absent:
        repo.get_contents("nope.txt")
    assert absent.value.status == 404
    assert {b.name: b.commit.sha for b in repo.get_branches()} == heads  # no refused write moved a branch
    assert [c.path for c in repo.get_contents("")] == ["README.md"]  # type: ignore[union-attr]


def test_compare_answers_status_counts_commits_and_files(forge: Forge) -> None:
    repo, checkout = forge.repo_with_branch(files={"app.py": "one\n"})
    ahead = repo.compare("main", "feature")
    assert (ahead.status, ahead.ahead_by, ahead.behind_by, ahead.total_commits) == ("ahead", 1, 0, 1)
    assert [f.filename for f in ahead.files] == ["app.py"] and ahead.commits[
        0
    ].commit.message == "feature work"
    git(checkout, "checkout", "-q", "main")
    forge.commit(checkout, {"other.txt": "x\n"}, "main moves")
    forge.push(checkout, "main")
    diverged = repo.compare("main", "feature")
    assert (diverged.status, diverged.ahead_by, diverged.behind_by) == ("diverged", 1, 1)
    assert repo.compare("feature", "feature").status == "identical"
    behind = repo.compare(diverged.merge_base_commit.sha, "main")
    assert (behind.status, behind.ahead_by) == ("ahead", 1)
    with pytest.raises(GithubException) as unknown:
        repo.compare("main", "nope")
    assert unknown.value.status == 404


def test_mergeable_is_computed_and_a_conflict_is_dirty(forge: Forge) -> None:
    pull, checkout = forge.open_pull()
    repo = forge.gh().get_repo("alice/demo")
    fresh = repo.get_pull(pull.number)
    assert (fresh.mergeable, fresh.mergeable_state) == (True, "clean")
    git(checkout, "checkout", "-q", "main")
    forge.commit(checkout, {"app.py": "something else\n"}, "conflicting")
    forge.push(checkout, "main")
    conflicted = repo.get_pull(pull.number)
    assert (conflicted.mergeable, conflicted.mergeable_state) == (False, "dirty")
    draft = (
        forge.gh()
        .get_repo("alice/demo")
        .create_pull(title="d", body="", head="alice:main", base="feature", draft=True)
    )
    assert repo.get_pull(draft.number).mergeable_state in {"draft", "dirty"}


def test_text_media_types_say_utf_8(forge: Forge, api: Any) -> None:
    pull, _ = forge.open_pull()
    client = api()
    for path in (f"/repos/alice/demo/pulls/{pull.number}", "/repos/alice/demo/compare/main...feature"):
        for accept, media in (
            ("application/vnd.github.diff", "diff"),
            ("application/vnd.github.patch", "patch"),
        ):
            answer = client.get(path, headers={"Accept": accept})
            assert answer.status_code == 200
            assert answer.headers["content-type"] == f"application/vnd.github.{media}; charset=utf-8"
    raw = client.get("/repos/alice/demo/contents/README.md", headers={"Accept": "application/vnd.github.raw"})
    assert raw.content == b"# demo\n" and raw.headers["content-type"].endswith("; charset=utf-8")
    assert (
        base64.b64decode(client.get("/repos/alice/demo/contents/README.md").json()["content"]) == b"# demo\n"
    )
