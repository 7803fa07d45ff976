"""``crucible serve`` end to end, as processes: a run submitted with ``crucible loop --server`` is driven
by the server's scheduler to the same result as the same run done locally; SIGTERM mid-turn ends the
server within 20 s, detaching the run (lease handed back, the turn cut off undecided), and a restarted
server takes the run over and finishes it with every turn decided once; a webhook answered 2xx before
the SIGTERM is processed after the restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from controller.domain.enums import EventKind, RunStatus, TurnPhase
from controller.store import Store
from tests.conftest import free_port, make_repo
from tests.support import wait_until
from tests.support.fixtures import migrated_sqlite_url
from tests.webhooks.helpers import SECRET, encode, post

TOKEN = "serve-token-0123456789"
SPEC = """
objective = "count up"
turns = 3
[agent]
command = "if [ -f {slow} ]; then sleep 120; fi; echo $CRUCIBLE_TURN > src/a.txt"
[sandbox]
mode = "none"
[metric]
command = "echo METRIC m=$(cat src/a.txt)"
name = "m"
direction = "maximize"
samples = 1
warmups = 0
confidence = 0
interleave = false
[[component]]
name = "app"
repo = "."
base = "main"
mutable = ["src/**"]
"""
SIGTERM_BOUND_S = 20.0

pytestmark = pytest.mark.slow


def _env(home: Path, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRUCIBLE_")}
    env.update(
        CRUCIBLE_HOME=str(home),
        CRUCIBLE_DATABASE_URL=database_url,
        CRUCIBLE_API_TOKEN=TOKEN,
        CRUCIBLE_ALLOW_UNSANDBOXED="1",  # SPEC runs unsandboxed (test_admission holds the refusal)
        CRUCIBLE_WEBHOOK_SECRET=SECRET,
        CRUCIBLE_LEASE_TTL="3s",
    )
    return env


@contextmanager
def serving(env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller.cli.main", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _until(lambda: _ready(url), "the server to be ready", proc)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _until(check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    wait_until(check, what, proc=proc, timeout=timeout, interval=0.1)


def _started_turn(store: Store, run_id: str, number: int) -> bool:
    return any(
        e.kind == EventKind.TURN_STARTED and e.payload.get("turn") == number
        for e in store.list_events(run_id)
    )


def test_serve_drives_detaches_on_sigterm_and_a_restart_takes_over(tmp_path: Path) -> None:
    url_db = migrated_sqlite_url(tmp_path / "crucible.db")  # at the schema's head, as `db upgrade` leaves it
    slow = tmp_path / "slow"
    repo = make_repo(tmp_path / "app", {"src/a.txt": "0\n", "crucible.toml": SPEC.format(slow=slow)})
    env = _env(tmp_path / "home", url_db)
    log = tmp_path / "serve.log"

    # 1. A run submitted through the CLI's --server is driven by the server to its stop.
    with serving(env, log) as (proc, url):
        done = subprocess.run(
            [sys.executable, "-m", "controller.cli.main", "loop", "--server", url, "--json"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr + log.read_text()[-3000:]
        remote = json.loads(done.stdout)
        assert (remote["status"], remote["stop_reason"]) == ("completed", "max_turns")
        assert "turn" in done.stderr and "accepted" in done.stderr  # the live table on stderr

        # 2. A second run gets stuck in its second turn; a webhook is answered 2xx; SIGTERM.
        slow.write_text("")
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            answer = client.post("/api/runs", json={"spec": SPEC.format(slow=slow), "spec_dir": str(repo)})
            assert answer.status_code == 201, answer.text
            run_id = answer.json()["id"]
            hook = post(client, "issue_comment", encode({"action": "created", "zen": "x"}), delivery="d-term")
            assert hook.status_code == 202, hook.text
        with Store.open(url_db) as store:
            _until(lambda: _started_turn(store, run_id, 1), "turn 1 to start", proc)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=SIGTERM_BOUND_S)  # raises if it takes longer
        took = time.monotonic() - started
    print(f"SIGTERM to exit: {took:.2f} s")
    with Store.open(url_db) as store:
        run = store.get_run(run_id)
        assert (run.status, run.lease_owner) == (RunStatus.RUNNING, None), "detached, lease handed back"
        assert [t.phase for t in store.list_turns(run_id)] == [TurnPhase.STARTED]

    # 3. A restarted server takes the run over (resume) and finishes it; each turn decided once.
    slow.unlink()
    with serving(env, log) as (proc, url), Store.open(url_db) as store:
        _until(lambda: store.get_run(run_id).status is RunStatus.COMPLETED, "the run to finish", proc)
        assert store.pending_deliveries() == [], "the delivery answered 2xx before SIGTERM was processed"
        decided = Counter(
            e.payload["turn"]
            for e in store.list_events(run_id)
            if e.kind in (EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE)
        )
        assert decided == {1: 1, 2: 1, 3: 1}, decided
        assert any(e.kind == EventKind.RESUMED for e in store.list_events(run_id))
        taken_over = store.get_run(run_id)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=SIGTERM_BOUND_S)

    # The same run done locally ends the same way, with the same values.
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

    assert outcome(remote) == outcome(mine)
    assert (taken_over.champion_value, taken_over.baseline_value) == (
        mine["best"]["value"],
        mine["baseline"]["value"],
    )
