"""Syntax colouring of the pristine-relative diffs, on the server, as CSS classes.

A diff is split per file (its ``+++ b/path`` line names the language, through Pygments' lexer for
that file name); the added, removed and context lines of a file are tokenised together in one pass
and cut into (css class, text) pieces per line that the template escapes like any other text, so a
file full of ``<script>`` stays text and the CSP needs no exception (the classes are styled by the shipped
``dashboard.css``). Old and new lines lexed as one text can confuse a multi-line string or comment,
which costs a wrong colour at worst, never a wrong character. Very large diffs are shown uncoloured.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

from markupsafe import Markup, escape
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


def _lines(lexer: Lexer | None, codes: list[str]) -> list[tuple[tuple[str, str], ...]]:
    """Each code line as (css class, text) pieces: the lines of one file are tokenised together in
    one pass (a call per line costs the lexer's setup each time), then cut at the newlines again."""
    if lexer is None:
        return [(("", code),) for code in codes]
    out: list[list[tuple[str, str]]] = [[]]
    for token, text in lexer.get_tokens("\n".join(codes) + "\n"):
        css = _css(token)
        for n, part in enumerate(text.split("\n")):
            if n:
                out.append([])
            line = out[-1]
            if not part:
                continue
            if line and line[-1][0] == css:
                line[-1] = (css, line[-1][1] + part)
            else:
                line.append((css, part))
    kept = out[: len(codes)]
    if len(kept) < len(codes) or any("".join(t for _, t in p) != c for p, c in zip(kept, codes, strict=True)):
        return [(("", code),) for code in codes]  # a lexer that changed the text: show it plain
    return [tuple(line) or (("", ""),) for line in kept]


def _kind(line: str) -> str:
    if line.startswith(("+++", "---", "diff --git", "index ", "new file", "deleted file", "similarity")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


@lru_cache(maxsize=32)
def diff_lines(diff: str) -> tuple[DiffLine, ...]:
    """A unified diff (possibly of many files) as coloured lines (cached: a run page shows the same
    diff until the champion changes)."""
    lines = diff.splitlines()
    colour = len(lines) <= MAX_LINES
    kinds = [_kind(line) for line in lines]
    pieces: dict[int, tuple[tuple[str, str], ...]] = {}
    lexer: Lexer | None = None
    code: list[int] = []  # the current file's code lines (all its hunks), lexed together

    def flush() -> None:
        for n, found in zip(code, _lines(lexer, [lines[n][1:] for n in code]), strict=True):
            pieces[n] = found
        code.clear()

    for n, (line, kind) in enumerate(zip(lines, kinds, strict=True)):
        if kind not in ("meta", "hunk"):
            code.append(n)
        elif line.startswith(("diff --git", "+++ ")):
            flush()
            target = line[4:].removeprefix("b/") if line.startswith("+++ ") else "/dev/null"
            lexer = lexer_for(target) if colour and target != "/dev/null" else None
    flush()
    return tuple(
        DiffLine(kind, line, ()) if kind in ("meta", "hunk") else DiffLine(kind, line[:1], pieces[n])
        for n, (line, kind) in enumerate(zip(lines, kinds, strict=True))
    )


def _span(css: str, text: str) -> str:
    return f'<span class="{css}">{escape(text)}</span>' if css else str(escape(text))


@lru_cache(maxsize=32)
def diff_html(diff: str) -> Markup:
    """The coloured diff as the inside of a ``<pre>``: one ``<span class="KIND">`` per line holding
    its escaped text, the code's tokens in ``<span class="tk-…">``. Built here once per diff (and
    cached) rather than in the template: a template loop over thousands of pieces cost more than
    the rest of the run page."""
    out = []
    for line in diff_lines(diff):
        inner = str(escape(line.prefix)) + "".join(_span(css, text) for css, text in line.pieces)
        out.append(f'<span class="{line.kind}">{inner}</span>\n')
    return Markup("".join(out))
