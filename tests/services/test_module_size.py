"""No module of ``controller/services`` is over 500 lines (CONTRIBUTING.md, "Small pieces"; issue 22).

The rule was kept by hand: a module was split when someone noticed it had grown past the limit
(``remote_rounds.py``, 513 -> 470 lines), and ``control/service.py`` stands at 499, so the next
feature could push one over unseen. A module that needs more lines has more than one job; split it.
"""

from __future__ import annotations

from pathlib import Path

SERVICES = Path(__file__).resolve().parents[2] / "controller" / "services"
MAX_LINES = 500


def line_counts(folder: Path) -> dict[str, int]:
    return {
        path.relative_to(folder).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(folder.rglob("*.py"))
    }


def test_no_services_module_is_over_500_lines() -> None:
    counts = line_counts(SERVICES)
    assert len(counts) > 40, "the scan reads the services package"
    assert {name: n for name, n in counts.items() if n > MAX_LINES} == {}


def test_the_count_is_the_files_lines(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    assert line_counts(tmp_path) == {"big.py": MAX_LINES + 1}
