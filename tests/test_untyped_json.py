"""Untyped JSON stays rare: at most 24 ``dict[str, Any]`` outside the local forge (issue 22).

Outside the local forge the count had gone from 25 to 80 in a few features (128 in all), each a dict
built in one place and read back by string keys in another, so a renamed field failed at run time, far
from its cause. Issue 22 brought it under 25 (TypedDicts where the shape is known, pydantic models at the
edges); this test keeps it there. A new one needs a reason: where the shape is known, write a
TypedDict or a model; where it is not (a third party's JSON passed through), ``Mapping[str, object]``
makes the reader check each value. The local forge imitates GitHub's API, whose bodies are its data.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "controller"
UNTYPED = re.compile(r"dict\[str, *Any\]")
BUDGET = 24


def untyped(folder: Path) -> dict[str, int]:
    """``dict[str, Any]`` per module under ``folder`` (the local forge left out)."""
    counts = {}
    for path in sorted(folder.rglob("*.py")):
        name = path.relative_to(folder).as_posix()
        if name.startswith("localforge/"):
            continue
        found = len(UNTYPED.findall(path.read_text(encoding="utf-8")))
        if found:
            counts[name] = found
    return counts


def test_dict_str_any_outside_the_local_forge_stays_under_25() -> None:
    counts = untyped(PACKAGE)
    assert sum(counts.values()) <= BUDGET, f"dict[str, Any] per module: {counts}"


def test_the_count_sees_each_spelling(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x: dict[str, Any] = {}\ny: dict[str,Any]\n", encoding="utf-8")
    (tmp_path / "localforge").mkdir()
    (tmp_path / "localforge" / "b.py").write_text("z: dict[str, Any]\n", encoding="utf-8")
    assert untyped(tmp_path) == {"a.py": 2}
