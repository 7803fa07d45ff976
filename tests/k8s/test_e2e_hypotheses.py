"""Warm hypothesis pods through the real control plane (ADR-0018, ADR-0034).

The run service drives a ``parallel = 3`` knobs round itself; its first turn starts three Jobs whose
pods the process node runs as ``python -m controller.cli.main worker`` with only the pod's environment
(a token for its slot). Each pod takes its index's hypothesis of every turn from the controller (with a
token scoped to that one hypothesis), measures it against the champion and reports it; the controller
decides the turn. Compared with the same run through the local broker, where the three run one after
another: the same decisions, the same hypotheses' reasons, the same trees.

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
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from kubernetes import client

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.api.worker_serve import serving
from controller.brokers.kubernetes.hypotheses import HypothesisPods
from controller.brokers.kubernetes.manifest import LABEL_TURN
from controller.brokers.local import LocalBroker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import EventKind, Reason, RunStatus, SampleArm, TurnPhase
from controller.services.control.service import RunService, Signals
from controller.services.remote.remote_rounds import RemoteRounds
from controller.services.views.specs import stored_spec
from controller.store import Store
from controller.store.migrate import make_engine
from controller.store.models import WorkerRoundRow
from controller.wiring import compose_service
from tests.api.sqlite_only import POSTGRES_ONLY, SQLITE_ONLY
from tests.conftest import git, make_repo
from tests.k8s.broker_harness import RESTRICTED
from tests.k8s.conftest import ControlPlane, wait_until
from tests.k8s.test_e2e_rounds import WORKER, _no_forge, open_once_adopted
from tests.support.fixtures import seed_migrated
from tests.worker.conftest import OPERATOR, _Control
from tests.worker.knobs_round import BENCH, KNOBS_SPEC

pytestmark = pytest.mark.slow

SPEC = (
    KNOBS_SPEC
    + """
[broker]
kind = "kubernetes"
parallel = 3
image = "crucible:test"
namespace = "{namespace}"
resources = {{ requests = {{ cpu = "10m", memory = "64Mi" }}, limits = {{ memory = "1Gi" }} }}
deadline = "10m"
"""
)


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
    """As ``test_e2e_rounds.metric_gate``: the first turn whose metric runs wait for ``Sides.gate``."""
    return None


@pytest.fixture
def speculative() -> bool:
    """Whether the pods take the next turn's hypotheses before a turn is decided (ADR-0051)."""
    return True


@pytest.fixture
def repo_files() -> dict[str, str]:
    """The repository's files besides the spec: the knobs round's."""
    return {"conf.json": json.dumps({"a": 1}), "bench.py": BENCH}


@pytest.fixture
def sides(
    metric_gate: int | None,
    speculative: bool,
    repo_files: dict[str, str],
    tmp_path: Path,
    database_url: str,
    control_plane: ControlPlane,
    namespace: Callable[..., str],
) -> Iterator[Sides]:
    ns = namespace(labels=RESTRICTED)
    files = dict(repo_files)
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
        # As ``crucible serve`` stops: the pods' long polls end first, so the server stops at once.
        with serving(app, on_stop=remote.slots.close) as url:
            remote.controller_url = url
            local = compose_service(
                local_settings,
                store,
                environ={},
                forge_for=_no_forge,
                broker=lambda runner: LocalBroker(runner, inline=True),
            )
            pods = HypothesisPods(
                control_plane.api,
                mint_slot_env=remote.mint_slot_env,
                slots=remote.slots,
                spec_for=lambda run_id: stored_spec(store, run_id).broker,
                command=WORKER,
                speculative=speculative,
            )
            service = compose_service(
                settings,
                store,
                environ={},
                forge_for=_no_forge,
                broker=lambda runner: LocalBroker(runner, inline=True),
                hypotheses=lambda _run_id: pods,
            )
            try:
                yield Sides(local, service, store, spec_path, ns, url, settings, gate)
            finally:
                gate.touch()  # no metric run of a pod the test deleted or cancelled waits on after it
                pods.close()


def _create(service: RunService, spec_path: Path) -> str:
    spec = load_spec(spec_path)
    return service.create(spec, spec_path.read_text(), spec_path, RunOptions())


def _decisions(store: Store, run_id: str) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for t in store.list_turns(run_id):
        out.append((t.number, t.outcome, t.reason, t.value, t.hypothesis, t.changed_paths))
        for h in store.list_hypotheses(run_id, t.number):
            out.append((t.number, h.index, h.reason, h.value, h.hypothesis))
    return out


@SQLITE_ONLY
def test_each_hypothesis_runs_in_its_own_pod_and_the_turns_decide_as_locally(
    sides: Sides, control_plane: ControlPlane
) -> None:
    local_id = _create(sides.local, sides.spec_path)
    assert sides.local.drive(local_id).status is RunStatus.COMPLETED
    remote_id = _create(sides.remote, sides.spec_path)
    result = sides.remote.drive(remote_id)
    assert result.status is RunStatus.COMPLETED, result.message
    store = sides.store
    assert _decisions(store, remote_id) == _decisions(store, local_id)
    turns = store.list_turns(remote_id)
    # Three values at a time, the walk is exhausted after two turns; the first keeps the best of three.
    assert [t.number for t in turns] == [1, 2] and turns[0].commits, "the seed keeps the first turn"
    tried = {(h.turn, h.index) for h in store.list_hypotheses(remote_id)}
    assert len(tried) == 5, "three hypotheses, then the two values left"
    local_run, remote_run = store.get_run(local_id), store.get_run(remote_id)
    assert (remote_run.champion_value, remote_run.champion_turn) == (
        local_run.champion_value,
        local_run.champion_turn,
    )
    local_clone = sides.local.settings.run_dir(local_id) / "arms" / "candidate" / "app"
    remote_clone = sides.remote.settings.run_dir(remote_id) / "arms" / "candidate" / "app"
    local_head = store.list_components(local_id)[0].head_sha
    remote_head = store.list_components(remote_id)[0].head_sha
    assert git(remote_clone, "rev-parse", f"{remote_head}^{{tree}}") == git(
        local_clone, "rev-parse", f"{local_head}^{{tree}}"
    )
    # One warm Job per index for the whole round, started in turn 1, no Job for the round itself; each
    # completes once the run no longer runs (its pod is told it is done).
    batch = client.BatchV1Api(control_plane.api)
    jobs = batch.list_namespaced_job(sides.namespace).items
    names = sorted(j.metadata.name for j in jobs)
    assert names == [f"crucible-{remote_id}-0-t1-h{i}" for i in range(3)]

    def complete() -> bool:
        found = batch.list_namespaced_job(sides.namespace).items
        return all(any(c.type == "Complete" for c in j.status.conditions or []) for j in found)

    wait_until(complete, what="every hypothesis Job complete")
    labels = {j.metadata.name: j.metadata.labels for j in jobs}
    assert labels[f"crucible-{remote_id}-0-t1-h1"]["crucible.dev/parallel-index"] == "1"
    assert labels[f"crucible-{remote_id}-0-t1-h1"]["crucible.dev/turn"] == "1"
    slots = [g for g in _grants(sides, remote_id) if "slot" in g]
    assert len(slots) == 3, "one slot token per pod, for the whole round"
    # Each pod's log says where each of its hypotheses' time went, in the parts the bench reads.
    core = client.CoreV1Api(control_plane.api)
    (pod,) = core.list_namespaced_pod(
        sides.namespace, label_selector=f"job-name=crucible-{remote_id}-0-t1-h1"
    ).items
    log = core.read_namespaced_pod_log(pod.metadata.name, sides.namespace)
    lines = [line.split(": ", 1) for line in log.splitlines() if line.startswith("slot 1 turn ")]
    assert [head for head, _ in lines] == ["slot 1 turn 1", "slot 1 turn 2"]
    for _, text in lines:
        parts = {name: float(value) for name, value in (p.split("=") for p in text.split())}
        names = ["waited", "job", "fetch", "context", "tried", "commands", "report", "finish"]
        assert list(parts) == names and all(v >= 0 for v in parts.values())
        assert parts["commands"] <= parts["tried"], "the commands are a part of trying it"


@SQLITE_ONLY
@pytest.mark.parametrize("metric_gate", [2])
def test_a_pod_deleted_mid_hypothesis_fails_that_hypothesis_and_the_turn_is_decided(
    sides: Sides, control_plane: ControlPlane
) -> None:
    run_id = _create(sides.remote, sides.spec_path)
    results: list[RunStatus] = []
    driver = threading.Thread(target=lambda: results.append(sides.remote.drive(run_id).status))
    driver.start()
    core = client.CoreV1Api(control_plane.api)
    victim = f"crucible-{run_id}-0-t1-h1"  # index 1's warm pod, started in turn 1

    def measuring_turn_two() -> bool:
        scopes = [g["hypothesis"] for g in _played(sides, run_id, 2)]
        return sum(h["index"] == 1 for h in scopes) == 2  # offered, taken

    wait_until(measuring_turn_two, what="index 1's pod took its hypothesis of turn 2", timeout=240)
    (pod,) = core.list_namespaced_pod(sides.namespace, label_selector=f"job-name={victim}").items
    core.delete_namespaced_pod(pod.metadata.name, sides.namespace, grace_period_seconds=0)
    sides.gate.touch()  # index 0 measures turn 2's hypothesis, the new pod turn 3's
    driver.join(timeout=300)
    assert not driver.is_alive()
    assert results == [RunStatus.COMPLETED], "the run goes on after a lost pod"
    turns = sides.store.list_turns(run_id)
    # The value the lost pod never measured is proposed again in a third turn.
    assert [t.number for t in turns] == [1, 2, 3]
    assert all(t.phase is TurnPhase.DECIDED for t in turns), "none left open"
    lost = {h.index: h for h in sides.store.list_hypotheses(run_id, 2)}
    assert lost[1].reason is Reason.LOST
    assert "pod_lost" in lost[1].detail, lost[1].detail
    assert sorted(lost) == [0, 1] and lost[0].value is not None, "the other was measured and decided"
    # The lost pod's slot got a new pod within turn 2, which ran index 1's hypothesis of turn 3.
    batch = client.BatchV1Api(control_plane.api)
    names = sorted(j.metadata.name for j in batch.list_namespaced_job(sides.namespace).items)
    assert f"crucible-{run_id}-0-t2-h1" in names, names
    assert sides.store.list_hypotheses(run_id, 3)[0].value is not None


# Its own waits add up past the default 300 s on a loaded CI machine (up to 240 s for turn 2's pods,
# then the dead controller's lease, then turn 2's measurements): alone it takes about 45 s.
@POSTGRES_ONLY
@pytest.mark.timeout(900)
@pytest.mark.parametrize("metric_gate", [2])
def test_a_restarted_controller_adopts_the_hypothesis_pods_and_decides_each_turn_once(
    sides: Sides, control_plane: ControlPlane, database_url: str
) -> None:
    run_id = _create(sides.remote, sides.spec_path)
    driver = [sys.executable, str(Path(__file__).with_name("controller_proc.py")), database_url]
    driver += [str(sides.settings.home), sides.api_url, str(control_plane.kubeconfig), run_id]
    driver.append(json.dumps(WORKER))
    batch = client.BatchV1Api(control_plane.api)

    def turn_two_in_pods() -> bool:
        return len(_played(sides, run_id, 2)) == 4  # both of turn 2 offered (a grant each) and taken

    with (sides.settings.home.parent / "controller.log").open("wb") as log:
        first = subprocess.Popen(driver, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(turn_two_in_pods, what="turn 2's hypotheses taken by the pods", timeout=240)
        finally:
            first.kill()  # the controller dies mid-turn; the hypothesis pods run on
            first.wait()
    assert sides.store.get_turn(run_id, 2).phase is TurnPhase.STARTED
    before = _uids(sides, control_plane, 1)
    assert len(before) == 3, "turn 1's three pods, warm for turn 2's two hypotheses"
    dead = sides.store.get_run(run_id).lease_owner
    opener = threading.Thread(target=open_once_adopted, args=(sides.store, run_id, dead, sides.gate))
    opener.start()

    result = sides.remote.resume(run_id)  # waits out the dead controller's lease, then adopts

    opener.join()
    assert result.status is RunStatus.COMPLETED, result.message
    turns = sides.store.list_turns(run_id)
    assert [t.number for t in turns] == [1, 2] and all(t.phase is TurnPhase.DECIDED for t in turns)
    decided = [e for e in sides.store.list_events(run_id) if e.kind in _DECIDED]
    assert sorted(e.payload["turn"] for e in decided) == [1, 2], "no turn decided twice"
    assert {h.index for h in sides.store.list_hypotheses(run_id, 2)} == {0, 1}
    assert all(h.value is not None for h in sides.store.list_hypotheses(run_id, 2)), "both measured"
    # The resumed controller started no second pod: the warm pods of turn 1 are the ones adopted.
    jobs = [j.metadata.name for j in batch.list_namespaced_job(sides.namespace).items]
    assert sorted(jobs) == [f"crucible-{run_id}-0-t1-h{i}" for i in range(3)]
    assert _uids(sides, control_plane, 1) == before, "the cut-off turn's Jobs are the ones adopted"


_DECIDED = {EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE}


def _grants(sides: Sides, run_id: str) -> list[dict[str, Any]]:
    """The jobs of every worker grant of the run's round 0, read from the database (the store keeps
    no listing of them: a grant is found by its token's hash only)."""
    engine = make_engine(sides.settings.database_url)
    try:
        with engine.connect() as db:
            query = sa.select(WorkerRoundRow.job).where(WorkerRoundRow.run_id == run_id)
            return [dict(job) for job in db.scalars(query)]
    finally:
        engine.dispose()


def _played(sides: Sides, run_id: str, turn: int) -> list[dict[str, Any]]:
    """The grants of hypotheses of ``turn`` once it started, against the champion it is played
    against: not those a free pod took ahead of it and the turn before voided (ADR-0051)."""
    if not any(t.number == turn for t in sides.store.list_turns(run_id)):
        return []
    heads = {c.name: c.head_sha for c in sides.store.list_components(run_id)}
    grants = [g for g in _grants(sides, run_id) if g.get("hypothesis", {}).get("turn") == turn]
    return [g for g in grants if g["heads"] == heads]


def _uids(sides: Sides, control_plane: ControlPlane, turn: int) -> dict[str, str]:
    jobs = client.BatchV1Api(control_plane.api).list_namespaced_job(sides.namespace).items
    return {j.metadata.name: j.metadata.uid for j in jobs if j.metadata.labels[LABEL_TURN] == str(turn)}


@SQLITE_ONLY
@pytest.mark.parametrize("metric_gate", [1])
def test_cancelling_the_run_deletes_the_turns_pods_and_decides_the_turn(
    sides: Sides, control_plane: ControlPlane
) -> None:
    run_id = _create(sides.remote, sides.spec_path)
    signals = Signals()
    results: list[RunStatus] = []
    drive = lambda: results.append(sides.remote.drive(run_id, signals=signals).status)  # noqa: E731
    driver = threading.Thread(target=drive)
    driver.start()
    core = client.CoreV1Api(control_plane.api)

    def all_running() -> bool:
        # The pods start with the baseline (ADR-0040): the turn must have started too.
        pods = core.list_namespaced_pod(sides.namespace).items
        started = any(t.number == 1 for t in sides.store.list_turns(run_id))
        return started and sum(p.status.phase == "Running" for p in pods) == 3

    wait_until(all_running, what="turn 1 started, its three hypothesis pods running", timeout=240)
    signals.cancel.set()
    driver.join(timeout=240)
    assert not driver.is_alive()
    assert results == [RunStatus.CANCELLED]
    (turn,) = sides.store.list_turns(run_id)
    assert turn.phase is TurnPhase.DECIDED, "the cut-off turn is decided, once"
    cancelled = [h for h in sides.store.list_hypotheses(run_id, 1) if h.reason is Reason.CANCELLED]
    assert cancelled, "the hypotheses still running when the run was cancelled"
    batch = client.BatchV1Api(control_plane.api)
    wait_until(lambda: not batch.list_namespaced_job(sides.namespace).items, what="the Jobs deleted")
    assert not [p for p in core.list_namespaced_pod(sides.namespace).items if p.status.phase == "Running"]


GUARDED = """
[[metric.guard]]
name = "g"
direction = "minimize"
tolerance = "50%"
"""


@SQLITE_ONLY
def test_a_guarded_keep_after_the_champion_moved_measures_the_base_in_its_own_pod(
    sides: Sides, control_plane: ControlPlane
) -> None:
    repo = sides.spec_path.parent
    (repo / "bench.py").write_text(BENCH + 'print("METRIC g=1")\n')
    text = sides.spec_path.read_text().replace("parallel = 3", "parallel = 2") + GUARDED
    sides.spec_path.write_text(text)
    git(repo, "commit", "-q", "-am", "a guard")
    local_id = _create(sides.local, sides.spec_path)
    assert sides.local.drive(local_id).status is RunStatus.COMPLETED
    remote_id = _create(sides.remote, sides.spec_path)
    result = sides.remote.drive(remote_id)
    assert result.status is RunStatus.COMPLETED, result.message
    assert _decisions(sides.store, remote_id) == _decisions(sides.store, local_id)
    kept = [t for t in sides.store.list_turns(remote_id) if t.commits]
    assert len(kept) >= 2, "the walk keeps again after the champion moved from the base"
    second = next(h for h in sides.store.list_hypotheses(remote_id, kept[1].number) if h.commits)
    assert any(arm is SampleArm.BASE for arm, _i, _v, _ok in second.samples), "measured in its pod"
    first = next(h for h in sides.store.list_hypotheses(remote_id, kept[0].number) if h.commits)
    assert not any(arm is SampleArm.BASE for arm, _i, _v, _ok in first.samples), "base = champion then"
