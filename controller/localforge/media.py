"""GitHub's custom media types for bodies: which of ``body``, ``body_text`` and ``body_html`` an
answer carries, chosen by the request's ``Accept`` header.

GitHub renders the Markdown ``body`` of pull requests, issues, reviews and comments on request:
``application/vnd.github[.v3].raw+json`` (the default) gives ``body``; ``.text+json`` gives
``body_text``; ``.html+json`` gives ``body_html``; ``.full+json`` gives all three. Clients depend
on it (github3.py asks for ``full`` and reads ``body_html`` unconditionally). ``body`` stays where
GitHub's description requires it (pull requests, reviews, review comments) and is left out only
for issues and issue comments, whose description leaves it optional.

Rendering is CommonMark with GitHub's tables and strikethrough (``markdown-it-py``); raw HTML in
a body is escaped, never passed through. ``body_text`` is the rendered HTML's text content.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum
from html.parser import HTMLParser
from typing import Any

from markdown_it import MarkdownIt
from starlette.responses import Response

Json = dict[str, Any]

_MEDIA = re.compile(r"application/vnd\.github(?:[.-][a-z0-9-]+)?(?:\.v3)?\.(raw|text|html|full)(?:\+json)?$")


# Media types that ask for git's text rather than JSON (pull requests and commits).
DIFF_TYPES = ("application/vnd.github.diff", "application/vnd.github.v3.diff")
PATCH_TYPES = ("application/vnd.github.patch", "application/vnd.github.v3.patch")


class BodyFormat(StrEnum):
    """One of GitHub's body media types."""

    RAW = "raw"
    TEXT = "text"
    HTML = "html"
    FULL = "full"


def body_format(accept: str | None) -> BodyFormat:
    """The body media type named in ``Accept`` (``raw`` when none is)."""
    for part in (accept or "").split(","):
        kind = part.split(";", 1)[0].strip().lower()
        match = _MEDIA.match(kind)
        if match:
            return BodyFormat(match.group(1))
    return BodyFormat.RAW


@functools.cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


@dataclass(frozen=True)
class Rendered:
    """A Markdown body as GitHub shows it: ``html``, and ``text`` (the HTML's text, blank runs collapsed)."""

    html: str
    text: str


def _render(markdown: str) -> Rendered:
    html: str = _markdown().render(markdown)
    parser = _Text()
    parser.feed(html)
    parser.close()
    return Rendered(html, re.sub(r"\n{2,}", "\n", "".join(parser.parts)).strip())


_cached = functools.lru_cache(maxsize=1024)(_render)
CACHED_SIZE = 16 * 1024  # longer bodies are rendered every time rather than pinned in memory


def render(markdown: str) -> Rendered:
    """Rendering costs milliseconds a body and clients re-read the same comments, so short bodies
    are remembered (``bench/forge_compat.py`` measures both)."""
    return _cached(markdown) if len(markdown) <= CACHED_SIZE else _render(markdown)


def clear_cache() -> None:
    _cached.cache_clear()


def to_html(markdown: str) -> str:
    return render(markdown).html


def to_text(markdown: str) -> str:
    return render(markdown).text


def with_bodies(item: Json, fmt: BodyFormat, *, body_required: bool) -> Json:
    """``item`` with the body members ``fmt`` asks for (``item`` itself when it has no ``body``)."""
    if fmt is BodyFormat.RAW or "body" not in item:
        return item
    out = dict(item)
    body = item["body"]
    shown = render(body) if body else None
    if fmt in {BodyFormat.TEXT, BodyFormat.FULL}:
        out["body_text"] = shown.text if shown else body
    if fmt in {BodyFormat.HTML, BodyFormat.FULL}:
        out["body_html"] = shown.html if shown else body
    if fmt is not BodyFormat.FULL and not body_required:
        del out["body"]
    return out


def text_answer(text: str, media_type: str, status_code: int = 200) -> Response:
    """A text answer whose ``Content-Type`` says ``charset=utf-8``, as GitHub's do. Starlette adds the
    charset only to ``text/*``; without it Octokit hands a diff back as bytes, not as a string."""
    return Response(text.encode(), status_code=status_code, media_type=f"{media_type}; charset=utf-8")
