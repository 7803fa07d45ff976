"""README's main job: ``crucible demo`` runs the whole loop offline: a draft PR, a review, a round."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_end_to_end_through_a_review_round(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "from controller.cli.main import main; main()"]
    argv += ["demo", "--turns", "2", "--json", "--keep", str(tmp_path / "demo")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout.strip().splitlines()[-1])
    assert view["status"] == "completed" and view["stop_reason"] == "max_rounds"
    assert len([t for t in view["turns"] if t["round"] == 0]) == 2
    assert view["best"] is not None, "the bundled example improves within 4 turns"
    [pull] = view["pull_requests"]
    assert pull["draft"] is True and pull["component"] == "router"
    assert pull["head_sha"] == view["components"][0]["head_sha"]
    assert pull["url"].startswith("http://127.0.0.1:")
    [finished] = view["rounds"]
    assert finished["kept"] and finished["head"] == pull["head_sha"], "the round landed on the same PR"
    steered = [t for t in view["turns"] if t["round"] == 1]
    assert steered and "@reviewer: set batch.size = 4" in (steered[-1]["hypothesis"] or "")
    assert view["replies"] and all("@reviewer" in r["reply"] for r in view["replies"])
    accepted = [f for f in view["feedback"] if f["verdict"] == "accepted"]
    assert any("batch.size = 4" in f["body"] for f in accepted)
