"""The path policy: which changed files a turn may leave behind (docs/agent.md).

After the agent runs, the turn's changed paths are checked before anything is measured:
"outside ``mutable`` nothing may change; inside it, ``protected`` paths and any file named in
the metric or validation command may not change either". A change to the evaluator would let
a candidate improve its score by editing the ruler, so the evaluator is protected implicitly,
without the user listing it.

Globs are gitignore-style (pathspec's ``GitIgnoreSpec``): ``src/**``, ``*.md`` (any depth, as in
.gitignore, because it has no slash), ``/bench.py`` (top level only), ``src/`` (everything under
the directory ``src``). Negation (``!``) is not a documented feature of the spec. Paths are
relative to one component's root and use ``/``.

The module is pure apart from ``evaluator_paths``, which looks at the file system to tell
which command words name existing files.
"""

from __future__ import annotations

import functools
import os
import posixpath
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

OUTSIDE_MUTABLE = "outside mutable"
PROTECTED = "protected"
EVALUATOR = "evaluator file"
OUTSIDE_REPOSITORY = "outside the repository"


@dataclass(frozen=True)
class PolicyVerdict:
    """Whether a set of changed paths is allowed.

    ``violations`` are human lines, one per offending path, sorted: ``"src/x.py: protected"``,
    ``"README.md: outside mutable"``, ``"bench.py: evaluator file"``. ``evaluator`` lists the
    offending paths that are evaluator files, so the caller can name them.
    """

    ok: bool
    violations: tuple[str, ...]
    evaluator: tuple[str, ...] = ()


@functools.lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """``patterns`` compiled, once per list: a served turn checked its paths against the same spec's
    lists every turn, and compiling them cost more than matching (ADR-0053). A compiled spec is only
    read (``match_file``), so threads share it."""
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def check_paths(
    changed: Iterable[str],
    *,
    mutable: Sequence[str],
    protected: Sequence[str],
    evaluator_paths: Iterable[str] = (),
) -> PolicyVerdict:
    """Allow a path iff it matches ``mutable`` and neither matches ``protected`` nor is an evaluator file.

    Each offending path gets one violation, the first that applies of: outside the repository
    (absolute, or climbing out with ``..``), outside mutable, evaluator file, protected.
    """
    mutable_spec = _spec(tuple(mutable))
    protected_spec = _spec(tuple(protected))
    evaluator = {_normalise(path) for path in evaluator_paths if path}
    violations: list[str] = []
    evaluator_hits: list[str] = []
    for path in sorted({_normalise(path) for path in changed if path}):
        problem = _problem(path, mutable_spec, protected_spec, evaluator)
        if problem is not None:
            violations.append(f"{path}: {problem}")
        if problem == EVALUATOR:
            evaluator_hits.append(path)
    return PolicyVerdict(not violations, tuple(violations), tuple(evaluator_hits))


def _problem(
    path: str,
    mutable: pathspec.GitIgnoreSpec,
    protected: pathspec.GitIgnoreSpec,
    evaluator: set[str],
) -> str | None:
    if path.startswith("/") or path == ".." or path.startswith("../"):
        return OUTSIDE_REPOSITORY
    if not mutable.match_file(path):
        return OUTSIDE_MUTABLE
    if path in evaluator:
        return EVALUATOR
    if protected.match_file(path):
        return PROTECTED
    return None


def _normalise(path: str) -> str:
    """``./src//a.py`` -> ``src/a.py``; keeps a leading ``/`` or ``..`` so they can be refused."""
    return posixpath.normpath(path)


def evaluator_paths(commands: Iterable[str], root: Path) -> set[str]:
    """Files inside ``root`` that the metric or validation commands name.

    Each command is split like a shell would (``shlex``); a word counts, as does the part after
    ``=`` in ``--opt=value`` or ``VAR=value`` words, when it is an existing file inside ``root``
    (relative words are taken relative to ``root``). A symlink counts both as itself and as its
    target when the target is inside ``root``. Returned relative to ``root``, with ``/``.
    Files reached only indirectly (``python -m pkg``, ``cd sub && ...``) are not found.
    """
    base = root.resolve()
    found: set[str] = set()
    for command in commands:
        for word in _words(command):
            found.update(_files_named(word, base))
    return found


def _words(command: str) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: still look at what is there
        words = command.split()
    expanded: list[str] = []
    for word in words:
        expanded.append(word)
        if "=" in word:
            expanded.append(word.split("=", 1)[1])
    return [word for word in expanded if word]


def _files_named(word: str, base: Path) -> set[str]:
    lexical = Path(os.path.normpath(base / word))
    if not lexical.is_file():
        return set()
    names = set()
    for candidate in (lexical, lexical.resolve()):
        if candidate.is_relative_to(base):
            names.add(candidate.relative_to(base).as_posix())
    return names
