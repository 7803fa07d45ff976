"""The repository a checkout starts as (``Checkout.create``): the user's objects borrowed, no refs.

A local work tree or bare repository is lent without ``git clone``: an empty repository whose
``objects/info/alternates`` names the source's object directory, which is what ``git clone --shared``
writes, in one git command instead of four (a served run makes one for each arm as it starts). A linked
worktree or a shallow repository is cloned with ``--shared``, a URL cloned fully; either way the remote
is removed, so no URL (with credentials, maybe) stays where sandboxed commands can read it.

No template: crucible's git never runs hooks (``core.hooksPath`` is pinned), and a template's dozen
sample hooks, ``info/exclude`` and maybe ``config`` would be files the ``.git`` guard scans before and
after every command (a third of the entries: ``gitguard``), and settings of the user's
``init.templateDir`` that no repository of the run asked for.
"""

from __future__ import annotations

from pathlib import Path

from controller.workspace.git import run_git

# Config written into every clone: no surprise `gc --auto` pauses during a measured turn, and
# hooks never run in the clone, whoever commits there.
_CLONE_CONFIG = ("gc.auto=0", "core.hooksPath=/dev/null")


def make_clone(source: Path | str, path: Path, sha: str) -> None:
    """A repository at ``path`` (which must not exist; its parent must) holding no refs and no work
    tree yet, that can read ``sha`` of ``source``: a local repository's objects borrowed, a URL's
    fetched."""
    local = Path(source).is_dir()
    borrowed = _object_store(Path(source)) if local else None
    if borrowed is not None:
        _init_shared(path, borrowed, sha)
        return
    args = ["clone", "-q", "--no-checkout", "--no-tags", "--template="]
    if local:
        args.append("--shared")
    for setting in _CLONE_CONFIG:
        args += ["-c", setting]
    src = str(Path(source).resolve()) if local else str(source)
    run_git([*args, "--", src, str(path)], path.parent)
    run_git(["remote", "remove", "origin"], path)


def _object_store(source: Path) -> Path | None:
    """The object directory a shared clone of the local repository ``source`` borrows, when crucible
    can lend it without ``git clone``: a work tree's ``.git/objects`` or a bare repository's
    ``objects``. None for anything else (a linked worktree, a shallow repository): git clones it."""
    dot_git = source / ".git"
    git_dir = dot_git if dot_git.exists() else source
    objects = git_dir / "objects"
    if not (objects.is_dir() and (git_dir / "HEAD").is_file() and (git_dir / "refs").is_dir()):
        return None
    if (git_dir / "shallow").exists():
        return None
    return objects.resolve()


def _init_shared(path: Path, objects: Path, sha: str) -> None:
    """What ``git clone --shared --no-checkout`` followed by removing its remote and its branch
    leaves, in one git command instead of four (a served run makes a clone for each arm as it
    starts): an empty repository whose ``objects/info/alternates`` borrows ``objects`` (exactly
    the line ``--shared`` writes), with the clone's settings (``_CLONE_CONFIG``) and no refs."""
    args = ["init", "-q", "--template="]
    if len(sha) == 64:  # the source's objects are SHA-256: the borrower must read them as such
        args.append("--object-format=sha256")
    run_git([*args, str(path)], path.parent)
    info = path / ".git" / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(f"{objects}\n")
    with (path / ".git" / "config").open("a") as config:
        for setting in _CLONE_CONFIG:  # "section.key=value", as ``git clone -c`` writes it
            name, _, value = setting.partition("=")
            section, _, key = name.partition(".")
            config.write(f"[{section}]\n\t{key} = {value}\n")
