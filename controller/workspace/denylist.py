"""The credentials no sandboxed command may read, whatever the sandbox binds (docs/security.md).

The sandbox hides the home directories wholesale and then binds back, read-only, what commands need:
toolchain roots, programs, ``sandbox.readonly`` entries. A bind can hold a credential (``~/.cargo``
holds ``credentials.toml``; an npm prefix holds ``etc/npmrc``), and a command may name one on purpose
(``cat ~/.ssh/id_ed25519``). This module is the list that wins over every bind: each denied path that
exists inside a bound directory is masked again (an empty tmpfs for a directory, ``/dev/null`` for a
file), a path the command needs that lies inside a denied one is never bound, and a ``sandbox.readonly``
entry that covers one is refused.

The list is relative to each home directory crucible knows of: ``$HOME`` and the passwd entry's, which
differ when ``HOME`` is unset or points elsewhere (a service account, ``sudo -E``, a test).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# Relative to each home. Directories are masked whole; the agents' state directories are among them:
# an agent run by crucible writes its state under the sandbox's own empty $HOME and needs nothing here.
DENIED_IN_HOME: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".oci",
    ".config/doctl",
    ".config/hcloud",
    ".kube",
    ".docker",
    ".config/containers/auth.json",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pypirc",
    ".config/pip",
    ".pip",
    ".condarc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".terraform.d",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".config/rclone",
    ".config/op",
    ".local/share/keyrings",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".cache/huggingface/stored_tokens",
    ".claude",
    ".claude.json",
    ".claude.json.backup",
    ".codex",
    ".gemini",
    ".qwen",
    ".aider.conf.yml",
    ".env",
    ".config/openai",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
)

# Relative to every directory bound because a toolchain lives there (a node prefix's global npmrc, a
# conda installation's .condarc with channel tokens): checked by name, never by walking the tree.
DENIED_IN_ROOT: tuple[str, ...] = (
    ".npmrc",
    "etc/npmrc",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".condarc",
    "credentials",
    "credentials.toml",
)


def passwd_home() -> Path | None:
    """The home directory of the passwd entry of this process's user, if it has one."""
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None


def home_dirs(environ: Mapping[str, str]) -> list[Path]:
    """The home directories to hide and deny in: ``$HOME`` (when set) and the passwd one, resolved,
    without duplicates and without ``/`` (a home of ``/`` would hide the whole system)."""
    found: list[Path] = []
    for raw in (environ.get("HOME"), passwd_home()):
        if not raw:
            continue
        path = Path(os.path.realpath(raw))
        if path != Path("/") and path not in found:
            found.append(path)
    return found


def denied_paths(homes: Iterable[Path]) -> list[Path]:
    """Every path of the deny list, for each home (existing or not)."""
    return [home / rel for home in homes for rel in DENIED_IN_HOME]


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def denied_cover(path: Path, denied: Sequence[Path]) -> Path | None:
    """The denied path that ``path`` equals, lies inside or contains, else None."""
    for entry in denied:
        if _inside(path, entry) or _inside(entry, path):
            return entry
    return None


def withheld(path: Path, denied: Sequence[Path]) -> bool:
    """Whether ``path`` lies inside (or is) a denied path: it is never bound."""
    return any(_inside(path, entry) for entry in denied)


def masks_inside(binds: Iterable[Path], denied: Sequence[Path], roots: Iterable[Path] = ()) -> list[Path]:
    """The existing denied paths strictly inside one of ``binds``, plus the existing DENIED_IN_ROOT
    entries of each of ``roots``: what the sandbox masks again after binding, sorted."""
    bound = list(binds)
    found = {entry for entry in denied for bind in bound if entry != bind and entry.is_relative_to(bind)}
    found.update(root / rel for root in roots for rel in DENIED_IN_ROOT)
    return sorted(p for p in found if p.exists() or p.is_symlink())


def readonly_problem(entry: str, path: Path, denied: Sequence[Path]) -> str | None:
    """Why a ``sandbox.readonly`` entry (``entry`` as written, ``path`` expanded) is refused, else None:
    it does not exist, or it (or what it links to) equals, contains or lies inside a denied path."""
    if not path.exists():
        return f"{entry!r} does not exist"
    present = [entry for entry in denied if entry.exists() or entry.is_symlink()]
    for candidate in (Path(os.path.normpath(path)), Path(os.path.realpath(path))):
        # Refused whether or not a credential is there yet; named by one that is, when there is one.
        cover = denied_cover(candidate, present) or denied_cover(candidate, denied)
        if cover is not None:
            return f"{entry!r} covers {cover}, which the sandbox keeps hidden (credentials)"
    return None
