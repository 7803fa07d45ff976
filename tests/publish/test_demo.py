"""README's main job: ``crucible demo`` runs the whole loop offline and publishes a draft PR."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_end_to_end_and_opens_a_draft_pr(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "from controller.cli.main import main; main()"]
    argv += ["demo", "--turns", "4", "--json", "--keep", str(tmp_path / "demo")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout.strip().splitlines()[-1])
    assert view["status"] == "completed" and view["stop_reason"] == "max_turns"
    assert len(view["turns"]) == 4
    assert view["best"] is not None, "the bundled example has an improving knob within 4 turns"
    [pull] = view["pull_requests"]
    assert pull["draft"] is True and pull["component"] == "router"
    assert pull["head_sha"] == view["components"][0]["head_sha"]
    assert pull["url"].startswith("http://127.0.0.1:")
