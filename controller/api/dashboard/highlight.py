"""Syntax colouring of the pristine-relative diffs, on the server, as CSS classes.

A diff is split per file (its ``+++ b/path`` line names the language, through Pygments' lexer for
that file name); each added, removed or context line is tokenised on its own and returned as
(css class, text) pieces that the template escapes like any other text, so a hypothesis or a file
full of ``<script>`` stays text and the CSP needs no exception (the classes are styled by the shipped
``dashboard.css``). Line by line loses the context of a multi-line string or comment, which costs a
wrong colour at worst, never a wrong character. Very large diffs are shown uncoloured.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.token import Comment, Keyword, Name, Number, String, _TokenType
from pygments.util import ClassNotFound

MAX_LINES = 5000  # beyond this a diff is shown with its +/- colours only
CLASSES: tuple[tuple[_TokenType, str], ...] = (
    (Comment, "tk-c"),
    (String, "tk-s"),
    (Number, "tk-m"),
    (Keyword, "tk-k"),
    (Name.Function, "tk-f"),
    (Name.Class, "tk-f"),
    (Name.Builtin, "tk-b"),
    (Name.Decorator, "tk-b"),
)


@dataclass(frozen=True)
class DiffLine:
    kind: str  # meta | hunk | add | del | ctx
    prefix: str  # the diff's own first character ("+", "-", " "), or the whole line for meta/hunk
    pieces: tuple[tuple[str, str], ...]  # (css class or "", text) of the code after the prefix


@lru_cache(maxsize=128)
def _lexer(suffix: str, name: str) -> Lexer | None:
    try:
        return get_lexer_for_filename(name or f"x{suffix}", stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def lexer_for(path: str) -> Lexer | None:
    """The lexer for a file name (by suffix, or the whole name for ``Makefile`` and the like)."""
    pure = PurePosixPath(path)
    return _lexer(pure.suffix, "" if pure.suffix else pure.name)


@lru_cache(maxsize=64)
def _css(token: _TokenType) -> str:
    ancestry = token.split()  # Token, Token.Name, Token.Name.Function
    for kind, css in CLASSES:
        if kind in ancestry:
            return css
    return ""


def pieces(lexer: Lexer | None, code: str) -> tuple[tuple[str, str], ...]:
    """``code`` as (css class, text) pieces, adjacent pieces of one class merged."""
    if lexer is None or not code:
        return (("", code),)
    out: list[tuple[str, str]] = []
    for token, text in lexer.get_tokens(code):
        css = _css(token)
        if out and out[-1][0] == css:
            out[-1] = (css, out[-1][1] + text)
        else:
            out.append((css, text))
    return tuple(out)


def _kind(line: str) -> str:
    if line.startswith(("+++", "---", "diff --git", "index ", "new file", "deleted file", "similarity")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


def diff_lines(diff: str) -> list[DiffLine]:
    """A unified diff (possibly of many files) as coloured lines."""
    lines = diff.splitlines()
    colour = len(lines) <= MAX_LINES
    lexer: Lexer | None = None
    out = []
    for line in lines:
        kind = _kind(line)
        if kind in ("meta", "hunk"):
            if line.startswith("+++ "):
                target = line[4:].removeprefix("b/")
                lexer = lexer_for(target) if colour and target != "/dev/null" else None
            elif line.startswith("diff --git"):
                lexer = None
            out.append(DiffLine(kind, line, ()))
            continue
        code = line[1:]
        out.append(DiffLine(kind, line[:1], pieces(lexer, code)))
    return out
