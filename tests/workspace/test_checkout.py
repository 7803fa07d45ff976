"""Shared-clone checkouts against real git repositories: exact restore, commits, diffs, isolation."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from controller.domain.errors import CrucibleError, GitError, NotFoundError
from controller.workspace.checkout import COMMIT_IDENTITY, Checkout
from tests.conftest import git, make_repo

FILES = {
    ".gitignore": "build/\n*.o\n.venv/\n",
    "README.md": "hello\n",
    "src/app.py": "print('app')\n",
    "src/lib/util.py": "X = 1\n",
    "data/blob.txt": "blob\n",
    "dir_to_file/inner.txt": "inner\n",
    "file_to_dir": "plain file\n",
    "run.sh": "#!/bin/sh\necho run\n",
}


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Every file under root except .git: kind+mode and content (or link target)."""
    result: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (dirpath == str(root) and d == ".git")]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                result[rel] = ("link", os.readlink(full))
            else:
                with open(full, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                result[rel] = (f"file{oct(info.st_mode & 0o111)}", digest)
    return result


def git_dir_listing(repo: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under repo/.git (directories as 'dir')."""
    listing: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(repo / ".git"):
        for name in dirnames:
            listing[os.path.relpath(os.path.join(dirpath, name), repo)] = "dir"
        for name in filenames:
            full = os.path.join(dirpath, name)
            listing[os.path.relpath(full, repo)] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return listing


def remote_config(repo: Path) -> list[str]:
    lines = git(repo, "config", "--local", "--list").splitlines()
    return [line for line in lines if line.startswith(("remote.", "branch."))]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "user-repo", FILES)
    (repo / "run.sh").chmod(0o755)
    os.symlink("src/app.py", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "exec bit and symlink")
    return repo


@pytest.fixture
def checkout(source: Path, tmp_path: Path) -> Checkout:
    return Checkout.create(source, tmp_path / "crucible-home" / "ws" / "c1", git(source, "rev-parse", "HEAD"))


def make_mess(root: Path) -> None:
    """Everything an agent (or a build) can do to a tree."""
    (root / "README.md").write_text("changed\n")
    (root / "data" / "blob.txt").unlink()
    (root / "run.sh").chmod(0o644)
    (root / "src" / "app.py").chmod(0o755)
    (root / "new" / "deep" / "er").mkdir(parents=True)
    (root / "new" / "deep" / "er" / "x.txt").write_text("x\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"\0\1")
    (root / "src" / "lib" / "util.o").write_bytes(b"obj")
    (root / "file_to_dir").unlink()
    (root / "file_to_dir" / "sub").mkdir(parents=True)
    (root / "file_to_dir" / "sub" / "f").write_text("now a dir\n")
    for child in (root / "dir_to_file").iterdir():
        child.unlink()
    (root / "dir_to_file").rmdir()
    (root / "dir_to_file").write_text("now a file\n")
    (root / "link").unlink()
    os.symlink("README.md", root / "link")
    nested = root / "vendor" / "nested"
    nested.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    (nested / "f").write_text("nested repo file\n")
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "site.py").write_text("cache\n")


def test_fresh_checkout_matches_commit_and_is_detached(checkout: Checkout, source: Path) -> None:
    sha = git(source, "rev-parse", "HEAD")
    assert checkout.head() == sha
    assert checkout.head_detached()
    assert snapshot(checkout.path) == snapshot(source)
    assert git(checkout.path, "for-each-ref") == ""
    assert remote_config(checkout.path) == []
    assert checkout.status() == {}


def test_restore_is_exact_and_keeps_only_named_ignored_caches(checkout: Checkout, source: Path) -> None:
    expected = snapshot(checkout.path)
    make_mess(checkout.path)
    assert snapshot(checkout.path) != expected

    checkout.restore(checkout.head(), keep_ignored=[".venv"])

    kept = {".venv/lib/site.py": ("file0o0", hashlib.sha256(b"cache\n").hexdigest())}
    assert snapshot(checkout.path) == {**expected, **kept}
    assert checkout.status() == {}

    checkout.restore(checkout.head(), keep_ignored=[])
    assert snapshot(checkout.path) == expected


def test_restore_undoes_commits_branches_tags_and_stashes(checkout: Checkout) -> None:
    base = checkout.head()
    checkout.set_ref("refs/crucible/champion", base)
    root = checkout.path
    git(root, "checkout", "-q", "-b", "agent-branch")
    (root / "README.md").write_text("agent\n")
    git(root, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "agent commit")
    git(root, "tag", "agent-tag")
    (root / "README.md").write_text("stashed\n")
    git(root, "-c", "user.name=a", "-c", "user.email=a@b", "stash", "-q")
    git(root, "update-ref", "refs/remotes/x/y", "HEAD")
    assert not checkout.head_detached()
    assert checkout.head() != base

    checkout.restore(base)

    assert checkout.head_detached()
    assert checkout.head() == base
    assert (root / "README.md").read_text() == "hello\n"
    assert git(root, "for-each-ref", "--format=%(refname)") == "refs/crucible/champion"


def test_restore_moves_between_commits(checkout: Checkout) -> None:
    base = checkout.head()
    base_tree = snapshot(checkout.path)
    (checkout.path / "src" / "new.py").write_text("new\n")
    (checkout.path / "README.md").unlink()
    champion = checkout.commit("turn 1")
    champion_tree = snapshot(checkout.path)

    checkout.restore(base)
    assert snapshot(checkout.path) == base_tree
    checkout.restore(champion)
    assert snapshot(checkout.path) == champion_tree
    assert checkout.head() == champion


def test_restore_recovers_from_a_corrupt_index(checkout: Checkout) -> None:
    expected = snapshot(checkout.path)
    (checkout.path / ".git" / "index").write_bytes(b"garbage")
    (checkout.path / "README.md").write_text("x\n")
    checkout.restore(checkout.head())
    assert snapshot(checkout.path) == expected
    assert checkout.status() == {}


def test_restore_to_unknown_sha_raises_and_keeps_index(checkout: Checkout) -> None:
    index = (checkout.path / ".git" / "index").read_bytes()
    with pytest.raises(GitError):
        checkout.restore("0" * 40)
    assert (checkout.path / ".git" / "index").read_bytes() == index


def test_status_lists_every_changed_file(checkout: Checkout) -> None:
    root = checkout.path
    (root / "README.md").write_text("changed\n")
    (root / "data" / "blob.txt").unlink()
    (root / "new" / "a" / "b").mkdir(parents=True)
    (root / "new" / "a" / "b" / "c.txt").write_text("c\n")
    (root / "new" / "a" / "d.txt").write_text("d\n")
    (root / "spaced name ü.txt").write_text("s\n")
    (root / "build").mkdir()
    (root / "build" / "ignored.txt").write_text("i\n")
    git(root, "mv", "src/app.py", "src/moved.py")

    assert checkout.status() == {
        "README.md": " M",
        "data/blob.txt": " D",
        "new/a/b/c.txt": "??",
        "new/a/d.txt": "??",
        "spaced name ü.txt": "??",
        "src/app.py": "D ",
        "src/moved.py": "A ",
    }


def test_digest_tracks_content_mode_and_links(checkout: Checkout) -> None:
    root = checkout.path
    paths = ["README.md", "run.sh", "link", "missing.txt", "src", "README.md/not-a-dir"]
    first = checkout.digest(paths)
    assert first["README.md"] == hashlib.sha256(b"hello\n").hexdigest()
    assert first["run.sh"] is not None and first["run.sh"].endswith("+x")
    assert first["link"] == "symlink:" + hashlib.sha256(b"src/app.py").hexdigest()
    assert first["missing.txt"] is None
    assert first["README.md/not-a-dir"] is None
    assert first["src"] == "directory"

    (root / "run.sh").chmod(0o644)
    (root / "README.md").write_text("other\n")
    second = checkout.digest(paths)
    assert second["run.sh"] != first["run.sh"]
    assert second["README.md"] != first["README.md"]
    assert second["link"] == first["link"]


def test_commit_uses_fixed_identity_and_skips_hooks_and_signing(
    checkout: Checkout, source: Path, tmp_path: Path
) -> None:
    failing = "#!/bin/sh\necho hook ran >&2\nexit 1\n"
    for hooks in (source / ".git" / "hooks", checkout.path / ".git" / "hooks"):
        hooks.mkdir(exist_ok=True)  # a clone has none (no template): an agent could make them
        for name in ("pre-commit", "commit-msg", "prepare-commit-msg"):
            (hooks / name).write_text(failing)
            (hooks / name).chmod(0o755)
    home = Path(os.environ["HOME"])
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Someone Else\n\temail = else@example.com\n"
        "[commit]\n\tgpgsign = true\n[core]\n\thooksPath = " + str(source / ".git" / "hooks") + "\n"
    )
    (checkout.path / "src" / "app.py").write_text("print('faster')\n")
    (checkout.path / "brand_new.txt").write_text("# not a comment\n")

    sha = checkout.commit("# Hypothesis: cache more\n\nbody\n")

    assert sha == git(checkout.path, "rev-parse", "HEAD")
    assert git(checkout.path, "log", "-1", "--format=%an|%ae|%cn|%ce") == "|".join(COMMIT_IDENTITY * 2)
    assert git(checkout.path, "log", "-1", "--format=%B") == "# Hypothesis: cache more\n\nbody"
    assert git(checkout.path, "show", "--name-only", "--format=", sha).splitlines() == [
        "brand_new.txt",
        "src/app.py",
    ]
    assert checkout.status() == {}
    assert checkout.head_detached()


def test_commit_with_nothing_to_commit_raises(checkout: Checkout) -> None:
    with pytest.raises(GitError):
        checkout.commit("empty")


def test_set_ref_only_under_refs_crucible(checkout: Checkout) -> None:
    checkout.set_ref("refs/crucible/run-1/champion", checkout.head())
    assert git(checkout.path, "rev-parse", "refs/crucible/run-1/champion") == checkout.head()
    with pytest.raises(ValueError):
        checkout.set_ref("refs/heads/main", checkout.head())


def test_diff_applies_onto_base_regardless_of_user_config(
    checkout: Checkout, source: Path, tmp_path: Path
) -> None:
    (Path(os.environ["HOME"]) / ".gitconfig").write_text(
        "[diff]\n\tnoprefix = true\n\trenames = copies\n\texternal = false\n[color]\n\tui = always\n"
    )
    base = checkout.head()
    root = checkout.path
    (root / "src" / "app.py").write_text("print('faster')\n")
    (root / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (root / "data" / "blob.txt").unlink()
    git(root, "mv", "src/lib/util.py", "src/lib/helpers.py")
    (root / "run.sh").chmod(0o644)
    (root / "link").unlink()
    os.symlink("README.md", root / "link")
    head = checkout.commit("turn")

    patch = checkout.diff(base)
    assert "\x1b[" not in patch
    assert checkout.changed_files(base) == [
        "bin.dat",
        "data/blob.txt",
        "link",
        "run.sh",
        "src/app.py",
        "src/lib/helpers.py",
        "src/lib/util.py",
    ]
    target = tmp_path / "apply-here"
    git(tmp_path, "clone", "-q", str(source), str(target))
    git(target, "checkout", "-q", "--detach", base)
    subprocess.run(
        ["git", "apply", "--index", "-"],
        cwd=target,
        input=patch.encode("utf-8", "surrogateescape"),
        check=True,
        env={k: v for k, v in os.environ.items() if k != "HOME"},
    )
    assert git(target, "write-tree") == git(checkout.path, "rev-parse", f"{head}^{{tree}}")
    assert checkout.diff(base, base) == ""


def test_users_repository_is_never_written(source: Path, tmp_path: Path) -> None:
    git(source, "--no-optional-locks", "status")
    before = git_dir_listing(source)
    head_before = git(source, "--no-optional-locks", "symbolic-ref", "HEAD")
    refs_before = git(source, "for-each-ref")
    worktree_before = snapshot(source)

    sha = git(source, "rev-parse", "HEAD")
    checkout = Checkout.create(source, tmp_path / "crucible-home" / "ws", sha)
    make_mess(checkout.path)
    checkout.status()
    checkout.restore(sha, [".venv"])
    (checkout.path / "README.md").write_text("kept\n")
    new = checkout.commit("turn")
    checkout.set_ref("refs/crucible/x", new)
    checkout.diff(sha)
    checkout.changed_files(sha)
    Checkout.create(source, checkout.path, sha)
    checkout.remove()

    assert git_dir_listing(source) == before
    assert git(source, "--no-optional-locks", "symbolic-ref", "HEAD") == head_before
    assert git(source, "for-each-ref") == refs_before
    assert snapshot(source) == worktree_before
    assert git(source, "--no-optional-locks", "status", "--porcelain") == ""
    assert not checkout.path.exists()


def test_create_is_idempotent_and_restores_an_existing_clone(checkout: Checkout, source: Path) -> None:
    sha = checkout.head()
    expected = snapshot(checkout.path)
    (checkout.path / "README.md").write_text("left by a crash\n")
    (checkout.path / "build").mkdir()
    (checkout.path / "build" / "x").write_text("x\n")

    again = Checkout.create(source, checkout.path, sha)

    assert again == checkout
    assert snapshot(checkout.path) == expected


def test_create_replaces_a_partial_clone_and_refuses_foreign_directories(
    source: Path, tmp_path: Path
) -> None:
    sha = git(source, "rev-parse", "HEAD")
    target = tmp_path / "ws" / "c"
    partial = tmp_path / "ws" / ".c.partial"
    partial.mkdir(parents=True)
    (partial / "junk").write_text("half a clone\n")
    created = Checkout.create(source, target, sha)
    assert created.head() == sha
    assert not partial.exists()

    foreign = tmp_path / "not-a-clone"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("mine\n")
    with pytest.raises(CrucibleError):
        Checkout.create(source, foreign, sha)
    assert (foreign / "precious.txt").read_text() == "mine\n"


def test_create_from_url_leaves_no_remote_behind(source: Path, tmp_path: Path) -> None:
    sha = git(source, "rev-parse", "HEAD")
    created = Checkout.create(f"file://{source}", tmp_path / "from-url", sha)
    assert created.head() == sha
    assert not (created.path / ".git" / "objects" / "info" / "alternates").exists()
    assert remote_config(created.path) == []
    assert created.sandbox_readonly_paths() == [created.path / ".git"]


def test_create_from_a_local_repository_borrows_its_objects_without_a_clone(
    checkout: Checkout, source: Path, tmp_path: Path
) -> None:
    """What ``clone --shared`` and the removal of its remote and branch left, made directly: the
    source's objects borrowed, no ref, no remote, the clone's settings, the source untouched; and
    a checkout of that checkout (the champion arm's, from the candidate's) borrows from it alike."""
    sha = git(source, "rev-parse", "HEAD")
    alternates = checkout.git_dir / "objects" / "info" / "alternates"
    assert alternates.read_text() == f"{(source / '.git' / 'objects').resolve()}\n"
    assert git(checkout.path, "for-each-ref") == ""
    assert remote_config(checkout.path) == []
    assert git(checkout.path, "config", "--local", "gc.auto") == "0"
    assert git(checkout.path, "config", "--local", "core.hooksPath") == "/dev/null"
    assert checkout.head() == sha and checkout.head_detached()
    assert checkout.status() == {}
    assert snapshot(checkout.path) == snapshot(source)
    assert not any((checkout.git_dir / name).exists() for name in ("hooks", "description", "info"))

    second = Checkout.create(checkout.path, tmp_path / "second", sha)
    borrowed = (second.git_dir / "objects" / "info" / "alternates").read_text()
    assert borrowed == f"{(checkout.git_dir / 'objects').resolve()}\n"
    assert snapshot(second.path) == snapshot(source)
    (second.path / "README.md").write_text("changed\n")
    made = second.commit_paths(["README.md"], "a kept turn", ("crucible", "crucible@localhost"))
    assert git(second.path, "rev-parse", f"{made}^") == sha


def test_create_from_a_linked_worktree_or_a_bare_repository(source: Path, tmp_path: Path) -> None:
    """A linked worktree's ``.git`` is a file: git clones it, as before. A bare repository lends its
    own ``objects``."""
    sha = git(source, "rev-parse", "HEAD")
    linked = tmp_path / "linked"
    git(source, "worktree", "add", "-q", "--detach", str(linked), sha)
    from_linked = Checkout.create(linked, tmp_path / "from-linked", sha)
    assert from_linked.head() == sha
    assert snapshot(from_linked.path) == snapshot(source)
    assert remote_config(from_linked.path) == [] and git(from_linked.path, "for-each-ref") == ""

    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
    from_bare = Checkout.create(bare, tmp_path / "from-bare", sha)
    alternates = from_bare.git_dir / "objects" / "info" / "alternates"
    assert alternates.read_text() == f"{(bare / 'objects').resolve()}\n"
    assert snapshot(from_bare.path) == snapshot(source)


def test_open_and_sandbox_paths(checkout: Checkout, source: Path, tmp_path: Path) -> None:
    assert Checkout.open(checkout.path) == checkout
    with pytest.raises(NotFoundError):
        Checkout.open(tmp_path / "nothing-here")
    assert checkout.sandbox_readonly_paths() == [
        checkout.path / ".git",
        (source / ".git" / "objects").resolve(),
    ]


def test_create_with_unknown_sha_leaves_nothing(source: Path, tmp_path: Path) -> None:
    target = tmp_path / "ws" / "bad"
    with pytest.raises(GitError):
        Checkout.create(source, target, "0" * 40)
    assert not target.exists()
    assert not (tmp_path / "ws" / ".bad.partial").exists()


def test_create_accepts_an_empty_directory_and_a_relative_path(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = git(source, "rev-parse", "HEAD")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    created = Checkout.create(source, Path("empty"), sha)
    assert created.path == tmp_path / "empty"
    assert created.path.is_absolute()
    assert (created.path / "README.md").read_text() == "hello\n"


def test_symlinks_whose_target_leaves_the_checkout_are_found(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"src/a.txt": "a\n", "src/sub/b.txt": "b\n"})
    co = Checkout.create(repo, tmp_path / "co", git(repo, "rev-parse", "HEAD"))
    links = {
        "src/abs": "/etc/passwd",
        "src/up": "/".join([".."] * 3 + [".ssh", "id_rsa"]),
        "src/sub/chain": "../hop",
        "src/hop": str(tmp_path),
        "src/fine": "sub/b.txt",
        "src/sub/fine-up": "../a.txt",
    }
    for rel, target in links.items():
        (co.path / rel).symlink_to(target)

    found = co.escaping_symlinks([*links, "src/a.txt", "src/missing"])

    assert sorted(found) == ["src/abs", "src/hop", "src/sub/chain", "src/up"]
