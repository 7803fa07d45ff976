"""``crucible demo --kubernetes``: the demo's search round runs as a Job on the control plane (its pod
runs ``crucible worker`` on the process node), the review round on the controller; without a control
plane the command says how to start one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-c", "from controller.cli.main import main; main()"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_")}
    return {**env, **extra}


def test_without_a_control_plane_the_demo_says_how_to_start_one(tmp_path: Path) -> None:
    env = _env(CRUCIBLE_HOME=str(tmp_path), CRUCIBLE_KUBECONFIG=str(tmp_path / "none"))
    done = subprocess.run(
        [*CLI, "demo", "--kubernetes"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2
    assert "bash scripts/k8s/up" in done.stderr and "CRUCIBLE_KUBECONFIG" in done.stderr
    assert not (tmp_path / "runs").exists()
