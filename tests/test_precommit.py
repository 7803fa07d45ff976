"""The pre-commit hooks run the same checks as README's test command, so a commit that passes them does
not fail CI on ruff, mypy or the import contracts."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def script_checks() -> list[str]:
    """The check commands of scripts/test.sh, in order: its one-line steps (``echo "== …"; <command>``)
    that run a tool of the environment running these tests (ruff, mypy, …), not set-up steps (bash …)."""
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    steps = [m.group(1).strip() for m in re.finditer(r'^echo "== [^"]+";\s*(.+)$', script, re.MULTILINE)]
    tools = Path(sys.executable).parent
    return [step for step in steps if (tools / step.split()[0]).is_file()]


def hook_entries() -> list[str]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    return [hook["entry"].removeprefix(".venv/bin/") for repo in config["repos"] for hook in repo["hooks"]]


def test_every_check_of_the_test_command_is_a_hook() -> None:
    checks = script_checks()
    assert checks == [
        "ruff check controller tests bench",
        "ruff format --check controller tests bench",
        "mypy",
        "mypy --explicit-package-bases bench",
        "lint-imports",
    ], "scripts/test.sh changed its checks: update this test and .pre-commit-config.yaml"
    assert [entry for entry in hook_entries() if entry in checks] == checks


def test_hooks_use_the_project_venv_and_never_rewrite_code_unasked() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    for repo in config["repos"]:
        assert repo["repo"] == "local"
        for hook in repo["hooks"]:
            assert hook["entry"].startswith(".venv/bin/"), hook["id"]
            assert "--fix" not in hook["entry"], hook["id"]
