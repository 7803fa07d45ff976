"""Rounds through the real control plane with the real ``crucible worker`` (ADR-0015, ADR-0014).

The run service drives the run with ``KubernetesBroker``: each round is a Job whose pod the process node
runs as ``python -m controller.cli.main worker`` on this host, with only the pod's environment (the
worker's variables, its token from the round's Secret). The worker reaches the controller's app (its
worker routes) over HTTP, as a pod reaches the controller's Service. Compared with the same run through
the local broker: the same decisions, the same trees.

One database each (issue 23): PostgreSQL where a killed controller and the one taking over share
it (as replicas do), SQLite elsewhere; what these runs store is tested on both databases in
``tests/worker``, ``tests/store`` and ``tests/ledger``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.brokers.kubernetes.broker import KubernetesBroker
from controller.brokers.local import LocalBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import EventKind, Outcome, Reason, RunStatus, StopReason, TurnPhase
from controller.domain.errors import CrucibleError
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.control.service import RunService
from controller.services.remote.remote_rounds import RemoteRounds
from controller.services.views.specs import stored_spec
from controller.store import Store, TurnRecord
from controller.wiring import compose_service
from tests.api.sqlite_only import POSTGRES_ONLY, SQLITE_ONLY
from tests.conftest import git, make_repo
from tests.forgekit import app_forge
from tests.k8s.broker_harness import RESTRICTED
from tests.k8s.conftest import ControlPlane, wait_until
from tests.support.fixtures import seed_migrated
from tests.worker.conftest import OPERATOR, _Control
from tests.worker.knobs_round import BENCH, KNOBS_SPEC
from tests.worker.steered_round import check_steered, run_steered

pytestmark = pytest.mark.slow

WORKER = (sys.executable, "-m", "controller.cli.main", "worker")

BROKER_TABLE = """
[broker]
kind = "kubernetes"
image = "crucible:test"
namespace = "{namespace}"
resources = {{ requests = {{ cpu = "10m", memory = "64Mi" }}, limits = {{ memory = "1Gi" }} }}
deadline = "10m"
"""
SPEC = KNOBS_SPEC + BROKER_TABLE


@dataclass
class Sides:
    local: RunService
    remote: RunService
    store: Store
    spec_path: Path
    namespace: str
    api_url: str
    settings: Settings
    gate: Path  # the metric runs of turns from ``metric_gate`` on wait until it exists


@pytest.fixture
def metric_gate() -> int | None:
    """The first turn whose metric runs wait for ``Sides.gate`` (``knobs_round``); None: none waits.
    A test that must catch a round mid-way holds it there, and opens the gate once it has."""
    return None


@pytest.fixture
def sides(
    metric_gate: int | None,
    tmp_path: Path,
    database_url: str,
    control_plane: ControlPlane,
    namespace: Callable[..., str],
) -> Iterator[Sides]:
    ns = namespace(labels=RESTRICTED)
    files = {"conf.json": json.dumps({"a": 1}), "bench.py": BENCH}
    gate = tmp_path / "gate-open"
    if metric_gate is not None:
        files["gate.txt"] = f"{metric_gate} {gate}"
    repo = make_repo(tmp_path / "app", files)
    spec_path = repo / "crucible.toml"
    spec_path.write_text(SPEC.format(namespace=ns))
    git(repo, "add", "crucible.toml")
    git(repo, "commit", "-q", "-m", "spec")
    with Store.open(seed_migrated(database_url), upgrade=True) as store:
        local_settings = Settings(home=tmp_path / "home-local", database_url=database_url)
        settings = Settings(home=tmp_path / "home-remote", database_url=database_url, lease_ttl_s=2.0)
        remote = RemoteRounds(settings, store, controller_url="http://unused")
        app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=remote)
        with serve_in_thread(app) as url:
            remote.controller_url = url
            local = compose_service(
                local_settings,
                store,
                environ={},
                forge_for=_no_forge,
                broker=lambda runner: LocalBroker(runner, inline=True),
            )
            brokers: list[KubernetesBroker] = []

            def kubernetes(_runner: object) -> KubernetesBroker:
                broker = KubernetesBroker(
                    control_plane.api,
                    mint_worker_env=remote.mint_worker_env,
                    remote_outcome=remote.remote_outcome,
                    revoke=remote.revoke,
                    spec_for=lambda run_id: stored_spec(store, run_id).broker,
                    command=WORKER,
                )
                brokers.append(broker)
                return broker

            service = compose_service(settings, store, environ={}, forge_for=_no_forge, broker=kubernetes)
            try:
                yield Sides(local, service, store, spec_path, ns, url, settings, gate)
            finally:
                gate.touch()  # no metric run of a pod the test deleted waits on after it
                for broker in brokers:
                    broker.close()


def _no_forge(spec: object) -> object:
    raise AssertionError("these runs do not publish")


def _run(service: RunService, spec_path: Path) -> str:
    spec = load_spec(spec_path)
    run_id = service.create(spec, spec_path.read_text(), spec_path, RunOptions())
    result = service.drive(run_id)
    assert result.status is RunStatus.COMPLETED, result.message
    return run_id


def _decisions(turns: list[TurnRecord]) -> list[tuple[object, ...]]:
    return [(t.number, t.round, t.outcome, t.reason, t.value, t.hypothesis, t.changed_paths) for t in turns]


@SQLITE_ONLY
def test_a_round_through_the_control_plane_decides_and_commits_as_the_local_round(
    sides: Sides, control_plane: ControlPlane
) -> None:
    local_id = _run(sides.local, sides.spec_path)
    remote_id = _run(sides.remote, sides.spec_path)
    store = sides.store
    local_turns, remote_turns = store.list_turns(local_id), store.list_turns(remote_id)
    assert len(remote_turns) == 4
    assert _decisions(remote_turns) == _decisions(local_turns)
    assert any(t.commits for t in remote_turns), "the seed keeps at least one turn"
    local_run, remote_run = store.get_run(local_id), store.get_run(remote_id)
    assert (remote_run.stop_reason, remote_run.champion_value, remote_run.champion_turn) == (
        local_run.stop_reason,
        local_run.champion_value,
        local_run.champion_turn,
    )
    assert remote_run.stop_reason is StopReason.MAX_TURNS
    local_clone = sides.local.settings.run_dir(local_id) / "arms" / "candidate" / "app"
    remote_clone = sides.remote.settings.run_dir(remote_id) / "arms" / "candidate" / "app"
    local_head = store.list_components(local_id)[0].head_sha
    remote_head = store.list_components(remote_id)[0].head_sha
    assert git(remote_clone, "rev-parse", f"{remote_head}^{{tree}}") == git(
        local_clone, "rev-parse", f"{local_head}^{{tree}}"
    )
    # It ran as a Job in the namespace, one for the round, and completed.
    (job,) = client.BatchV1Api(control_plane.api).list_namespaced_job(sides.namespace).items
    assert job.metadata.name == f"crucible-{remote_id}-0"
    assert any(c.type == "Complete" and c.status == "True" for c in job.status.conditions)


def _kill_the_controller_mid_round(sides: Sides, control_plane: ControlPlane, database_url: str) -> str:
    """A run driven by a controller process that is SIGKILLed once a turn was decided (the next one
    waits at the metric's gate, so the round's Job runs on); its id."""
    spec = load_spec(sides.spec_path)
    run_id = sides.remote.create(spec, sides.spec_path.read_text(), sides.spec_path, RunOptions())
    driver = [sys.executable, str(Path(__file__).with_name("controller_proc.py")), database_url]
    driver += [
        str(sides.settings.home),
        sides.api_url,
        str(control_plane.kubeconfig),
        run_id,
        json.dumps(WORKER),
    ]
    with (sides.settings.home.parent / "controller.log").open("wb") as log:
        first = subprocess.Popen(driver, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(
                lambda: any(t.outcome is not None for t in sides.store.list_turns(run_id)),
                what="the first turn decided through the worker",
                timeout=180,
            )
        finally:
            first.kill()  # the controller dies mid-round; its Job runs on
            first.wait()
    assert _running_jobs(control_plane, sides.namespace) == 1
    return run_id


@POSTGRES_ONLY
@pytest.mark.parametrize("metric_gate", [2])
def test_a_restarted_controller_adopts_the_running_job_and_records_each_turn_once(
    sides: Sides, control_plane: ControlPlane, database_url: str
) -> None:
    run_id = _kill_the_controller_mid_round(sides, control_plane, database_url)
    dead = sides.store.get_run(run_id).lease_owner
    opener = threading.Thread(target=open_once_adopted, args=(sides.store, run_id, dead, sides.gate))
    opener.start()

    result = sides.remote.resume(run_id)  # waits out the dead controller's lease, then adopts

    opener.join()
    assert result.status is RunStatus.COMPLETED, result.message
    turns = sides.store.list_turns(run_id)
    assert [t.number for t in turns] == [1, 2, 3, 4], "each turn decided once"
    assert all(t.outcome is not None for t in turns)
    jobs = client.BatchV1Api(control_plane.api).list_namespaced_job(sides.namespace).items
    assert [j.metadata.name for j in jobs] == [f"crucible-{run_id}-0"], "no second Job"
    decided = [e for e in sides.store.list_events(run_id) if e.kind in _DECIDED]
    assert sorted(e.payload["turn"] for e in decided) == [1, 2, 3, 4], "no turn recorded twice"


@POSTGRES_ONLY
@pytest.mark.parametrize("metric_gate", [2])
def test_cancelling_a_run_whose_controller_died_deletes_its_rounds_job(
    sides: Sides, control_plane: ControlPlane, database_url: str
) -> None:
    run_id = _kill_the_controller_mid_round(sides, control_plane, database_url)
    wait_until(
        lambda: (sides.store.get_run(run_id).lease_expires_at or datetime.now(UTC)) < datetime.now(UTC),
        what="the dead controller's lease to run out",
    )

    message = sides.remote.cancel(run_id)

    assert message == "cancelled; its round 0 was stopped"
    assert sides.store.get_run(run_id).status is RunStatus.CANCELLED
    wait_until(
        lambda: not client.BatchV1Api(control_plane.api).list_namespaced_job(sides.namespace).items,
        what="the round's Job deleted",
    )


def open_once_adopted(store: Store, run_id: str, dead: str | None, gate: Path) -> None:
    """Open the metric's ``gate`` once a controller other than ``dead`` holds the run's lease: what it
    adopts is still running (its metric waits at the gate), as what a controller died in the middle
    of is."""
    try:
        wait_until(
            lambda: store.get_run(run_id).lease_owner not in (None, dead),
            what="the new controller's lease",
            timeout=120,
        )
    finally:
        gate.touch()


_DECIDED = {EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE}


def _running_jobs(control_plane: ControlPlane, ns: str) -> int:
    jobs = client.BatchV1Api(control_plane.api).list_namespaced_job(ns).items
    return len([j for j in jobs if not j.status.conditions])


def _delete_pod_mid_turn(sides: Sides, control_plane: ControlPlane, run_id: str) -> int:
    """Wait for a turn after the first to start in the round's first pod (its metric waits at the
    gate), delete that pod at once; the number of the turn it cut off."""
    wait_until(
        lambda: any(t.phase is TurnPhase.STARTED and t.number >= 2 for t in sides.store.list_turns(run_id)),
        what="a turn started after the first was decided",
        timeout=180,
    )
    (started,) = [t for t in sides.store.list_turns(run_id) if t.phase is TurnPhase.STARTED]
    core = client.CoreV1Api(control_plane.api)
    (pod,) = core.list_namespaced_pod(sides.namespace, label_selector=f"job-name=crucible-{run_id}-0").items
    # No grace period: the worker is killed before it can report (a kubelet's SIGTERM with a grace
    # period lets it cancel the turn and report that itself).
    core.delete_namespaced_pod(pod.metadata.name, sides.namespace, grace_period_seconds=0)
    return started.number


def _drive_in_thread(service: RunService, run_id: str) -> tuple[threading.Thread, list[object]]:
    results: list[object] = []

    def drive() -> None:
        try:
            results.append(service.drive(run_id))
        except CrucibleError as exc:
            results.append(exc)

    driver = threading.Thread(target=drive)
    driver.start()
    return driver, results


@SQLITE_ONLY
@pytest.mark.parametrize("metric_gate", [2])
def test_a_pod_deleted_mid_turn_fails_that_turn_naming_why_and_the_run_goes_on(
    sides: Sides, control_plane: ControlPlane
) -> None:
    spec = load_spec(sides.spec_path)
    run_id = sides.remote.create(spec, sides.spec_path.read_text(), sides.spec_path, RunOptions())
    driver, results = _drive_in_thread(sides.remote, run_id)
    cut_number = _delete_pod_mid_turn(sides, control_plane, run_id)
    sides.gate.touch()  # the relaunched attempt's turns measure at once
    driver.join(timeout=300)
    assert not driver.is_alive()

    (result,) = results
    assert not isinstance(result, BaseException), result
    assert result.status is RunStatus.COMPLETED and result.stop_reason is StopReason.MAX_TURNS, result.message
    turns = sides.store.list_turns(run_id)
    assert [t.number for t in turns] == [1, 2, 3, 4], "the budget's turns, each once"
    assert all(t.phase is TurnPhase.DECIDED for t in turns), "none left open"
    (cut,) = [t for t in turns if t.outcome is Outcome.FAILED]
    assert cut.number == cut_number
    assert cut.reason is Reason.LOST and (cut.detail or "").startswith("pod_lost: ")
    assert any(t.number > cut_number and t.outcome is not None for t in turns), "later turns decided"
    (relaunched,) = sides.store.list_events(run_id, kinds=[EventKind.RELAUNCHED])
    assert relaunched.payload["round"] == 0 and str(relaunched.payload["error"]).startswith("pod_lost: ")
    # The remaining turns ran as attempt 1, in a Job of its own; the lost attempt's Job failed.
    jobs = {
        j.metadata.name: j
        for j in client.BatchV1Api(control_plane.api).list_namespaced_job(sides.namespace).items
    }
    assert set(jobs) == {f"crucible-{run_id}-0", f"crucible-{run_id}-0-a1"}
    assert _condition(jobs[f"crucible-{run_id}-0"]) == "Failed"
    assert _condition(jobs[f"crucible-{run_id}-0-a1"]) == "Complete"
    # The outcome came from the second grant (minting it revoked the first: test_tokens).
    outcome = sides.store.worker_outcome(run_id, 0)
    assert outcome is not None and outcome.attempt == 2 and outcome.revoked_at is not None


@SQLITE_ONLY
@pytest.mark.parametrize("metric_gate", [2])
def test_a_pod_lost_beyond_broker_max_relaunches_fails_the_run_naming_the_key(
    sides: Sides, control_plane: ControlPlane
) -> None:
    text = sides.spec_path.read_text().replace('deadline = "10m"', 'deadline = "10m"\nmax_relaunches = 0')
    sides.spec_path.write_text(text)
    spec = load_spec(sides.spec_path)
    run_id = sides.remote.create(spec, text, sides.spec_path, RunOptions())
    driver, results = _drive_in_thread(sides.remote, run_id)
    _delete_pod_mid_turn(sides, control_plane, run_id)
    driver.join(timeout=180)
    assert not driver.is_alive()

    (error,) = results
    assert isinstance(error, CrucibleError)
    assert str(error).startswith("pod_lost: ") and "broker.max_relaunches = 0" in str(error)
    cut = [t for t in sides.store.list_turns(run_id) if t.outcome is Outcome.FAILED]
    assert cut and cut[-1].reason is Reason.LOST
    assert all(t.phase is TurnPhase.DECIDED for t in sides.store.list_turns(run_id)), "none left open"
    assert not sides.store.list_events(run_id, kinds=[EventKind.RELAUNCHED])


def _condition(job: object) -> str | None:
    conditions = getattr(getattr(job, "status", None), "conditions", None) or []
    done = [c.type for c in conditions if c.type in ("Complete", "Failed") and c.status == "True"]
    return done[0] if done else None


@SQLITE_ONLY
def test_a_steered_refinement_round_runs_in_a_pod_and_lands_on_the_same_pr(
    tmp_path: Path, control_plane: ControlPlane, namespace: Callable[..., str], database_url: str
) -> None:
    """Round 0 and the steered round 1 each run as a Job whose pod runs the real worker (ADR-0019)."""
    ns = namespace(labels=RESTRICTED)
    tail = BROKER_TABLE.format(namespace=ns)
    brokers: list[KubernetesBroker] = []

    def kubernetes(remote: RemoteRounds, mint: Callable[[RoundJob], dict[str, str]]) -> KubernetesBroker:
        broker = KubernetesBroker(
            control_plane.api,
            mint_worker_env=mint,
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            spec_for=lambda run_id: stored_spec(remote.store, run_id).broker,
            command=WORKER,
        )
        brokers.append(broker)
        return broker

    with app_forge(tmp_path) as forge:
        try:
            steered = run_steered(tmp_path, forge, database_url, kubernetes, spec_tail=tail)
        finally:
            for broker in brokers:
                broker.close()
        check_steered(steered, tmp_path, forge, database_url)
    jobs = client.BatchV1Api(control_plane.api).list_namespaced_job(ns).items
    names = sorted(j.metadata.name for j in jobs)
    assert names == [f"crucible-{steered.run_id}-0", f"crucible-{steered.run_id}-1"]
    assert all(_condition(j) == "Complete" for j in jobs)


# Round 1's first attempt waits (its pod is deleted meanwhile); the relaunched attempt goes on.
SLOW_REVIEW_AGENT = """\
if [ "$CRUCIBLE_ROUND" = "0" ]; then
  echo 8 > src/value.txt
  echo "HYPOTHESIS: lower the value"
elif [ ! -e {gate}/first ]; then
  touch {gate}/first
  for _ in $(seq 1200); do [ -e {gate}/release ] && exit 1; sleep 0.1; done
else
  grep '^> ' "$CRUCIBLE_CANDIDATE" > src/addressed.txt
  echo "HYPOTHESIS: address the review"
fi
"""


@SQLITE_ONLY
def test_a_refinement_rounds_pod_deleted_mid_turn_is_relaunched_and_the_round_lands(
    tmp_path: Path, control_plane: ControlPlane, namespace: Callable[..., str], database_url: str
) -> None:
    ns = namespace(labels=RESTRICTED)
    gate = tmp_path / "gate"
    gate.mkdir()
    core = client.CoreV1Api(control_plane.api)
    brokers: list[KubernetesBroker] = []

    def kubernetes(remote: RemoteRounds, mint: Callable[[RoundJob], dict[str, str]]) -> KubernetesBroker:
        broker = KubernetesBroker(
            control_plane.api,
            mint_worker_env=mint,
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            spec_for=lambda run_id: stored_spec(remote.store, run_id).broker,
            command=WORKER,
        )
        brokers.append(broker)
        return broker

    def delete_round_1s_pod(run_id: str, _signals: object) -> None:
        wait_until(lambda: (gate / "first").exists(), what="round 1's agent started", timeout=180)
        (pod,) = core.list_namespaced_pod(ns, label_selector=f"job-name=crucible-{run_id}-1").items
        core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)

    # The process node kills the pod's worker, not the agent in its own session (a container
    # runtime would): the released agent of the deleted pod exits at once.
    with app_forge(tmp_path) as forge:
        try:
            steered = run_steered(
                tmp_path,
                forge,
                database_url,
                kubernetes,
                spec_tail=BROKER_TABLE.format(namespace=ns),
                agent=SLOW_REVIEW_AGENT.format(gate=gate),
                after_steer=delete_round_1s_pod,
            )
        finally:
            (gate / "release").touch()
            for broker in brokers:
                broker.close()
        check_steered(
            steered,
            tmp_path,
            forge,
            database_url,
            launched=((0, 0), (1, 0), (1, 1)),
            outcomes=(Outcome.FAILED, Outcome.ACCEPTED),
        )
    with Store.open(database_url) as store:
        cut = [t for t in store.list_turns(steered.run_id) if t.outcome is Outcome.FAILED]
        assert [(t.round, t.reason) for t in cut] == [(1, Reason.LOST)]
        (relaunched,) = store.list_events(steered.run_id, kinds=[EventKind.RELAUNCHED])
        assert relaunched.payload["round"] == 1
    names = sorted(
        j.metadata.name for j in client.BatchV1Api(control_plane.api).list_namespaced_job(ns).items
    )
    assert names == [f"crucible-{steered.run_id}-{n}" for n in ("0", "1", "1-a1")]
