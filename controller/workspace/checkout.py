"""Controller-owned checkouts of a component: shared clones that the user's repository never sees.

A run never works in the user's checkout, and never writes to the user's repository either: each
checkout, under CRUCIBLE_HOME, is what ``git clone --shared`` of it makes (``clone.make_clone``). It
borrows the user's objects through ``objects/info/alternates`` (so creating one costs a checkout, not
a copy of history) and keeps its own refs, index and new objects, so crucible's commits and refs
(``refs/crucible/*``) live in the clone only, and it has no remote, so no URL (with credentials,
maybe) stays in a directory that sandboxed commands can read.

Every method is one or two git commands over the whole tree at most: a turn's git work is
status + restore (reset, clean) + commit + diff, and that floor is what it costs here too.

Caveat of ``--shared``: the clone needs the user's objects that it borrows. A ``git gc --prune``
in the user's repository after the base commit became unreachable there would break it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.domain.errors import CrucibleError, GitError, NotFoundError
from controller.workspace.clone import make_clone
from controller.workspace.git import git_env, run_git, run_git_bytes
from controller.workspace.looserefs import write_loose_refs

COMMIT_IDENTITY = ("crucible", "crucible@localhost")
CRUCIBLE_REF_PREFIX = "refs/crucible/"

# Per-command overrides of user config that would change what crucible writes or reads.
# Below this many tracked files ``commit_paths`` uses porcelain add + commit (fewer processes); above
# it, staging only the changed paths avoids two whole-tree scans.
PLUMBING_MIN_ENTRIES = 5000
# At most this many paths go on one ``commit --only`` command line (``commit_paths``); more take add + commit.
ONE_COMMIT_MAX_PATHS = 1000
# Loose refs in one folder of refs/crucible/ (one per kept turn) before ``set_refs`` packs them.
LOOSE_REFS_MAX = 32
_COMMIT_OPTS = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false")
_DIFF_OPTS = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--binary",
    "--full-index",
    "--no-renames",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--ignore-submodules=none",
)


Identity = tuple[str, str]
"""A commit's author and committer: (name, email); ``[publish] author`` or COMMIT_IDENTITY."""


def _commit_env(identity: Identity | None = None) -> dict[str, str]:
    name, email = identity or COMMIT_IDENTITY
    return git_env(
        {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
        }
    )


def _split_z(raw: bytes) -> list[str]:
    return [os.fsdecode(item) for item in raw.split(b"\0") if item]


def _file_digest(full: Path) -> str | None:
    """sha256 hex of a regular file ("+x" appended when executable), of a symlink's target text
    ("symlink:" prefix), "directory" for a directory, None if nothing is there."""
    try:
        info = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(info.st_mode):
        return "symlink:" + hashlib.sha256(os.fsencode(os.readlink(full))).hexdigest()
    if stat.S_ISDIR(info.st_mode):
        return "directory"
    with open(full, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return digest + "+x" if info.st_mode & stat.S_IXUSR else digest


@dataclass(frozen=True)
class Checkout:
    """One controller-owned checkout of a component (a shared clone), always on a detached HEAD."""

    path: Path

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    @classmethod
    def create(
        cls, source: Path | str, path: Path, sha: str, *, keep_ignored: Sequence[str] = ()
    ) -> Checkout:
        """Clone ``source`` to ``path`` and check out ``sha`` detached; idempotent.

        ``source`` is a local repository (work tree, bare repo or linked worktree: cloned with
        ``--shared``); any other string is taken as a git URL and cloned fully (no alternates).
        If ``path`` already is a clone (a crash left it), nothing is fetched: it is restored to
        ``sha`` exactly (see :meth:`restore`; ``keep_ignored`` is passed on). A fresh clone is
        built in a sibling ``.<name>.partial`` directory and renamed into place, so ``path`` is
        never a half-made clone. An empty directory at ``path`` is fine; anything else that is
        not a clone raises CrucibleError (nothing is deleted). ``path`` is made absolute.
        """
        path = Path(os.path.abspath(path))
        if (path / ".git").is_dir():
            checkout = cls.open(path)
            checkout.restore(sha, keep_ignored)
            return checkout
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        if path.exists() or path.is_symlink():
            raise CrucibleError(f"cannot create a checkout at {path}: it exists and is not a git clone")
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        if partial.exists():
            shutil.rmtree(partial)
        try:
            make_clone(source, partial, sha)
            run_git(["checkout", "-q", "--detach", sha], partial)
            cls(partial)._delete_foreign_refs()
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        partial.rename(path)
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> Checkout:
        """The existing clone at ``path``; NotFoundError if there is none."""
        if not (path / ".git").is_dir():
            raise NotFoundError(f"no checkout at {path}")
        return cls(Path(os.path.abspath(path)))

    def head(self) -> str:
        """The sha HEAD points at (resolving a branch if someone attached HEAD to one)."""
        text = (self.git_dir / "HEAD").read_text().strip()
        if text.startswith("ref:"):
            return run_git(["rev-parse", "--verify", "HEAD^{commit}"], self.path)
        return text

    def head_detached(self) -> bool:
        """False when HEAD was attached to a branch (an agent checked one out)."""
        return not (self.git_dir / "HEAD").read_text().startswith("ref:")

    def status(self) -> dict[str, str]:
        """Changed paths against HEAD, path -> two-letter porcelain v1 code.

        Tracked files modified, added or deleted, and every untracked file that is not ignored
        (each file, not its directory). Renames are not detected (a move is a deletion plus an
        addition). Paths are relative to the root, "/"-separated.
        """
        return self.status_and_ignored(ignored=False)[0]

    def status_and_ignored(self, *, ignored: bool = True) -> tuple[dict[str, str], list[str]]:
        """``status()`` and, from the same walk of the tree, the ignored untracked entries: a file, or
        a directory (ending in "/") that an ignore pattern matches as a whole. One walk instead of a
        status scan plus ``git ls-files --ignored``: on a large tree each walk is most of a turn's git
        time."""
        args = ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
        if ignored:
            args.append("--ignored=matching")
        _, raw, _ = run_git_bytes([*args, "--ignore-submodules=none"], self.path)
        changes: dict[str, str] = {}
        found: list[str] = []
        for entry in raw.split(b"\0"):
            if not entry:
                continue
            code, path = entry[:2].decode("ascii"), os.fsdecode(entry[3:])
            if code == "!!":
                found.append(path)
            else:
                changes[path] = code
        return changes, found

    def digest(self, paths: Iterable[str]) -> dict[str, str | None]:
        """Content hash per relative path (see ``_file_digest``); None where nothing exists.

        Only equality between two digests of the same path is meaningful: it tells whether a
        command (the evaluator) changed a file the agent had already changed.
        """
        return {rel: _file_digest(self.path / rel) for rel in paths}

    def escaping_symlinks(self, paths: Iterable[str]) -> list[str]:
        """Those of ``paths`` that are symlinks whose target leaves the checkout: absolute, climbing out
        with ``..``, or resolving (through other links) outside it. Committed, such a link would make
        ``accept`` write a pointer to ``/etc/passwd`` or ``~/.ssh`` into the user's checkout."""
        root = self.path.resolve()
        found: list[str] = []
        for rel in paths:
            full = self.path / rel
            if not full.is_symlink():
                continue
            target = os.readlink(full)
            lexical = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            outside = os.path.isabs(target) or lexical == ".." or lexical.startswith("../")
            if outside or not Path(os.path.realpath(full)).is_relative_to(root):
                found.append(rel)
        return found

    def restore(self, sha: str, keep_ignored: Sequence[str] = ()) -> None:
        """Make the checkout exactly commit ``sha``: detached HEAD, tracked and untracked files as
        the commit has them, every ignored file removed except those matching a ``keep_ignored``
        gitignore-style pattern. Branches, tags, stashes and any other ref outside
        ``refs/crucible/`` are deleted (an agent may have created them).

        Handles files replaced by directories and back, deletions, mode changes, nested untracked
        directories and repositories, and a HEAD an agent attached to a branch or moved.
        """
        self.reset(sha)
        clean = ["clean", "-ffdxq"]
        for pattern in keep_ignored:
            clean += ["-e", pattern]
        run_git(clean, self.path)

    def reset(self, sha: str) -> None:
        """``restore`` without its ``git clean``: HEAD detached at ``sha``, the tracked files and the
        index as the commit has them, the refs outside ``refs/crucible/`` deleted; every file outside
        the commit left where it is. For a caller that lists those files anyway and removes them
        itself (``ignored.others``), which spares the clean's own walk of the tree."""
        if not self.head_detached():
            run_git(["update-ref", "--no-deref", "HEAD", sha], self.path)
        code, _, stderr = run_git_bytes(["reset", "-q", "--hard", sha], self.path, check=False)
        if code != 0:
            # An agent may have left a corrupt or locked index behind; git rebuilds it from HEAD.
            # An unknown sha is the caller's error: say so and leave the index alone.
            known, _, _ = run_git_bytes(["cat-file", "-e", f"{sha}^{{commit}}"], self.path, check=False)
            if known != 0:
                raise GitError(["reset", "-q", "--hard", sha], code, stderr)
            for leftover in ("index", "index.lock"):
                (self.git_dir / leftover).unlink(missing_ok=True)
            run_git(["reset", "-q", "--hard", sha], self.path)
        self._delete_foreign_refs()

    def commit(self, message: str, identity: Identity | None = None) -> str:
        """Commit everything (``add -A``) as ``identity`` (default COMMIT_IDENTITY) with hooks and
        signing disabled.

        Returns the new sha. Raises GitError when there is nothing to commit.
        """
        run_git(["add", "-A"], self.path)
        run_git(
            [*_COMMIT_OPTS, "commit", "-q", "--no-verify", "--cleanup=whitespace", "-F", "-"],
            self.path,
            env=_commit_env(identity),
            input=message.encode("utf-8"),
        )
        return self.head()

    def commit_paths(
        self,
        paths: Sequence[str],
        message: str,
        identity: Identity | None = None,
        *,
        tracked_only: bool = False,
    ) -> str:
        """Commit exactly ``paths`` (as ``status()`` listed them) without scanning the whole tree.

        ``add -A`` and porcelain ``commit`` each stat every file of the checkout; on a large
        repository that is most of a turn's git time. The caller already knows what changed, so
        this stages only those paths and builds the commit with plumbing (``write-tree`` reuses the
        cache-tree of everything else). Falls back to ``commit()`` when plumbing refuses a path
        (a file replaced by a directory, say). Returns the new sha.

        ``tracked_only``: the caller's status listed nothing but tracked files changed or deleted in
        the working tree (codes " M", " D", " T"), so on a small tree one ``commit -- <paths>`` does
        what ``add -A`` + ``commit`` do (there is nothing new to add), a process less per kept turn.
        """
        if self._index_entries() < PLUMBING_MIN_ENTRIES:
            if tracked_only and paths and len(paths) <= ONE_COMMIT_MAX_PATHS:
                return self._commit_tracked(paths, message, identity)
            return self.commit(message, identity)  # on a small tree two porcelain calls beat four plumbing
        listing = "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
        code, _, _ = run_git_bytes(
            ["update-index", "--add", "--remove", "-z", "--stdin"], self.path, input=listing, check=False
        )
        if code != 0:
            return self.commit(message, identity)
        tree = run_git(["write-tree"], self.path)
        parent = self.head()
        sha = run_git(
            ["commit-tree", tree, "-p", parent, "-F", "-"],
            self.path,
            env=_commit_env(identity),
            input=message.encode("utf-8"),
        )
        run_git(["update-ref", "--no-deref", "HEAD", sha, parent], self.path)
        return sha

    def _commit_tracked(self, paths: Sequence[str], message: str, identity: Identity | None) -> str:
        """``commit --only`` of tracked ``paths``, named literally (no pathspec magic in a file name)."""
        run_git(
            [
                *_COMMIT_OPTS,
                "--literal-pathspecs",
                "commit",
                "-q",
                "--no-verify",
                "--cleanup=whitespace",
                "--only",
                "-F",
                "-",
                "--",
                *paths,
            ],
            self.path,
            env=_commit_env(identity),
            input=message.encode("utf-8"),
        )
        return self.head()

    def _index_entries(self) -> int:
        """Entries in the index, from its header (bytes 8-12), without running git."""
        try:
            with open(self.git_dir / "index", "rb") as handle:
                header = handle.read(12)
        except OSError:
            return 0
        return int.from_bytes(header[8:12], "big") if len(header) == 12 else 0

    def advance(self, sha: str, keep_ignored: Sequence[str] | None = None) -> None:
        """Move a clean checkout to ``sha`` touching only the files that differ; with
        ``keep_ignored`` given, also drop ignored files except those. Cheaper than ``restore`` when
        the caller knows the checkout is clean (the champion arm after a status check)."""
        run_git(["checkout", "-q", "--detach", sha], self.path)
        if keep_ignored is not None:
            self.clean(keep_ignored)

    def clean(self, keep_ignored: Sequence[str] = ()) -> None:
        """Remove untracked and ignored files except ``keep_ignored`` (build caches a command left).

        Run on the champion arm after each turn so both arms start the next measurement alike
        (the candidate loses its caches on restore; the champion must not keep warm ones)."""
        args = ["clean", "-ffdxq"]
        for pattern in keep_ignored:
            args += ["-e", pattern]
        run_git(args, self.path)

    def set_refs(self, refs: Mapping[str, str]) -> None:
        """Point several ``refs/crucible/*`` refs at once; pack them when loose ones pile up."""
        for name in refs:
            if not name.startswith(CRUCIBLE_REF_PREFIX):
                raise ValueError(f"crucible only writes refs under {CRUCIBLE_REF_PREFIX}: {name!r}")
        # Only crucible writes refs/crucible/* in its own clone (gc is off), so loose ref files written
        # atomically are all update-ref would do here, minus a process. A loose ref wins over a packed
        # one of the same name, so writing one after ``pack-refs`` is fine.
        folders = write_loose_refs(self.git_dir, refs)
        # One ref per kept turn would make every scan of refs/ (the .git guard runs one before and
        # after each command) grow with the run: past a few dozen, they go into packed-refs, one file.
        if any(len(os.listdir(folder)) > LOOSE_REFS_MAX for folder in folders):
            run_git(["pack-refs", "--all"], self.path)

    def merge_onto(self, new_base: str, head: str) -> tuple[str | None, list[str]]:
        """Three-way merge of ``head`` onto ``new_base`` (their merge base is the old base): the tree of
        the candidate's change applied to the new base, or None and the conflicting paths.

        ``git merge-tree --write-tree`` writes only objects: no index, no working tree, no refs."""
        args = ["merge-tree", "--write-tree", "--name-only", "--no-messages", new_base, head]
        code, out, stderr = run_git_bytes(args, self.path, check=False)
        lines = out.decode("utf-8", "surrogateescape").splitlines()
        if code == 0 and lines:
            return lines[0], []
        if code == 1 and lines:
            return None, sorted({line for line in lines[1:] if line})
        raise GitError(args, code, stderr)

    def commit_tree(
        self, tree: str, parents: Sequence[str], message: str, identity: Identity | None = None
    ) -> str:
        """A commit object for ``tree`` with ``parents`` as ``identity``; HEAD is not moved."""
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        env = _commit_env(identity)
        return run_git([*args, "-F", "-"], self.path, env=env, input=message.encode("utf-8"))

    def author_name(self, sha: str) -> str:
        """The author name recorded in commit ``sha`` (as written by whoever made it)."""
        return run_git(["log", "-1", "--format=%an", sha, "--"], self.path)

    def set_ref(self, name: str, sha: str) -> None:
        """Point ``name`` (which must start with ``refs/crucible/``) at ``sha`` in the clone."""
        if not name.startswith(CRUCIBLE_REF_PREFIX):
            raise ValueError(f"crucible only writes refs under {CRUCIBLE_REF_PREFIX}: {name!r}")
        run_git(["update-ref", name, sha], self.path)

    def diff(self, base_sha: str, head: str = "HEAD") -> str:
        """Unified diff ``base_sha..head`` that ``git apply`` accepts, binary files included.

        Independent of user config (prefixes, colour, external diff, textconv, rename detection
        are fixed). Text is decoded with ``surrogateescape``; encode it the same way to apply it.
        """
        _, raw, _ = run_git_bytes(["diff", *_DIFF_OPTS, base_sha, head, "--"], self.path)
        return raw.decode("utf-8", "surrogateescape")

    def changed_files(self, base_sha: str, head: str = "HEAD") -> list[str]:
        """Paths that differ between ``base_sha`` and ``head`` (a move lists both paths), sorted."""
        args = ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", base_sha, head, "--"]
        _, raw, _ = run_git_bytes(args, self.path)
        return sorted(_split_z(raw))

    def sandbox_readonly_paths(self) -> list[Path]:
        """Paths a sandbox must bind read-only for git to work in this checkout.

        The clone's own ``.git`` (so sandboxed commands can read history and ``git diff`` but cannot
        rewrite refs, config or hooks that crucible's git commands later run outside the sandbox),
        and every objects directory reached through alternates (the user's repository, which may
        live under a masked ``$HOME`` or ``/tmp``). Bind these after the writable checkout.
        """
        paths = [self.git_dir]
        pending = [self.git_dir / "objects"]
        seen: set[Path] = set()
        while pending:
            info = pending.pop() / "info" / "alternates"
            if not info.is_file():
                continue
            for line in info.read_text().splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                target = Path(os.path.normpath(info.parent.parent / line))
                if target not in seen:
                    seen.add(target)
                    paths.append(target)
                    pending.append(target)
        return paths

    def remove(self) -> None:
        """Delete the clone (and a leftover ``.partial`` sibling); nothing else is touched."""
        if self.path.exists():
            shutil.rmtree(self.path)
        partial = self.path.with_name(f".{self.path.name}.partial")
        if partial.exists():
            shutil.rmtree(partial)

    def _may_have_foreign_refs(self) -> bool:
        """Cheap pre-check without a subprocess: any loose ref outside refs/crucible/ (a branch, a tag,
        a stash), or any packed ref outside it (read from packed-refs, which a clone always has),
        means ``for-each-ref`` must look."""
        try:
            packed = (self.git_dir / "packed-refs").read_bytes()
        except FileNotFoundError:
            packed = b""
        except OSError:
            return True
        for line in packed.splitlines():
            if line[:1] in (b"#", b"^"):
                continue
            _sha, _, name = line.partition(b" ")
            if not name.startswith(CRUCIBLE_REF_PREFIX.encode()):
                return True
        refs = self.git_dir / "refs"
        for entry in refs.iterdir() if refs.is_dir() else ():
            if entry.name == "crucible":
                continue
            if entry.is_file() or any(True for _ in entry.rglob("*") if _.is_file()):
                return True
        return False

    def _delete_foreign_refs(self) -> None:
        if not self._may_have_foreign_refs():
            return
        refs = run_git(["for-each-ref", "--format=%(refname)"], self.path).splitlines()
        foreign = [ref for ref in refs if not ref.startswith(CRUCIBLE_REF_PREFIX)]
        if foreign:
            script = "".join(f"delete {ref}\n" for ref in foreign)
            run_git(["update-ref", "--no-deref", "--stdin"], self.path, input=script.encode())
