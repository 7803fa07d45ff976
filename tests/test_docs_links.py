"""Every relative link in the user docs leads somewhere: to a tracked file and, with ``#anchor``, to one of
its headings (as GitHub names them). A renamed page or heading otherwise leaves dead links that only a
reader finds."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_self_contained import ROOT, tracked_files

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to ``-``."""
    out = set()
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def headings(name: str) -> set[str]:
    return anchors((ROOT / name).read_text(encoding="utf-8"))


def dead_links(name: str, text: str, exists: set[str]) -> list[str]:
    problems = []
    for match in LINK.finditer(text):
        link = match.group(1)
        if re.match(r"[a-z]+:", link):  # https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        normal = normalised((Path(name).parent / path).as_posix() if path else name)
        if normal not in exists and not any(f.startswith(normal.rstrip("/") + "/") for f in exists):
            problems.append(f"{name}: {link}: no such file")
        elif anchor and normal in exists and normal.endswith(".md") and anchor not in headings(normal):
            problems.append(f"{name}: {link}: no such heading")
    return problems


def normalised(path: str) -> str:
    """``docs/../adr/x.md`` -> ``adr/x.md``, without touching the file system."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            else:
                parts.append(part)
        else:
            parts.append(part)
    return "/".join(parts)


def test_no_dead_links_in_the_docs() -> None:
    files = set(tracked_files())
    pages = sorted(f for f in files if f.endswith(".md") and (f.startswith("docs/") or "/" not in f))
    problems = []
    for name in pages:
        problems += dead_links(name, (ROOT / name).read_text(encoding="utf-8"), files)
    assert not problems, "\n".join(problems)


def test_dead_links_are_found() -> None:
    files = {"docs/spec.md", "docs/README.md", "adr/0001-x.md"}
    assert dead_links("docs/README.md", "[a](gone.md)", files) == ["docs/README.md: gone.md: no such file"]
    assert not dead_links("docs/README.md", "[a](spec.md) [b](../adr/) [c](https://x.org/y)", files)
    spec = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    assert "agentknob" in anchors(spec) and "no-such-heading" not in anchors(spec)
