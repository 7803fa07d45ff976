"""A watching run whose steered refinement round goes through a remote broker: shared by the
subprocess-broker test (``tests/worker/test_refinement.py``) and the control-plane one
(``tests/k8s/test_e2e_rounds.py``), so both check the same round the same way (ADR-0019).

The run publishes a draft PR on the local forge and watches feedback; an operator's steer starts round
1. The controller begins it (feedback consumed, PR refreshed), the worker fetches the round's feedback
through its own route, plays the turn with the steer quoted in CANDIDATE.md (the agent commits the
quoted lines), sends the kept commit as a verified bundle, and the controller pushes it onto the same
PR branch and ends the round.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controller.api.app import create_app
from controller.api.auth import ApiTokens
from controller.brokers.base import Broker
from controller.config.options import RunOptions
from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import EventKind, Outcome, RunPhase, RunStatus, StopReason
from controller.domain.jobs import RoundJob
from controller.localforge.server import serve_in_thread
from controller.services.control.service import Signals
from controller.services.execution.context import Detached
from controller.services.execution.loop import LoopResult
from controller.services.feedback.publish import branch_name
from controller.services.remote.keep_gate import LauncherFor
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import Store
from controller.wiring import Mode, build, compose_service
from tests.conftest import git
from tests.forgekit import (
    REVIEW_AGENT,
    TOKENS,
    AppForge,
    clone_as,
    review_round_spec,
    write_agent,
    write_spec,
)
from tests.k8s.conftest import wait_until
from tests.support.fixtures import seed_migrated
from tests.worker.conftest import OPERATOR, _Control

STEER = "please keep the value file tidy"
WORKER = (sys.executable, "-m", "controller.cli.main", "worker")

MakeBroker = Callable[[RemoteRounds, Callable[[RoundJob], dict[str, str]]], Broker]
"""The remote broker under test, given the controller's side and the ``mint_worker_env`` to use."""


@dataclass
class Steered:
    run_id: str
    result: LoopResult | BaseException
    launched: list[tuple[int, int]]  # (round, attempt) of every worker token minted


def run_steered(
    tmp_path: Path,
    forge: AppForge,
    database_url: str,
    make_broker: MakeBroker,
    spec_tail: str = "",
    *,
    agent: str = REVIEW_AGENT,
    after_steer: Callable[[str, Signals], None] | None = None,
    interleave: bool = True,
    confirmations: LauncherFor | None = None,
) -> Steered:
    """Drive a watching run through ``make_broker``'s broker, steer it once it watches, to its end;
    ``after_steer(run_id, signals)`` runs once the steer is stored (a test that interferes with the
    round). A drive detached by the signals (SIGTERM) is resumed at once, as a successor would.
    ``confirmations``: the launcher of confirmations of claimed keeps (ADR-0043), None for none."""
    seed_migrated(database_url)  # the run is not about migrations (tests/store runs them)
    environ = {
        **os.environ,
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_DATABASE_URL": database_url,
        "CRUCIBLE_GITHUB_TOKEN": TOKENS["alice"],
        "CRUCIBLE_FORGE_WRITE_INTERVAL": "0",
        # As an operator configures a controller that publishes to the local forge (serve mode).
        "CRUCIBLE_FORGE_HOSTS": forge.handle.api_url,
        "CRUCIBLE_ALLOW_UNSANDBOXED": "1",
        "CRUCIBLE_OWN_LOGINS": "alice",
    }
    root = build(environ, settings=Settings.from_env(environ), mode=Mode.SERVE)
    settings = root.settings
    spec_text = review_round_spec(
        write_agent(tmp_path, agent), forge.handle.api_url, max_rounds=1, interleave=interleave
    )
    spec_text += spec_tail
    launched: list[tuple[int, int]] = []
    results: list[LoopResult | BaseException] = []
    try:
        with Store.open(database_url, upgrade=True) as store:
            remote = RemoteRounds(
                settings,
                store,
                controller_url="http://unused",
                hand_over=lambda run: RunOptions.stored(store.get_run(run).options).watch_feedback,
                confirmations=confirmations,
            )
            app = create_app(settings, store, ApiTokens(OPERATOR), _Control(), remote=remote)
            with serve_in_thread(app) as url:
                remote.controller_url = url

                def mint(job: RoundJob) -> dict[str, str]:
                    launched.append((job.round, job.attempt))
                    return remote.mint_worker_env(job)

                service = compose_service(
                    settings,
                    store,
                    environ=environ,
                    forge_for=root.forges.for_spec,
                    broker=lambda _runner: make_broker(remote, mint),
                )
                spec_path = write_spec(tmp_path, spec_text)
                options = RunOptions(publish_prs=True, watch_feedback=True)
                run_id = service.create(load_spec(spec_path), spec_text, spec_path, options)

                signals = Signals()

                def drive() -> None:
                    try:
                        try:
                            results.append(service.drive(run_id, signals=signals))
                        except Detached:
                            results.append(service.resume(run_id))
                    except Exception as exc:  # the caller's assertion shows it
                        results.append(exc)

                driver = threading.Thread(target=drive)
                driver.start()
                wait_until(
                    lambda: store.get_run(run_id).phase is RunPhase.WATCHING or not driver.is_alive(),
                    what="the run to watch feedback",
                    timeout=180,
                )
                assert driver.is_alive(), results
                service.steer(run_id, STEER)
                if after_steer is not None:
                    after_steer(run_id, signals)
                driver.join(timeout=300)
                assert not driver.is_alive(), "the steered round and the stop"
    finally:
        root.close()
    (result,) = results
    return Steered(run_id, result, launched)


def check_steered(
    steered: Steered,
    tmp_path: Path,
    forge: AppForge,
    database_url: str,
    *,
    launched: tuple[tuple[int, int], ...] = ((0, 0), (1, 0)),
    outcomes: tuple[Outcome, ...] = (Outcome.ACCEPTED,),
) -> None:
    """Both rounds ran in the worker (``launched``: round and attempt of each token); round 1's turns
    ended as ``outcomes``; the refined commit is on the same PR branch; the round's record is whole
    (started and finished once, kept, the worker's outcome accepted)."""
    result, run_id = steered.result, steered.run_id
    assert isinstance(result, LoopResult), result
    assert result.status is RunStatus.COMPLETED and result.stop_reason is StopReason.MAX_ROUNDS, result
    assert steered.launched == list(launched), f"every round went to the worker: {steered.launched}"
    with Store.open(database_url) as store:
        turns = store.list_turns(run_id)
        assert [(t.round, t.outcome) for t in turns] == [
            (0, Outcome.ACCEPTED),
            *((1, outcome) for outcome in outcomes),
        ], [(t.number, t.round, t.outcome, t.reason, t.detail) for t in turns]
        reported = store.worker_outcome(run_id, 1)
        assert reported is not None and reported.outcome is not None and reported.outcome["kept"] is True
        kinds = [e.kind for e in store.list_events(run_id)]
        assert kinds.count(EventKind.ROUND_STARTED) == kinds.count(EventKind.ROUND_FINISHED) == 1
        (finished,) = store.list_events(run_id, kinds=[EventKind.ROUND_FINISHED])
        assert finished.payload["kept"] is True and finished.payload["round"] == 1
        head = store.list_components(run_id)[0].head_sha
    # The agent committed the lines CANDIDATE.md quoted; the controller pushed them onto the PR branch.
    work = clone_as("bob", f"{forge.handle.url}/alice/app.git", tmp_path / "bob")
    branch = branch_name(run_id)
    assert f"> {STEER}" in git(work, "show", f"origin/{branch}:src/addressed.txt")
    assert git(work, "rev-parse", f"origin/{branch}") == head
