"""Placing review comments on a diff as GitHub does: ``position`` counts lines below the file's
first ``@@`` header (later headers count too); ``line``/``side`` name a line of either version."""

from __future__ import annotations

from controller.localforge.placement import Placement, locate

PATCH = "\n".join(
    [
        "@@ -1,3 +1,3 @@",  # position 0 (not addressable)
        " a",  # 1: old 1 / new 1
        "-b",  # 2: old 2
        "+B",  # 3: new 2
        " c",  # 4: old 3 / new 3
        "@@ -10,2 +10,3 @@ def f():",  # 5: a later hunk header counts as a position
        " j",  # 6: old 10 / new 10
        "+k",  # 7: new 11
        " l",  # 8: old 11 / new 12
    ]
)


def test_right_side_lines_in_later_hunks() -> None:
    found = locate(PATCH, line=11, side="RIGHT")
    assert found == Placement(7, 11, "RIGHT", "@@ -10,2 +10,3 @@ def f():\n j\n+k")
    assert locate(PATCH, line=12, side="RIGHT") == Placement(8, 12, "RIGHT", PATCH.split("\n", 5)[5])


def test_left_side_and_context_lines() -> None:
    assert locate(PATCH, line=2, side="LEFT") == Placement(2, 2, "LEFT", "@@ -1,3 +1,3 @@\n a\n-b")
    context = locate(PATCH, line=3, side="LEFT")
    assert context is not None and context.position == 4


def test_legacy_position_and_lines_outside_the_diff() -> None:
    assert locate(PATCH, position=3) == Placement(3, 2, "RIGHT", "@@ -1,3 +1,3 @@\n a\n-b\n+B")
    assert locate(PATCH, position=2) == Placement(2, 2, "LEFT", "@@ -1,3 +1,3 @@\n a\n-b")
    assert locate(PATCH, position=5) is None  # a hunk header
    assert locate(PATCH, line=5, side="RIGHT") is None
    assert locate(PATCH, line=2, side="RIGHT") is not None  # new line 2 is "+B"
