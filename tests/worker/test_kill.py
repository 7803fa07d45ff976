"""Killing ``crucible worker`` mid-round, then running the round again: no turn is decided twice
(the ledger's idempotency over HTTP), the cut-off turn runs again from its start, and the killed
attempt's token no longer writes (ADR-0014). Real processes, git and HTTP; SIGKILL, no mercy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from controller.config.spec import load_spec
from controller.domain.enums import EventKind, RunStatus, TurnPhase
from controller.domain.jobs import RoundJob
from controller.services.execution.runs import create_run
from tests.conftest import git, make_repo
from tests.support.waiting import wait_until
from tests.worker.conftest import Controller

pytestmark = pytest.mark.slow

AGENT = """
import json, os, pathlib, time
turn = int(os.environ["CRUCIBLE_TURN"])
gate = pathlib.Path({gate!r})
if turn == 2 and not (gate / "release").exists():
    (gate / "started-2").write_text("")
    while not (gate / "release").exists():
        time.sleep(0.05)
json.dump({{"a": turn}}, open("conf.json", "w"))
print(f"HYPOTHESIS: a = {{turn}}")
"""

SPEC = """
objective = "bring m down"
turns = 3
[agent]
command = "python3 {agent}"
[sandbox]
mode = "none"
[metric]
command = "python3 bench.py"
name = "m"
direction = "minimize"
samples = 2
warmups = 0
confidence = 0
interleave = false
sequential = false
[[component]]
name = "app"
repo = "."
mutable = ["conf.json"]
"""

BENCH = """
import json
print(f"METRIC m={10 - json.load(open('conf.json'))['a']}")
"""
DEADLINE_S = 120.0  # a bound for a broken worker, never reached by a working one


def _worker(env: dict[str, str], workdir: Path) -> subprocess.Popen[bytes]:
    """``crucible worker`` in ``workdir`` with a pod's environment; its output in ``workdir/log``."""
    workdir.mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "GIT_CONFIG_NOSYSTEM")}
    with (workdir / "log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli.main", "worker"],
            cwd=workdir,
            env={**base, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _job(controller: Controller, run_id: str) -> RoundJob:
    heads = {c.name: c.head_sha for c in controller.store.list_components(run_id)}
    counts = controller.store.turn_counts(run_id)
    first = counts.started[0] if counts.started else counts.highest + 1
    return RoundJob(run_id=run_id, round=0, turns=3, first_turn=first, heads=heads)


def test_a_killed_worker_then_a_new_attempt_decides_every_turn_once(
    controller: Controller, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT.format(gate=str(gate)))
    repo = make_repo(tmp_path / "app", {"conf.json": json.dumps({"a": 0}), "bench.py": BENCH})
    (repo / "crucible.toml").write_text(SPEC.format(agent=agent))
    git(repo, "add", "crucible.toml")
    git(repo, "commit", "-q", "-m", "spec")
    spec = load_spec(repo / "crucible.toml")
    run_id = create_run(controller.store, spec, (repo / "crucible.toml").read_text(), repo / "crucible.toml")

    first_env = controller.remote.mint_worker_env(_job(controller, run_id))
    first = _worker(first_env, tmp_path / "pod-1")
    try:
        wait_until((gate / "started-2").exists, what="turn 2 to start", timeout=DEADLINE_S, proc=first)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {(tmp_path / 'pod-1' / 'log').read_text()}") from exc
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert controller.store.get_turn(run_id, 1).phase is TurnPhase.DECIDED
    assert controller.store.get_turn(run_id, 2).phase is TurnPhase.STARTED

    (gate / "release").write_text("")
    second_env = controller.remote.mint_worker_env(_job(controller, run_id))
    assert second_env["CRUCIBLE_ROUND_ATTEMPT"] == "2"
    second = _worker(second_env, tmp_path / "pod-2")
    assert second.wait(timeout=DEADLINE_S) == 0, (tmp_path / "pod-2" / "log").read_text()

    turns = controller.store.list_turns(run_id)
    assert [(t.number, t.phase) for t in turns] == [(n, TurnPhase.DECIDED) for n in (1, 2, 3)]
    decided = {EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE}
    per_turn = Counter(e.payload["turn"] for e in controller.store.list_events(run_id, kinds=decided))
    assert per_turn == {1: 1, 2: 1, 3: 1}, "no turn decided twice"
    assert controller.store.get_turn(run_id, 2).hypothesis == "a = 2", "turn 2 ran again from its start"
    assert controller.store.get_run(run_id).champion_turn == 3
    # The worker reports the round's end; the run's status is the controller's to record (ADR-0031).
    outcome = controller.remote.remote_outcome(run_id, 0)
    assert outcome is not None and outcome.run_status is RunStatus.COMPLETED
    with controller.client(first_env["CRUCIBLE_WORKER_TOKEN"]) as http:
        answer = http.post(
            f"/api/worker/runs/{run_id}/ledger/events", json={"kind": "resumed", "payload": {}}
        )
        assert answer.status_code == 401, "the killed attempt cannot write any more"
