"""The watching run across process deaths (issue 8), with the real CLI as processes and the local forge:

- SIGTERM to ``crucible loop --publish-prs --watch-feedback --listen`` ends it well within 20 s, hands
  its lease back, and leaves the run running; a review whose webhook was answered 2xx before the
  SIGTERM is stored, and ``crucible resume`` processes it, goes on watching and answers the next review.
- ``kill -9`` during a refinement round, then ``resume``: the round goes on where it was; no turn is
  decided twice and no round is counted that did not run (checked in the database).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.domain.enums import EventKind, RunPhase, RunStatus, TurnPhase
from controller.localforge.server import ForgeHandle
from controller.store import Store
from tests.conftest import free_port
from tests.forgekit import TOKENS, app_forge, github_as, review_round_spec, write_agent, write_spec
from tests.recovery.conftest import CliResult, Controller, cli_argv, isolated_env, wait_until
from tests.support.fixtures import migrated_sqlite_url

pytestmark = pytest.mark.slow
SECRET = "it is a secret to everybody"
SIGTERM_BOUND_S = 20.0  # the bound (Kubernetes allows 30 s before it kills)

# Round 0 lowers the value; a round commits the quoted review lines. With HANG_ROUND set, the first
# agent of that round hangs once (ignoring SIGTERM), so the test can kill the controller mid-round.
AGENT = """\
if [ "$CRUCIBLE_ROUND" = "0" ]; then
  echo 8 > src/value.txt
  echo "HYPOTHESIS: lower the value"
  exit 0
fi
if [ -n "$HANG_DIR" ] && [ -f "$HANG_DIR/hang-once" ]; then
  rm "$HANG_DIR/hang-once"
  trap '' TERM
  echo $$ > "$HANG_DIR/hung.pid"
  sleep 60
  exit 3
fi
grep '^> ' "$CRUCIBLE_CANDIDATE" > src/addressed.txt
echo "HYPOTHESIS: address the review"
"""


@dataclass
class Site:
    tmp: Path
    handle: ForgeHandle
    env: dict[str, str]
    port: int
    spawned: list[Controller]

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.tmp / 'crucible-home' / 'crucible.db'}"

    def spawn(self, *args: str) -> Controller:
        n = len(self.spawned)
        out, err = self.tmp / f"cli-{n}.out", self.tmp / f"cli-{n}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                cli_argv(*args),
                cwd=self.tmp,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        self.spawned.append(Controller(proc, out, err))
        return self.spawned[-1]

    def store(self) -> Store:
        return Store.open(self.database_url)

    def review(self, text: str) -> None:
        """bob (a collaborator with push) submits a review with one inline comment on the run's PR."""
        with self.store() as store:
            [run] = store.list_runs()
            [record] = store.list_pulls(run.id)
        # Paced as PyGithub paces github.com: unpaced, the review reaches the run so soon that the SIGTERM
        # of the test below lands in the round it steered, not while the run watches (issue 23's notes).
        bob = github_as(self.handle.api_url, "bob", paced=True)
        pull = bob.get_repo("alice/app").get_pull(record.number)
        commit = list(pull.get_commits())[-1]
        inline = [{"path": "src/value.txt", "line": 1, "body": text}]
        pull.create_review(commit=commit, body="", event="COMMENT", comments=inline)
        bob.close()

    def wait_for(self, run_id: str, what: str, check: object, proc: subprocess.Popen[bytes]) -> None:
        def holds() -> bool:
            with self.store() as store:
                return bool(check(store))  # type: ignore[operator]

        wait_until(holds, what, proc=proc)


@contextmanager
def site(tmp_path: Path, *, max_rounds: int, poll_interval: str) -> Iterator[Site]:
    port = free_port()
    webhook = f"http://127.0.0.1:{port}/webhooks/github"
    with app_forge(tmp_path, webhook_url=webhook, webhook_secret=SECRET) as app:
        spec = review_round_spec(write_agent(tmp_path, AGENT), app.handle.api_url, max_rounds=max_rounds)
        write_spec(tmp_path, spec.replace('poll_interval = "1s"', f'poll_interval = "{poll_interval}"'))
        (tmp_path / "crucible-home").mkdir()
        migrated_sqlite_url(tmp_path / "crucible-home" / "crucible.db")  # not about a first run
        env = isolated_env(Path(os.environ["HOME"]), tmp_path / "crucible-home", {})
        env.update(
            CRUCIBLE_GITHUB_TOKEN=TOKENS["alice"],
            CRUCIBLE_WEBHOOK_SECRET=SECRET,
            CRUCIBLE_OWN_LOGINS="alice",
            CRUCIBLE_FORGE_WRITE_INTERVAL="0",
            CRUCIBLE_LEASE_TTL="3s",
            HANG_DIR=str(tmp_path / "hang"),
        )
        (tmp_path / "hang").mkdir()
        made = Site(tmp_path, app.handle, env, port, [])
        try:
            yield made
        finally:
            for controller in made.spawned:
                if controller.proc.poll() is None:
                    os.killpg(controller.proc.pid, signal.SIGKILL)
                    controller.proc.wait()
            hung = tmp_path / "hang" / "hung.pid"
            if hung.exists():
                with suppress(ProcessLookupError):
                    os.killpg(int(hung.read_text()), signal.SIGKILL)


def _phase(run_id: str, phase: RunPhase) -> object:
    return lambda store: store.get_run(run_id).phase is phase


def _rounds_finished(run_id: str, count: int) -> object:
    return lambda store: sum(e.kind == EventKind.ROUND_FINISHED for e in store.list_events(run_id)) >= count


def _decided_once(store: Store, run_id: str) -> None:
    decisions = {EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE}
    per_turn = Counter(e.payload["turn"] for e in store.list_events(run_id) if e.kind in decisions)
    turns = store.list_turns(run_id)
    assert all(t.phase == TurnPhase.DECIDED for t in turns)
    assert per_turn == {t.number: 1 for t in turns}, f"decisions per turn: {per_turn}"


def test_sigterm_while_watching_then_resume_processes_the_webhook_and_answers_the_next_review(
    tmp_path: Path,
) -> None:
    # Polls only once an hour: between the two processes, feedback arrives by webhook alone.
    with site(tmp_path, max_rounds=2, poll_interval="1h") as s:
        loop = s.spawn(
            "loop", "--publish-prs", "--watch-feedback", "--listen", f"127.0.0.1:{s.port}", "--json"
        )
        run_id = loop.run_id()
        s.wait_for(run_id, "the run to watch its PR", _phase(run_id, RunPhase.WATCHING), loop.proc)
        s.review("first: keep the value stable")
        assert s.handle.flush_webhooks(30), "the forge delivered the review's webhook"
        answered = [
            d.status for d in s.handle.services.forge.dispatcher.recent if d.event == "pull_request_review"
        ]
        assert answered and all(200 <= status < 300 for status in answered), answered

        started = time.monotonic()
        os.kill(loop.proc.pid, signal.SIGTERM)
        code = loop.proc.wait(timeout=SIGTERM_BOUND_S)  # raises if it takes longer
        took = time.monotonic() - started
        print(f"SIGTERM to exit: {took:.2f} s")
        terminated = CliResult(code, loop.out.read_text(), loop.err.read_text())
        assert code == 143, terminated.describe()
        assert f"crucible resume {run_id}" in terminated.stderr
        with s.store() as store:
            run = store.get_run(run_id)
            assert (run.status, run.lease_owner) == (RunStatus.RUNNING, None), "running, lease handed back"
            assert store.get_run(run_id).round <= 1
            answered_before = {d.id for d in store.pending_deliveries(limit=1000)}

        resumed = s.spawn("resume", run_id, "--json")
        s.wait_for(run_id, "the first round to finish", _rounds_finished(run_id, 1), resumed.proc)
        with s.store() as store:
            # Only the deliveries stored before SIGTERM: the round's own push sends more, which may
            # still be on their way when the round is seen finished.
            still = answered_before & {d.id for d in store.pending_deliveries(limit=1000)}
            assert not still, "every delivery stored before SIGTERM was processed after the restart"
            first = [i for i in store.list_feedback(run_id) if "first:" in i.body]
            assert first and first[0].round == 1, "the review answered 2xx before SIGTERM steered round 1"
        s.wait_for(run_id, "the run to watch again", _phase(run_id, RunPhase.WATCHING), resumed.proc)
        s.review("second: mention the cache")
        result = resumed.finish()

        assert result.code == 0, result.describe()
        view = result.json
        assert (view["status"], view["stop_reason"]) == ("completed", "max_rounds"), result.describe()
        assert [r["kept"] for r in view["rounds"]] == [True, True]
        with s.store() as store:
            _decided_once(store, run_id)
            second = [i for i in store.list_feedback(run_id) if "second:" in i.body]
            assert second and second[0].round == 2, "the resumed run went on watching and answered"
            assert store.get_run(run_id).phase is RunPhase.FINISHED


def test_kill_9_during_a_round_then_resume_decides_no_turn_twice_and_counts_no_phantom_round(
    tmp_path: Path,
) -> None:
    with site(tmp_path, max_rounds=1, poll_interval="1s") as s:
        (tmp_path / "hang" / "hang-once").write_text("")
        loop = s.spawn("loop", "--publish-prs", "--watch-feedback", "--json")
        run_id = loop.run_id()
        s.wait_for(run_id, "the run to watch its PR", _phase(run_id, RunPhase.WATCHING), loop.proc)
        s.review("please keep the value stable")
        hung = tmp_path / "hang" / "hung.pid"
        wait_until(hung.exists, "the round's agent to hang", proc=loop.proc)
        os.kill(loop.proc.pid, signal.SIGKILL)
        loop.proc.wait(timeout=30)
        with s.store() as store:
            run = store.get_run(run_id)
            assert (run.status, run.phase, run.round) == (RunStatus.RUNNING, RunPhase.ROUND, 1)
            cut = [t for t in store.list_turns(run_id) if t.round == 1]
            assert [t.phase for t in cut] == [TurnPhase.STARTED], "the round's first turn was cut off"

        resumed = s.spawn("resume", run_id, "--json").finish()

        assert resumed.code == 0, resumed.describe()
        assert (resumed.json["status"], resumed.json["stop_reason"]) == ("completed", "max_rounds")
        with s.store() as store:
            _decided_once(store, run_id)
            run = store.get_run(run_id)
            assert (run.round, run.phase) == (1, RunPhase.FINISHED)
            kinds = Counter(e.kind for e in store.list_events(run_id))
            assert (kinds[EventKind.ROUND_STARTED], kinds[EventKind.ROUND_FINISHED]) == (1, 1), "no phantom"
            round_turns = [t for t in store.list_turns(run_id) if t.round == 1]
            assert [t.number for t in round_turns] == [cut[0].number], "the cut-off turn ran again, once"
            assert round_turns[0].outcome == "accepted"
            consumed = [i for i in store.list_feedback(run_id) if i.round is not None]
            assert consumed and all(i.round == 1 for i in consumed)
        assert not os.path.exists(f"/proc/{int(hung.read_text())}/stat") or _dead(int(hung.read_text()))


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return True
    return state in ("Z", "X")
