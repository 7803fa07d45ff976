"""``crucible worker`` at its edge: bad configuration is a usage error naming the variable, and a
token the controller does not know ends the worker with exit 1 before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.worker.conftest import Controller

BASE = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}


def _worker(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli.main", "worker", *args],
        cwd=cwd,
        env={**BASE, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_configuration_names_the_variable(tmp_path: Path) -> None:
    done = _worker({}, tmp_path)
    assert done.returncode == 2 and "CRUCIBLE_CONTROLLER_URL" in done.stderr
    done = _worker({"CRUCIBLE_CONTROLLER_URL": "http://127.0.0.1:9"}, tmp_path, "--run", "r1", "--round", "0")
    assert done.returncode == 2 and "CRUCIBLE_WORKER_TOKEN" in done.stderr
    env = {
        "CRUCIBLE_CONTROLLER_URL": "http://127.0.0.1:9",
        "CRUCIBLE_WORKER_TOKEN": "t",
        "CRUCIBLE_RUN_ID": "r1",
    }
    done = _worker({**env, "CRUCIBLE_ROUND": "zero"}, tmp_path)
    assert done.returncode == 2 and "CRUCIBLE_ROUND" in done.stderr


def test_an_unknown_token_ends_the_worker_before_anything_runs(
    controller: Controller, tmp_path: Path
) -> None:
    controller.seed_run("r1")
    env = {
        "CRUCIBLE_CONTROLLER_URL": controller.url,
        "CRUCIBLE_WORKER_TOKEN": "not-a-token",
        "CRUCIBLE_RUN_ID": "r1",
        "CRUCIBLE_ROUND": "0",
    }
    pod = tmp_path / "pod"
    pod.mkdir()
    done = _worker(env, pod)
    assert done.returncode == 1 and "invalid worker token" in done.stderr
    assert "not-a-token" not in done.stdout + done.stderr, "the token is never printed"
    assert list(pod.iterdir()) == [], "nothing fetched"
    assert controller.store.list_events("r1") == []
