"""Ignored files of a checkout: kept by ``workspace.keep_ignored`` or removed before measuring (ADR 0007)."""

from __future__ import annotations

import os
from pathlib import Path

from controller.workspace import ignored
from tests.conftest import make_repo


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_scan_splits_kept_from_unkept_and_remove_leaves_a_fresh_clone(tmp_path: Path) -> None:
    gitignore = "__pycache__/\n.venv/\ntarget/\n.env\n"
    repo = make_repo(tmp_path / "repo", {".gitignore": gitignore, "src/a.py": "x = 1\n"})
    _write(
        repo,
        {
            "src/__pycache__/a.cpython-311.pyc": "planted",
            ".venv/lib/site.py": "kept",
            ".venv/bin/python": "kept",
            "target/cache/blob": "kept inside an ignored directory",
            "target/debug/app": "not kept",
            ".env": "TOKEN=x",
        },
    )
    keep = [".venv", "target/cache"]

    found = ignored.scan(repo, keep)

    assert sorted(found.kept) == [".venv/bin/python", ".venv/lib/site.py", "target/cache/blob"]
    assert sorted(found.unkept) == [".env", "src/__pycache__/", "target/debug/app"]
    ignored.remove(repo, found.unkept)
    assert not (repo / "src" / "__pycache__").exists() and not (repo / ".env").exists()
    assert not (repo / "target" / "debug").exists() and (repo / "target" / "cache" / "blob").exists()
    assert ignored.scan(repo, keep).unkept == ()


def test_a_rewritten_kept_file_is_seen_even_with_its_mtime_forged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": ".venv/\n"})
    _write(repo, {".venv/lib/mod.py": "honest = 1\n"})
    before = ignored.scan(repo, [".venv"]).kept
    target = repo / ".venv" / "lib" / "mod.py"
    info = target.stat()
    target.write_text("honest = 2\n")
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))  # size and mtime as before

    after = ignored.scan(repo, [".venv"]).kept

    assert ignored.changed(before, after) == [".venv/lib/mod.py"]
    assert ignored.changed(before, before) == []


def test_classify_keeps_by_each_calls_own_patterns(tmp_path: Path) -> None:
    """ADR-0053: the patterns' compiled spec is reused by content; each call still keeps what its own
    patterns match."""
    _write(tmp_path, {"cache/a": "1", "build/b": "2"})
    entries = ["cache/a", "build/b"]
    assert sorted(ignored.classify(tmp_path, entries, ["cache/"]).kept) == ["cache/a"]
    assert sorted(ignored.classify(tmp_path, entries, ["build/"]).kept) == ["build/b"]
    assert ignored.classify(tmp_path, entries, []).unkept == ("cache/a", "build/b")
