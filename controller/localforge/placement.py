"""Where an inline comment sits on a pull request's diff, found as GitHub finds it.

A comment names ``path`` and ``line`` (with ``side`` LEFT/RIGHT) or the legacy ``position``; the
line is looked up in the three-dot diff of the commented commit, giving GitHub's ``position`` (lines
below the file's first hunk header) and ``diff_hunk`` (hunk header through the commented line). A
line outside the diff is a 422, as on GitHub.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.localforge import gitops
from controller.localforge.errors import Invalid, invalid_custom

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class Placement:
    """Where a comment sits in the diff."""

    position: int | None
    line: int | None
    side: str
    diff_hunk: str


def locate(
    patch: str, *, line: int | None = None, side: str = "RIGHT", position: int | None = None
) -> Placement | None:
    """Find ``line`` on ``side`` (or the legacy ``position``) in one file's patch."""
    lines = patch.split("\n")
    old = new = 0
    hunk_start = 0
    for index, text in enumerate(lines):
        header = _HUNK.match(text)
        if header:
            old, new, hunk_start = int(header.group(1)), int(header.group(2)), index
            continue
        kind = text[:1] or "?"
        here = {"-": (old, None), "+": (None, new), " ": (old, new)}.get(kind, (None, None))
        hit_side = "LEFT" if kind == "-" else "RIGHT"
        if position is not None:
            hit = index == position and kind in "-+ "
            found = (here[0] if kind == "-" else here[1], hit_side)
        else:
            number = here[0] if side == "LEFT" else here[1]
            hit = number is not None and number == line
            found = (line, side)
        if hit:
            return Placement(index, found[0], found[1], "\n".join(lines[hunk_start : index + 1]))
        old += kind in "- "
        new += kind in "+ "
    return None


def place(path: Path, base_sha: str, commit_id: str, spec: Any) -> Placement:
    """Where the comment ``spec`` (``path`` + ``line``/``side``/``position``) sits in ``base...commit_id``."""
    if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
        raise Invalid([{"resource": "PullRequestReviewComment", "code": "missing_field", "field": "path"}])
    base = gitops.merge_base(path, base_sha, commit_id) or base_sha
    files = gitops.diff_files(path, base, commit_id)
    change = next((f for f in files if f.filename == spec["path"]), None)
    if change is None:
        raise invalid_custom(
            "PullRequestReviewComment", "Path could not be resolved", "pull_request_review_thread.path"
        )
    if spec.get("subject_type") == "file":
        return Placement(None, None, "RIGHT", (change.patch or "").split("\n", 1)[0])
    line, position = spec.get("line"), spec.get("position")
    side = spec.get("side") or "RIGHT"
    found = None
    if change.patch is not None and (isinstance(line, int) or isinstance(position, int)):
        found = locate(
            change.patch,
            line=line if isinstance(line, int) else None,
            side=str(side),
            position=position if line is None and isinstance(position, int) else None,
        )
    if found is None:
        raise invalid_custom(
            "PullRequestReviewComment", "Line could not be resolved", "pull_request_review_thread.line"
        )
    return found
