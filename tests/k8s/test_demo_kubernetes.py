"""``crucible demo --kubernetes``: the demo's search round and its review round run as Jobs on the
control plane (their pods run ``crucible worker`` on the process node, ADR-0019); without a control
plane the command says how to start one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from tests.k8s.conftest import ControlPlane

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


@pytest.mark.slow
def test_the_demo_runs_its_search_round_as_a_job(tmp_path: Path, control_plane: ControlPlane) -> None:
    env = _env(CRUCIBLE_HOME=str(tmp_path / "home"), CRUCIBLE_KUBECONFIG=str(control_plane.kubeconfig))
    # One search turn: the example agent's first idea (a bigger cache) is a sure keep (41 -> 34 ms
    # against 0.15 ms of noise), which the review round needs (a PR); tests/publish/test_demo.py runs
    # the demo's longer search locally.
    argv = [*CLI, "demo", "--kubernetes", "--turns", "1", "--json", "--keep", str(tmp_path / "demo")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout.strip().splitlines()[-1])
    assert view["status"] == "completed"
    assert len([t for t in view["turns"] if t["round"] == 0]) == 1
    [pull] = view["pull_requests"]
    assert pull["head_sha"] == view["components"][0]["head_sha"]
    assert [t["round"] for t in view["turns"] if t["round"] > 0][:1] == [1], "the review round ran"
    batch = client.BatchV1Api(control_plane.api)
    for number in (0, 1):  # the search round and the review round
        job = batch.read_namespaced_job(f"crucible-{view['run_id']}-{number}", "default")
        assert any(c.type == "Complete" and c.status == "True" for c in job.status.conditions)
        batch.delete_namespaced_job(job.metadata.name, "default", propagation_policy="Foreground")
