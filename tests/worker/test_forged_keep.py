"""The forged-keep attack of issue 21 against confirmations (ADR-0043), with real processes only.

The recount (``test_forged_reports``) refuses a claim its samples do not give, but whoever holds a
round's token can upload a real bundle whose commit makes the metric worse and claim it kept with
made-up samples that agree. Here that attack is replayed with each round's token taken as it is
minted: a watching run publishes a draft PR from round 0 and is steered into a refinement round,
both played by ``crucible worker`` children of the subprocess broker, and while each round's turn
runs (its agent waits for the attacker) the attacker sends the worse commit as a verified bundle and
its forged keep. The controller confirms the claim in a worker of its own (a child process with a
token scoped to that claim), which measures the worse value; the claim is refused, and the run's
turns, champion and PR end exactly as the honest steered run's (``check_steered``).

Also: an honest round with confirmations decides as the same round run locally (every keep
confirmed); a keep the confirmation does not reproduce ends its turn ``rejected`` / ``unconfirmed``
and the round goes on; a controller restarted while a confirmation is in flight confirms the keep the
worker sends again (the old confirmation's token is retired, its report refused).

The attack runs on PostgreSQL only, the database of a served controller whose rounds run in workers
(issue 23: each database took ~20 s of two whole steered runs, and the refusal is the keep gate's, not
the store's); ``tests/k8s/test_e2e_confirm.py`` replays it on SQLite through the control plane, and
the confirmations' records are checked on both databases by the not-reproduced and
restarted-controller tests here. The honest round runs on SQLite only too: that it decides as the
local round, every keep confirmed and nothing else, is the keep gate's and the recount's doing.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.brokers.local import LocalBroker
from controller.brokers.subprocess import SubprocessBroker, SubprocessConfirmations
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import EventKind, Outcome, Reason, RunStatus, SampleArm, StopReason
from controller.domain.errors import ConfirmingError
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.control.service import RunService
from controller.services.remote.remote_rounds import RemoteRounds, token_hash
from controller.store import ChampionUpdate, ComponentRecord, NewRun, Store, TurnDecision
from controller.store.http_ledger import HttpLedger
from controller.store.records import Sample
from controller.wiring import compose_service
from tests.api.sqlite_only import POSTGRES_ONLY, SQLITE_ONLY
from tests.conftest import git, make_repo
from tests.forgekit import app_forge
from tests.k8s.conftest import wait_until
from tests.support.fixtures import seed_migrated
from tests.worker.conftest import OPERATOR, _Control
from tests.worker.knobs_round import BENCH, KNOBS_SPEC
from tests.worker.steered_round import WORKER, check_steered, run_steered
from tests.worker.test_forged_reports import GATED_AGENT

pytestmark = pytest.mark.slow

WORSE = 50.0  # what the attacker's commit sets the value to (the base is 10, the honest keep 8)


class KeepForger:
    """Holds every minted round token; for each, waits for its round's turn to run, uploads a real
    commit that makes the value worse as a bundle, claims it kept with made-up samples that agree,
    then lets the agent go on (the gate file)."""

    def __init__(self, gate: Path, work: Path) -> None:
        self.gate = gate
        self.work = work
        self.answers: dict[int, httpx.Response] = {}
        self.commits: dict[int, str] = {}
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def minting(self, mint: Callable[[RoundJob], dict[str, str]]) -> Callable[[RoundJob], dict[str, str]]:
        def stolen(job: RoundJob) -> dict[str, str]:
            env = mint(job)
            thread = threading.Thread(target=self._attack, args=(env, job.round))
            thread.start()
            self.threads.append(thread)
            return env

        return stolen

    def _attack(self, env: dict[str, str], round: int) -> None:
        run_id = env["CRUCIBLE_RUN_ID"]
        base = f"{env['CRUCIBLE_CONTROLLER_URL']}/api/worker/runs/{run_id}"
        headers = {"Authorization": f"Bearer {env['CRUCIBLE_WORKER_TOKEN']}"}
        try:
            with httpx.Client(base_url=base, headers=headers, timeout=60) as http:

                def running() -> int | None:
                    recent = http.get("/ledger/snapshot", params={"last": 1}).json()["recent"]
                    started = [t for t in recent if t["phase"] == "started" and t["round"] == round]
                    return started[0]["number"] if started else None

                wait_until(lambda: running() is not None, what=f"round {round}'s turn to start", timeout=120)
                turn = running()
                assert turn is not None
                sha = self._upload_worse(http, run_id, round, turn)
                self.commits[round] = sha
                champion = 10.0 if round == 0 else 8.0
                samples = [
                    ["champion", 0, {"value": champion}, True],
                    ["candidate", 0, {"value": 0.001}, True],
                ]
                decided = {"turn": turn, "round": round, "outcome": "accepted", "reason": "improved"}
                claim = {
                    "decision": {
                        "outcome": "accepted",
                        "reason": "improved",
                        "value": 0.001,
                        "commits": {"app": sha},
                    },
                    "champion": {"value": 0.001, "turn": turn},
                    "component_heads": {"app": sha},
                    "event": {"kind": "accepted", "payload": {**decided, "value": 0.001}},
                    "samples": samples,
                }
                answer = http.post(f"/ledger/turns/{turn}/decision", json=claim)
                while answer.status_code == 503 and answer.json().get("kind") == "confirming":
                    answer = http.post(f"/ledger/turns/{turn}/decision", json=claim)  # as a worker waits
                self.answers[round] = answer
        except BaseException as exc:  # the test's assertions show it
            self.errors.append(exc)
        finally:
            (self.gate / f"forged-{round}").touch()

    def _upload_worse(self, http: httpx.Client, run_id: str, round: int, turn: int) -> str:
        """The round's start from the controller (as the worker fetches it), a commit setting the value
        to ``WORSE`` on it, sent as the round's bundle: real commits, verified by the controller."""
        where = self.work / f"round-{round}"
        where.mkdir(parents=True)
        start = where / "start.bundle"
        start.write_bytes(http.get("/components/app/bundle").content)
        clone = where / "app"
        git(where, "init", "-q", "app")
        git(clone, "config", "user.email", "mallory@example.com")
        git(clone, "config", "user.name", "Mallory")
        git(clone, "fetch", "-q", str(start), f"refs/crucible/{run_id}/start/app:refs/heads/start")
        git(clone, "checkout", "-q", "start")
        head = git(clone, "rev-parse", "HEAD")
        (clone / "src" / "value.txt").write_text(f"{WORSE:g}\n")
        git(clone, "commit", "-qam", "lower the value (it raises it)")
        sha = git(clone, "rev-parse", "HEAD")
        git(clone, "update-ref", f"refs/crucible/{run_id}/app", sha)
        out = where / "worse.bundle"
        git(clone, "bundle", "create", "-q", str(out), f"refs/crucible/{run_id}/app", f"^{head}")
        sent = http.post("/bundle", params={"turn": turn}, content=out.read_bytes())
        assert sent.status_code == 200, sent.text
        return sha

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=120)


@POSTGRES_ONLY
def test_a_forged_keep_of_a_real_worse_commit_leaves_the_run_as_an_honest_one(
    tmp_path: Path, database_url: str
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    forger = KeepForger(gate, tmp_path / "mallory")
    honest = _steered(tmp_path / "honest", database_url, None, gate)
    attacked = _steered(tmp_path / "attacked", database_url, forger, gate)
    forger.join()
    assert forger.errors == []
    assert set(forger.answers) == {0, 1}, "both rounds were attacked"
    for round, answer in forger.answers.items():
        assert answer.status_code == 403, (round, answer.text)
        assert answer.json()["kind"] == "unconfirmed", answer.text
        assert f"claimed keep; the confirmation measured {WORSE:g}" in answer.json()["detail"], answer.text
    with Store.open(database_url) as store:
        # The turns, the champion and the PR's tree: the honest run's (``check_steered`` checked the
        # rest of each: both rounds' records, the PR branch holding the component's head).
        assert _decisions(store, attacked) == _decisions(store, honest)
        assert _champion(store, attacked) == _champion(store, honest) == (8.0, 2)
        assert _tree(tmp_path / "attacked", store, attacked) == _tree(tmp_path / "honest", store, honest)
        turns = store.list_turns(attacked)
        assert not {t.commits.get("app") for t in turns} & set(forger.commits.values())
        refused = [
            dict(e.payload)
            for e in store.list_events(attacked, kinds={EventKind.REJECTED})
            if "claimed keep" in str(e.payload.get("detail", ""))
        ]
        assert len(refused) == 2 and all(p["reason"] == "policy_violation" for p in refused), refused
        # Every keep recorded was confirmed by a measurement no agent ran in; the forged claims were
        # measured and not confirmed.
        for turn in turns:
            found = store.confirmations(attacked, turn.round, turn.number)
            verdicts = {
                g.job["confirm"]["candidate"]["app"]: g.outcome["confirmation"]["confirmed"]
                for g in found
                if g.outcome is not None
            }
            assert verdicts[forger.commits[turn.round]] is False, verdicts
            if turn.outcome is Outcome.ACCEPTED:
                assert verdicts[turn.commits["app"]] is True, verdicts


def _steered(where: Path, database_url: str, forger: KeepForger | None, gate: Path) -> str:
    """The steered run in ``where``, its rounds' tokens stolen by ``forger`` (None: an honest run,
    whose agent finds the gate open), confirmations on; checked by ``check_steered``."""
    where.mkdir()
    if forger is None:
        for round in (0, 1):
            (gate / f"forged-{round}").touch()
    confirmations = SubprocessConfirmations(
        root=where / "confirmations", environ={"PATH": os.environ["PATH"]}, command=WORKER
    )

    def make_broker(remote: RemoteRounds, mint: Callable[[RoundJob], dict[str, str]]) -> SubprocessBroker:
        return SubprocessBroker(
            mint_worker_env=mint if forger is None else forger.minting(mint),
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            root=where / "pods",
            environ={"PATH": os.environ["PATH"]},
            command=WORKER,
        )

    try:
        with app_forge(where) as forge:
            agent = GATED_AGENT.format(gate=gate)
            steered = run_steered(
                where, forge, database_url, make_broker, agent=agent, confirmations=lambda _run: confirmations
            )
            check_steered(steered, where, forge, database_url)
    finally:
        confirmations.close()
        for round in (0, 1):
            (gate / f"forged-{round}").unlink(missing_ok=True)
    return steered.run_id


def _decisions(store: Store, run_id: str) -> list[tuple[object, ...]]:
    return [
        (t.number, t.round, t.outcome, t.reason, t.value, t.changed_paths) for t in store.list_turns(run_id)
    ]


def _champion(store: Store, run_id: str) -> tuple[float | None, int | None]:
    run = store.get_run(run_id)
    return run.champion_value, run.champion_turn


def _tree(where: Path, store: Store, run_id: str) -> str:
    """The tree of the run's champion, as the PR branch holds it (``check_steered``)."""
    head = store.list_components(run_id)[0].head_sha
    clone = where / "bob"
    return git(clone, "rev-parse", f"{head}^{{tree}}")


# -- an honest round, a keep that does not reproduce, a restart -----------------------------------

MEASURE = """\
case "$PWD" in
  */confirm-*) echo "METRIC value=50" ;;
  *) echo "METRIC value=$(cat src/value.txt)" ;;
esac
"""
"""A measurement that does not reproduce: in a confirmation's directory it reads 50 whatever the
commit (a benchmark that depends on the machine it runs on, say)."""

FLAKY_SPEC = """
objective = "Lower the value"
turns = 2
[agent]
command = "sh -c 'echo 8 > src/value.txt; echo HYPOTHESIS: lower it'"
[sandbox]
mode = "none"
[metric]
command = "sh measure.sh"
name = "value"
samples = 1
warmups = 0
confidence = 0
[[component]]
name = "app"
repo = "."
mutable = ["src/**"]
"""


class Remote:
    """A controller's worker API over a real store with the subprocess broker and ``confirmations``."""

    def __init__(
        self, tmp_path: Path, store: Store, remote: RemoteRounds, confirmations: SubprocessConfirmations
    ) -> None:
        self.store = store
        self.remote = remote
        self.confirmations = confirmations
        settings = remote.settings

        def broker(_runner: object) -> SubprocessBroker:
            return SubprocessBroker(
                mint_worker_env=remote.mint_worker_env,
                remote_outcome=remote.remote_outcome,
                revoke=remote.revoke,
                root=tmp_path / "pods",
                environ={"PATH": os.environ["PATH"]},
                command=WORKER,
            )

        self.service = compose_service(settings, store, environ={}, forge_for=_no_forge, broker=broker)


def _no_forge(spec: object) -> object:
    raise AssertionError("these runs do not publish")


@pytest.fixture
def remote(tmp_path: Path, database_url: str) -> Iterator[Remote]:
    with Store.open(seed_migrated(database_url), upgrade=True) as store:
        settings = Settings(home=tmp_path / "home-remote", database_url=database_url)
        confirmations = SubprocessConfirmations(
            root=tmp_path / "confirmations", environ={"PATH": os.environ["PATH"]}, command=WORKER
        )
        rounds = RemoteRounds(
            settings, store, controller_url="http://unused", confirmations=lambda _run: confirmations
        )
        app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=rounds)
        with serve_in_thread(app) as url:
            rounds.controller_url = url
            try:
                yield Remote(tmp_path, store, rounds, confirmations)
            finally:
                confirmations.close()


def _run(service: RunService, spec_path: Path) -> str:
    run_id = service.create(load_spec(spec_path), spec_path.read_text(), spec_path, RunOptions())
    result = service.drive(run_id)
    assert result.status is RunStatus.COMPLETED, result.message
    return run_id


@SQLITE_ONLY
def test_an_honest_round_with_confirmations_decides_as_the_local_round(
    tmp_path: Path, database_url: str, remote: Remote
) -> None:
    """Every keep of the remote round waits for its confirmation and is confirmed (the knobs round's
    metric is deterministic), so the round decides exactly as the local one."""
    repo = make_repo(tmp_path / "app", {"conf.json": json.dumps({"a": 1}), "bench.py": BENCH})
    spec_path = repo / "crucible.toml"
    spec_path.write_text(KNOBS_SPEC)
    local = compose_service(
        Settings(home=tmp_path / "home-local", database_url=database_url),
        remote.store,
        environ=dict(os.environ),
        forge_for=_no_forge,
        broker=lambda runner: LocalBroker(runner, inline=True),
    )
    local_id, remote_id = _run(local, spec_path), _run(remote.service, spec_path)
    store = remote.store

    def decisions(run_id: str) -> list[tuple[object, ...]]:
        return [(t.number, t.outcome, t.reason, t.value, t.changed_paths) for t in store.list_turns(run_id)]

    assert decisions(remote_id) == decisions(local_id)
    kept = [t for t in store.list_turns(remote_id) if t.outcome is Outcome.ACCEPTED]
    assert kept, "the seed keeps at least one turn"
    for turn in kept:
        (confirmed,) = store.confirmations(remote_id, turn.round, turn.number)
        assert confirmed.outcome is not None and confirmed.outcome["confirmation"]["confirmed"] is True
        assert confirmed.job["confirm"]["candidate"] == turn.commits
    assert [t.number for t in store.list_turns(remote_id) if store.confirmations(remote_id, 0, t.number)] == [
        t.number for t in kept
    ], "only keeps are confirmed"
    local_run, remote_run = store.get_run(local_id), store.get_run(remote_id)
    assert (remote_run.champion_value, remote_run.champion_turn) == (
        local_run.champion_value,
        local_run.champion_turn,
    )


def test_a_keep_the_confirmation_does_not_reproduce_ends_rejected_and_the_round_goes_on(
    tmp_path: Path, remote: Remote
) -> None:
    repo = make_repo(tmp_path / "app", {"src/value.txt": "10\n", "measure.sh": MEASURE})
    spec_path = repo / "crucible.toml"
    spec_path.write_text(FLAKY_SPEC)
    run_id = _run(remote.service, spec_path)
    store = remote.store
    run = store.get_run(run_id)
    assert run.stop_reason is StopReason.MAX_TURNS, run
    assert run.champion_turn in (None, 0) and run.champion_value == 10.0, "the base stays the champion"
    turns = store.list_turns(run_id)
    assert [(t.outcome, t.reason) for t in turns] == [(Outcome.REJECTED, Reason.UNCONFIRMED)] * 2
    for turn in turns:
        assert turn.value == 8.0 and not turn.commits
        assert "claimed keep; the confirmation measured 50" in turn.detail, turn.detail
    assert store.list_components(run_id)[0].head_sha == git(repo, "rev-parse", "HEAD"), "nothing kept"


def test_a_restarted_controller_confirms_the_keep_sent_again(
    tmp_path: Path, database_url: str, remote: Remote
) -> None:
    """A keep is waiting on its confirmation when the controller is replaced: the new one (its own
    gate and launcher, the same database) finds the claim's live confirmation, cannot find its
    process, and launches it again with a fresh token; the keep sent again is confirmed and recorded,
    and the first confirmation's report is refused (its token was retired). The first one measures
    only once the successor recorded the keep (``release``), so the order is certain."""
    release = tmp_path / "release"
    measure = f"""\
case "$PWD" in */confirmations/*) for _ in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done ;; esac
echo METRIC value=$(cat src/value.txt)
"""
    repo = make_repo(tmp_path / "user", {"src/value.txt": "10\n", "measure.sh": measure})
    base = git(repo, "rev-parse", "HEAD")
    store = remote.store
    store.create_run(_new_run("r1", FLAKY_SPEC.replace("turns = 2", "turns = 1")))
    store.add_component(
        ComponentRecord(
            run_id="r1", name="app", repo=str(repo), base_ref="main", base_sha=base, head_sha=base, extra={}
        )
    )
    store.set_run_status("r1", RunStatus.RUNNING)
    store.start_turn("r1", 1, 0)
    job = RoundJob(run_id="r1", round=0, turns=1, first_turn=1, heads={"app": base})
    token = remote.remote.mint_worker_env(job)["CRUCIBLE_WORKER_TOKEN"]
    # The worker's commit, as a verified bundle (plain git plays the worker here).
    sha = _send_commit(remote, token, tmp_path / "worker", "r1", "8")
    decision = TurnDecision(Outcome.ACCEPTED, Reason.IMPROVED, value=8.0, commits={"app": sha})
    champion = ChampionUpdate(value=8.0, turn=1)
    payload = {"turn": 1, "round": 0, "outcome": "accepted", "reason": "improved", "value": 8.0}
    samples: list[Sample] = [
        (SampleArm.CHAMPION, 0, {"value": 10.0}, True),
        (SampleArm.CANDIDATE, 0, {"value": 8.0}, True),
    ]
    grant = store.worker_round_by_token(token_hash(token))
    assert grant is not None
    remote.remote.gate.wait_s = 0.5  # answer "confirming" at once: the first controller goes away
    with pytest.raises(ConfirmingError):
        remote.remote.decide_turn(
            grant,
            1,
            decision,
            champion=champion,
            component_heads={"app": sha},
            event=(EventKind.ACCEPTED, payload),
            samples=samples,
        )
    (first,) = store.confirmations("r1", 0, 1)
    assert first.outcome is None and first.revoked_at is None, "in flight"
    # The replacement: a new worker API on the same database, knowing no confirmation process.
    settings = Settings(home=tmp_path / "home-successor", database_url=database_url)
    successor_launcher = SubprocessConfirmations(
        root=tmp_path / "successor", environ={"PATH": os.environ["PATH"]}, command=WORKER
    )
    successor = RemoteRounds(
        settings, store, controller_url="http://unused", confirmations=lambda _run: successor_launcher
    )
    app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=successor)
    try:
        with serve_in_thread(app) as url:
            successor.controller_url = url
            with HttpLedger(url, token) as ledger:
                record = ledger.decide_turn(
                    "r1",
                    1,
                    decision,
                    champion=champion,
                    component_heads={"app": sha},
                    event=(EventKind.ACCEPTED, payload),
                    samples=samples,
                )
    finally:
        successor_launcher.close()
        release.touch()
    assert record.outcome is Outcome.ACCEPTED and record.commits == {"app": sha}
    grants = store.confirmations("r1", 0, 1)
    assert len(grants) == 2 and grants[0].revoked_at is not None and grants[0].outcome is None
    assert grants[1].outcome is not None and grants[1].outcome["confirmation"]["confirmed"] is True
    assert grants[0].job["confirm"] == grants[1].job["confirm"], "the same claim"
    assert store.get_run("r1").champion_value == 8.0
    # The first controller's confirmation, released now, has its report refused: its token is retired.
    (log,) = (tmp_path / "confirmations").glob("r1/confirm-*/worker.log")
    wait_until(
        lambda: "the token is revoked" in log.read_text(), what="the first confirmation's 401", timeout=60
    )
    assert store.confirmations("r1", 0, 1)[0].outcome is None


def _new_run(run_id: str, spec: str) -> NewRun:
    return NewRun(
        id=run_id,
        spec_text=spec,
        spec_fingerprint="fp",
        spec_path=None,
        objective="o",
        metric_name="value",
        direction="minimize",
        turns_planned=1,
    )


def _send_commit(remote: Remote, token: str, where: Path, run_id: str, value: str) -> str:
    where.mkdir(parents=True)
    base = f"{remote.remote.controller_url}/api/worker/runs/{run_id}"
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        start = where / "start.bundle"
        start.write_bytes(http.get("/components/app/bundle").content)
        git(where, "init", "-q", "app")
        clone = where / "app"
        git(clone, "config", "user.email", "w@example.com")
        git(clone, "config", "user.name", "W")
        git(clone, "fetch", "-q", str(start), f"refs/crucible/{run_id}/start/app:refs/heads/start")
        git(clone, "checkout", "-q", "start")
        head = git(clone, "rev-parse", "HEAD")
        (clone / "src" / "value.txt").write_text(f"{value}\n")
        git(clone, "commit", "-qam", "lower the value")
        sha = git(clone, "rev-parse", "HEAD")
        git(clone, "update-ref", f"refs/crucible/{run_id}/app", sha)
        out = where / "result.bundle"
        git(clone, "bundle", "create", "-q", str(out), f"refs/crucible/{run_id}/app", f"^{head}")
        sent = http.post("/bundle", params={"turn": 1}, content=out.read_bytes())
        assert sent.status_code == 200, sent.text
    return sha
