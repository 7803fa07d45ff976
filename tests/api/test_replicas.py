"""Two ``crucible serve`` replicas on one PostgreSQL database (issue 8): ten runs submitted through the API
are each driven by exactly one replica at a time; kill -9 one replica mid-turn and the other takes its
runs over once their leases expire and finishes them; no turn is decided twice (checked in the database)
and every run ends with the values of the same run done locally."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from controller.domain.enums import EventKind, RunStatus, TurnPhase
from controller.store import Store
from tests.api.test_serve import SPEC, TOKEN, _env, _until, serving
from tests.conftest import make_repo

RUNS = 10
DECISIONS = (EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def test_two_replicas_share_ten_runs_and_one_takes_over_after_kill_9(
    tmp_path: Path, migrated_postgres_url: str
) -> None:
    postgres_url = migrated_postgres_url  # at the schema's head, as `crucible db upgrade` leaves it
    slow = tmp_path / "slow-never"  # the agent sleeps a little instead, so turns overlap the kill
    spec = SPEC.format(slow=slow).replace("echo $CRUCIBLE_TURN", "sleep 1; echo $CRUCIBLE_TURN")
    repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": spec})
    env = _env(tmp_path / "home", postgres_url)  # one CRUCIBLE_HOME: replicas share the run volume
    with ExitStack() as stack:
        a, url_a = stack.enter_context(
            serving({**env, "CRUCIBLE_MAX_CONCURRENT_RUNS": "5"}, tmp_path / "a.log")
        )
        b, url_b = stack.enter_context(
            serving({**env, "CRUCIBLE_MAX_CONCURRENT_RUNS": "5"}, tmp_path / "b.log")
        )
        headers = {"Authorization": f"Bearer {TOKEN}"}
        ids = []
        with httpx.Client(headers=headers, timeout=60) as client:
            for i in range(RUNS):
                url = url_a if i % 2 else url_b
                answer = client.post(f"{url}/api/runs", json={"spec": spec, "spec_dir": str(repo)})
                assert answer.status_code == 201, answer.text
                ids.append(answer.json()["id"])
        store = stack.enter_context(Store.open(postgres_url))
        pid_a = f":{a.pid}:"

        def a_is_mid_turn() -> bool:
            held = [r for r in map(store.get_run, ids) if r.lease_owner and pid_a in r.lease_owner]
            return any(any(t.phase is TurnPhase.STARTED for t in store.list_turns(r.id)) for r in held)

        _until(a_is_mid_turn, "replica A to be mid-turn in one of its runs", a)
        at_kill = list(map(store.get_run, ids))
        # A's runs that had started (a claimed run may still be pending: B then simply starts it).
        taken = [
            r.id
            for r in at_kill
            if r.lease_owner and pid_a in r.lease_owner and r.status is RunStatus.RUNNING
        ]
        a.send_signal(signal.SIGKILL)
        a.wait(30)

        def all_done() -> bool:
            return all(store.get_run(run_id).status is RunStatus.COMPLETED for run_id in ids)

        _until(all_done, "replica B to finish every run", b, timeout=600)
        for run_id in ids:
            events = store.list_events(run_id)
            decided = Counter(e.payload["turn"] for e in events if e.kind in DECISIONS)
            assert decided == {1: 1, 2: 1, 3: 1}, (run_id, decided)
            assert all(t.phase is TurnPhase.DECIDED for t in store.list_turns(run_id))
            assert sum(e.kind == EventKind.COMPLETED for e in events) == 1
        resumed = {
            run_id for run_id in ids if any(e.kind == EventKind.RESUMED for e in store.list_events(run_id))
        }
        assert taken and set(taken) <= resumed, (taken, resumed)
        assert all(pid_a not in str(store.get_run(run_id).lease_owner) for run_id in ids)
        views = [
            httpx.get(f"{url_b}/api/runs/{run_id}", headers=headers, timeout=60).json() for run_id in ids
        ]
        b.send_signal(signal.SIGTERM)
        b.wait(20)

    local = subprocess.run(
        [sys.executable, "-m", "controller.cli.main", "loop", "--json"],
        cwd=repo,
        env={**env, "CRUCIBLE_HOME": str(tmp_path / "local-home"), "CRUCIBLE_DATABASE_URL": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert local.returncode == 0, local.stderr
    mine = json.loads(local.stdout)

    def outcome(view: dict[str, object]) -> object:
        turns = view["turns"]
        assert isinstance(turns, list)
        return (view["status"], view["stop_reason"], [(t["outcome"], t["value"]) for t in turns])

    assert all(outcome(view) == outcome(mine) for view in views), [outcome(v) for v in views]
