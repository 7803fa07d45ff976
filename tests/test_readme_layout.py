"""README's layout table matches the tree: every package of ``controller`` (and of ``controller/services``)
and every top-level folder has a row, and every row names something that exists.

The table had fallen behind the tree (no ``forge``, no ``api``, no ``agents``: issue 22); a reader takes it
as the map, so a package added without a row, or a row left behind by a move, fails here.
"""

from __future__ import annotations

import re

from tests.test_self_contained import ROOT, tracked_files

ROW = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


def layout_rows() -> set[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    _, _, section = readme.partition("\n## Layout\n")
    section = section.split("\n## ", 1)[0]
    return {path.rstrip("/") for path in ROW.findall(section)}


def expected_rows() -> set[str]:
    files = tracked_files()
    folders = {name.split("/")[0] for name in files if "/" in name and not name.startswith(".")}
    packages = {
        "/".join(name.split("/")[:2])
        for name in files
        if name.startswith("controller/") and name.count("/") >= 2
    }
    services = {
        "/".join(name.split("/")[:3])
        for name in files
        if name.startswith("controller/services/") and name.count("/") >= 3
    }
    return (folders - {"controller"}) | (packages - {"controller/services"}) | services


def test_every_package_and_folder_has_a_row() -> None:
    missing = expected_rows() - layout_rows()
    assert not missing, f"README's layout table lacks rows for {sorted(missing)}"


def test_every_row_names_something_that_exists() -> None:
    gone = sorted(path for path in layout_rows() if not (ROOT / path).exists())
    assert not gone, f"README's layout table names what the tree lacks: {gone}"
