"""Git plumbing on the forge's bare repositories (``<root>/git/<owner>/<repo>.git``).

Everything the REST layer reports about code (refs, branch heads, PR files, commits, diffs) is
computed here from the repositories themselves, never echoed from what a client sent. Git runs
with a clean environment (no inherited ``GIT_*``, no system or global config) so user settings
cannot change diff output.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from controller.domain.errors import GitError

ZERO_SHA = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # what a root commit is diffed against


@dataclass(frozen=True)
class FileChange:
    """One file of a diff, as GitHub's ``diff-entry`` needs it."""

    filename: str
    previous_filename: str | None
    status: str
    additions: int
    deletions: int
    sha: str | None
    patch: str | None


@dataclass(frozen=True)
class CommitInfo:
    """A commit's metadata."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_date: str
    committer_name: str
    committer_email: str
    committer_date: str
    message: str


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every forge-side git process gets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C")
    env.update(extra or {})
    return env


def run(repo: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
    """Run ``git -C repo args`` and return stdout; raise ``GitError`` on failure."""
    argv = ["git", "-C", str(repo), *args]
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=git_env(env))
    if proc.returncode != 0:
        raise GitError(argv, proc.returncode, proc.stderr.decode(errors="replace"))
    return proc.stdout


def _ok(repo: Path, *args: str) -> bool:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=git_env())
    return proc.returncode == 0


_SERVER_CONFIG = (
    ("receive.denyNonFastForwards", "true"),
    ("receive.denyDeletes", "true"),
    ("receive.hideRefs", "refs/pull"),
    ("http.receivepack", "true"),
    ("uploadpack.allowAnySHA1InWant", "true"),
)


def init_bare(path: Path, branch: str) -> None:
    """Create a bare repository that refuses non-fast-forward pushes and branch deletes by push."""
    path.parent.mkdir(parents=True, exist_ok=True)
    argv = ["git", "init", "--bare", "-q", "-b", branch, str(path)]
    subprocess.run(argv, check=True, capture_output=True, env=git_env())
    _configure(path)


def clone_bare(source: Path, path: Path) -> None:
    """A fork: a bare copy of ``source``'s branches and tags, configured like ``init_bare``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    argv = ["git", "clone", "--bare", "-q", str(source), str(path)]
    subprocess.run(argv, check=True, capture_output=True, env=git_env())
    run(path, "remote", "remove", "origin")
    _configure(path)


def _configure(path: Path) -> None:
    for key, value in _SERVER_CONFIG:
        run(path, "config", key, value)


def auto_init(path: Path, branch: str, name: str, email: str, repo_name: str) -> str:
    """Create the initial commit (a README) on ``branch``, as GitHub's ``auto_init`` does."""
    blob = run(path, "hash-object", "-w", "--stdin", stdin=f"# {repo_name}\n".encode()).decode().strip()
    tree = run(path, "mktree", stdin=f"100644 blob {blob}\tREADME.md\n".encode()).decode().strip()
    who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name}
    who["GIT_COMMITTER_EMAIL"] = email
    sha = run(path, "commit-tree", tree, "-m", "Initial commit", env=who).decode().strip()
    run(path, "update-ref", f"refs/heads/{branch}", sha, ZERO_SHA)
    return sha


def resolve(path: Path, rev: str) -> str | None:
    """The commit ``rev`` names, or None."""
    proc = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"],
        capture_output=True,
        env=git_env(),
    )
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def object_type(path: Path, sha: str) -> str | None:
    """``commit``, ``tree``, ``blob`` or ``tag``; None when the object does not exist."""
    proc = subprocess.run(["git", "-C", str(path), "cat-file", "-t", sha], capture_output=True, env=git_env())
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def refs(path: Path, prefix: str = "refs/") -> list[tuple[str, str, str]]:
    """``(refname, sha, object type)`` of every ref under ``prefix``, sorted by name."""
    out = run(path, "for-each-ref", "--format=%(refname) %(objectname) %(objecttype)", prefix).decode()
    result = []
    for line in out.splitlines():
        name, sha, kind = line.split(" ")
        result.append((name, sha, kind))
    return result


def snapshot(path: Path) -> dict[str, str]:
    """Every ref and its sha: compared before and after a push to see what moved."""
    return {name: sha for name, sha, _ in refs(path)}


def update_ref(path: Path, ref: str, new: str, old: str | None) -> bool:
    """Move ``ref`` to ``new`` only if it still points at ``old`` (None: must not exist)."""
    return _ok(path, "update-ref", ref, new, old or ZERO_SHA)


def set_ref(path: Path, ref: str, new: str) -> None:
    """Point ``ref`` at ``new`` whatever it pointed at (forge-owned refs such as ``refs/pull/N/head``)."""
    run(path, "update-ref", ref, new)


def fetch_commit(dest: Path, source: Path, sha: str) -> None:
    """Copy commit ``sha`` and its history from ``source`` into ``dest`` (cross-repo PRs)."""
    run(dest, "fetch", "-q", "--no-tags", "--no-write-fetch-head", str(source), sha)


def shortstat(path: Path, base: str, head: str) -> tuple[int, int, int]:
    """``(files changed, insertions, deletions)`` from ``base`` to ``head``."""
    out = run(path, "diff", "--shortstat", "-M", base, head).decode()
    numbers = [0, 0, 0]
    for part in out.split(","):
        words = part.split()
        if words:
            slot = 0 if "file" in part else 1 if "insertion" in part else 2
            numbers[slot] = int(words[0])
    return numbers[0], numbers[1], numbers[2]


def delete_ref(path: Path, ref: str, old: str) -> bool:
    return _ok(path, "update-ref", "-d", ref, old)


def is_ancestor(path: Path, ancestor: str, descendant: str) -> bool:
    return _ok(path, "merge-base", "--is-ancestor", ancestor, descendant)


def merge_base(path: Path, a: str, b: str) -> str | None:
    proc = subprocess.run(["git", "-C", str(path), "merge-base", a, b], capture_output=True, env=git_env())
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied", "T": "changed"}


def _raw_entries(path: Path, base: str, head: str) -> list[tuple[str, str | None, str, str | None]]:
    """``(filename, previous, status, blob sha)`` per changed file, in git's diff order."""
    fields = run(path, "diff", "--raw", "-z", "-M", "--no-abbrev", base, head).decode().split("\0")
    entries = []
    i = 0
    while i < len(fields) - 1:
        meta = fields[i].lstrip(":").split(" ")
        letter = meta[4][0]
        old_sha, new_sha = meta[2], meta[3]
        if letter in "RC":
            previous, name, i = fields[i + 1], fields[i + 2], i + 3
        else:
            previous, name, i = None, fields[i + 1], i + 2
        sha = old_sha if letter == "D" else new_sha
        entries.append((name, previous, _STATUS.get(letter, "changed"), None if sha == ZERO_SHA else sha))
    return entries


def _numstat(path: Path, base: str, head: str) -> list[tuple[int, int]]:
    fields = run(path, "diff", "--numstat", "-z", "-M", base, head).decode().split("\0")
    counts = []
    i = 0
    while i < len(fields) - 1:
        add, dele, rest = fields[i].split("\t", 2)
        i += 3 if rest == "" else 1  # a rename: the two paths follow as separate fields
        counts.append((0 if add == "-" else int(add), 0 if dele == "-" else int(dele)))
    return counts


def diff_text(path: Path, base: str, head: str) -> str:
    """The unified diff ``base..head`` (GitHub's ``.diff`` media type)."""
    return run(path, "diff", "-M", "--no-color", "--no-ext-diff", base, head).decode(errors="replace")


def _patches(text: str) -> list[str | None]:
    chunks: list[list[str]] = []
    for line in text.split("\n"):
        if line.startswith("diff --git "):
            chunks.append([])
        elif chunks:
            chunks[-1].append(line)
    patches: list[str | None] = []
    for chunk in chunks:
        start = next((n for n, line in enumerate(chunk) if line.startswith("@@")), None)
        patches.append(None if start is None else "\n".join(chunk[start:]).rstrip("\n"))
    return patches


def diff_files(path: Path, base: str, head: str) -> list[FileChange]:
    """The files changed from ``base`` to ``head`` with counts and per-file patches."""
    entries = _raw_entries(path, base, head)
    counts = _numstat(path, base, head)
    patches = _patches(diff_text(path, base, head))
    changes = []
    for n, (name, previous, status, sha) in enumerate(entries):
        add, dele = counts[n] if n < len(counts) else (0, 0)
        patch = patches[n] if n < len(patches) else None
        changes.append(FileChange(name, previous, status, add, dele, sha, patch))
    return changes


_FORMAT = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B%x1e"


def _utc(stamp: str) -> str:
    return datetime.fromisoformat(stamp).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _commits(out: str) -> list[CommitInfo]:
    infos = []
    for record in out.split("\x1e"):
        parts = record.lstrip("\n").split("\0")
        if len(parts) < 10:
            continue
        sha, tree, parents, an, ae, ad, cn, ce, cd, message = parts[:10]
        infos.append(
            CommitInfo(
                sha, tree, tuple(parents.split()), an, ae, _utc(ad), cn, ce, _utc(cd), message.rstrip("\n")
            )
        )
    return infos


def commits_between(path: Path, base: str, head: str) -> list[CommitInfo]:
    """Commits reachable from ``head`` but not ``base``, oldest first (GitHub's PR commit order)."""
    return _commits(run(path, "log", "--reverse", f"--format={_FORMAT}", f"{base}..{head}").decode())


def commit_info(path: Path, sha: str) -> CommitInfo:
    return _commits(run(path, "log", "-1", f"--format={_FORMAT}", sha).decode())[0]


def count_commits(path: Path, base: str, head: str) -> int:
    return int(run(path, "rev-list", "--count", f"{base}..{head}").decode().strip())


def commit_patch(path: Path, sha: str) -> str:
    """One commit as a mailbox patch (``GET /commits/{sha}`` with the ``.patch`` media type)."""
    out = run(path, "format-patch", "--stdout", "-1", "-M", "--no-color", "--no-signature", sha)
    return out.decode(errors="replace")


def format_patch(path: Path, base: str, head: str) -> str:
    """The commits ``base..head`` as mailbox patches (GitHub's ``.patch`` media type and ``patch_url``)."""
    out = run(path, "format-patch", "--stdout", "-M", "--no-color", "--no-signature", f"{base}..{head}")
    return out.decode(errors="replace")


def branches_containing(path: Path, sha: str, limit: int = 10) -> list[tuple[str, str]]:
    """``(branch, head sha)`` of up to ``limit`` branches whose history contains ``sha``."""
    fmt = "--format=%(refname:lstrip=2) %(objectname)"
    out = run(path, "for-each-ref", f"--count={limit}", "--contains", sha, fmt, "refs/heads/").decode()
    return [(name, head) for name, head in (line.rsplit(" ", 1) for line in out.splitlines())]


def log(
    path: Path,
    rev: str,
    *,
    paths: tuple[str, ...] = (),
    author: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> list[CommitInfo]:
    """Commits reachable from ``rev``, newest first (``GET /commits`` and its filters)."""
    args = ["log", f"--format={_FORMAT}"]
    if author:
        args.append(f"--author={author}")
    if since:
        args.append(f"--since={since}")
    if until:
        args.append(f"--until={until}")
    return _commits(run(path, *args, rev, "--", *paths).decode())
