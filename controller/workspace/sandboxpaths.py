"""What a sandboxed command needs to start, so the sandbox can show it read-only (issue 13).

The sandbox puts an empty tmpfs on ``/tmp``, ``/run`` and ``$HOME``. A program, an interpreter or a
virtual environment that lives there (a throwaway clone under ``/tmp``, a CI runner's tool cache,
``pipx`` under ``~/.local``) vanished inside it, and every turn failed with ``execvp: No such file``.
This module reads a command the way a shell would find its programs: each word that names a program
is looked up on ``PATH``, each absolute path is taken as it is; for each program it adds the file
after symlinks, the ``#!`` interpreter of a script (``/usr/bin/env NAME`` looked up too), and the
virtual environment the program belongs to (the directory holding ``pyvenv.cfg``, and the base
interpreter's ``home`` it names). The sandbox binds those paths read-only and nothing else of the
masked directories, so the private ``/tmp`` stays empty otherwise.

It also explains a command that could not start inside the sandbox (exit 126/127): which path it
was missing, and whether that path exists outside the sandbox.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

_SHEBANG_MAX = 256
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "!", "{", "}", "then", "do", "else"})
_SHELL_PREFIX = r"^(?:\S*sh: )?(?:\d+: |line \d+: )?"  # "sh: 1: ", "bash: line 1: "
_NOT_FOUND = (
    re.compile(r"execvp (\S+): No such file"),
    re.compile(r"can't open file '([^']+)'"),
    re.compile(_SHELL_PREFIX + r"(\S+): (?:command )?not found", re.M),
    re.compile(_SHELL_PREFIX + r"(\S+): (?:No such file or directory|cannot execute)", re.M),
    # A script the command ran could not exec what it names ("…/shims/python3: line 12: ~/.pyenv/
    # libexec/pyenv: No such file or directory"): the path right before the error.
    re.compile(r"(?:^|: )([^\s:]+): (?:No such file or directory|cannot execute|Permission denied)", re.M),
)
WHERE = "inside the sandbox (bubblewrap, sandbox.mode)"
FIX = "add it, or the directory of the toolchain that holds it, to sandbox.readonly"


def _words(command: str) -> list[str]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # unbalanced quotes: still look at what is there
        return command.split()


def _shell_script(argv: Sequence[str]) -> str | None:
    """The script of ``sh -c SCRIPT …`` (how the executor runs every command), else None."""
    if len(argv) >= 3 and argv[0] in _SHELLS and argv[1] == "-c":
        return argv[2]
    return None


def command_words(argv: Sequence[str]) -> list[str]:
    """The words of a command that may name what it runs: the argv, or the words of ``sh -c SCRIPT``
    with ``VAR=value`` and ``--opt=value`` values split off."""
    script = _shell_script(argv)
    words = _words(script) if script is not None else list(argv)
    out: list[str] = []
    for word in words:
        if word in _SEPARATORS or not word:
            continue
        out.append(word)
        if "=" in word:
            out.append(word.split("=", 1)[1])
    return out


def program_words(command: str) -> list[str]:
    """The words of a shell command that name programs: the first word of each simple command, after
    ``VAR=value`` assignments (``FOO=1 python bench.py | tee log`` -> ``python``, ``tee``)."""
    programs: list[str] = []
    expect = True
    for word in _words(command):
        if word in _SEPARATORS:
            expect = True
        elif expect and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            continue
        elif expect:
            programs.append(word)
            expect = False
    return programs


def script_interpreters(program: Path, search_path: str) -> list[Path]:
    """The ``#!`` interpreter of a script (and what ``/usr/bin/env NAME`` finds), else []."""
    try:
        with open(program, "rb") as handle:
            head = handle.read(_SHEBANG_MAX)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    parts = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not parts:
        return []
    found = [Path(parts[0])]
    if Path(parts[0]).name == "env":
        names = [p for p in parts[1:] if not p.startswith("-") and "=" not in p]
        if names and (hit := shutil.which(names[0], path=search_path)) is not None:
            found.append(Path(hit))
    return found


def _virtualenv(program: Path) -> list[Path]:
    """The virtual environment ``program`` belongs to (``…/bin/prog`` beside ``pyvenv.cfg``) and the
    base interpreter's home it names, else []."""
    root = program.parent.parent
    config = root / "pyvenv.cfg"
    if not config.is_file():
        return []
    found = [root]
    for line in config.read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and os.path.isabs(value.strip()):
            found.append(Path(value.strip()))
    return found


def needed_paths(argv: Sequence[str], search_path: str | None = None) -> list[Path]:
    """Absolute paths ``argv`` needs to start (see the module docstring), existing ones only, sorted."""
    search = os.defpath if search_path is None else search_path  # no PATH: what exec searches
    pending: list[Path] = []
    for word in command_words(argv):
        if os.path.isabs(word):
            pending.append(Path(word))
        elif "/" not in word and not word.startswith("-") and (hit := shutil.which(word, path=search)):
            pending.append(Path(hit))
    seen: set[Path] = set()
    while pending:
        path = Path(os.path.normpath(pending.pop()))
        if path in seen or not (path.exists() or path.is_symlink()):
            continue
        seen.add(path)
        if path.is_symlink():  # each hop: the sandbox recreates the link, which must lead somewhere
            pending.append(path.parent / os.readlink(path))
        if path.is_file():
            real = Path(os.path.realpath(path))
            pending += [real, *script_interpreters(real, search), *_virtualenv(path), *_virtualenv(real)]
    return sorted(seen)


def under(paths: Iterable[Path], roots: Iterable[Path]) -> list[Path]:
    """Those of ``paths`` strictly inside one of ``roots`` (the masked directories; a root itself is
    never exposed: ``TMPDIR=/tmp`` in a command must not unmask ``/tmp``), without paths already
    inside another listed path."""
    masked = [Path(os.path.normpath(r)) for r in roots]
    inside = sorted({p for p in paths if any(p != r and p.is_relative_to(r) for r in masked)})
    return [p for p in inside if not any(p != q and p.is_relative_to(q) for q in inside)]


HIDDEN = "exists outside but"  # how every sentence of hidden_problem says "the sandbox hides it"


def sandbox_hides(problem: str | None) -> bool:
    """Whether a ``start_problem`` sentence blames the sandbox (the path exists outside it): the same
    command then fails the same way every turn, whatever the agent does."""
    return problem is not None and f" {HIDDEN} " in problem


def hidden_problem(path: str | Path, *, denied: bool = False) -> str:
    """The sentence for a path that exists outside the sandbox but not inside, with the fix."""
    if denied:
        return f"{path} {HIDDEN} stays hidden {WHERE}: it is on the sandbox's deny list of credentials"
    return f"{path} {HIDDEN} is not visible {WHERE}; {FIX}"


def start_problem(stderr: str, search_path: str | None = None, denied: Sequence[Path] = ()) -> str | None:
    """Why a command exiting 126/127 inside the sandbox could not start, from its stderr: the missing
    path, whether it exists outside the sandbox, and what to do. None when stderr names nothing.
    ``denied``: the deny list, to say when the path is hidden on purpose."""
    search = os.defpath if search_path is None else search_path  # no PATH: what exec searches
    for pattern in _NOT_FOUND:
        match = pattern.search(stderr)
        if match is None:
            continue
        name = match.group(1).rstrip(":")
        host = name if os.path.isabs(name) else shutil.which(name, path=search)
        if host is not None and os.path.exists(host):
            path = Path(os.path.normpath(host))
            return hidden_problem(host, denied=any(path == d or path.is_relative_to(d) for d in denied))
        return f"{name} is missing {WHERE} and outside it"
    return None
