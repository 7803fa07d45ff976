"""A refinement round played by ``crucible worker`` in a child process of the subprocess broker, with
only a worker token, against the controller's app over HTTP (ADR-0019; ``steered_round`` says how).

The steered round runs on both databases; the two tests derived from it (a round without
interleaving, a round cut off by a stopped controller) are about the round's context and its
attempts in the worker, so they run on SQLite only (issue 23): the worker's reads of the champion's
stored samples run on both databases in ``test_round_trip`` (the knobs round does not interleave),
a round's second attempt and its turns decided once in ``test_kill``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.brokers.subprocess import SubprocessBroker
from controller.domain.enums import EventKind, Outcome, Reason
from controller.domain.jobs import RoundJob
from controller.services.control.service import Signals
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import Store
from tests.api.sqlite_only import SQLITE_ONLY
from tests.forgekit import AppForge, app_forge
from tests.k8s.conftest import wait_until
from tests.worker.steered_round import WORKER, MakeBroker, check_steered, run_steered

pytestmark = pytest.mark.slow


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[AppForge]:
    with app_forge(tmp_path) as app:
        yield app


def _subprocess_broker(tmp_path: Path) -> MakeBroker:
    def make(remote: RemoteRounds, mint: Callable[[RoundJob], dict[str, str]]) -> SubprocessBroker:
        return SubprocessBroker(
            mint_worker_env=mint,
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            root=tmp_path / "pods",
            environ={"PATH": os.environ["PATH"]},
            command=WORKER,
        )

    return make


def test_a_steered_refinement_round_runs_in_the_worker_and_lands_on_the_same_pr(
    tmp_path: Path, forge: AppForge, database_url: str
) -> None:
    steered = run_steered(tmp_path, forge, database_url, _subprocess_broker(tmp_path))
    check_steered(steered, tmp_path, forge, database_url)


@SQLITE_ONLY
def test_a_refinement_round_without_interleaving_is_decided_against_the_stored_champion(
    tmp_path: Path, forge: AppForge, database_url: str
) -> None:
    """Issue 21: with ``metric.interleave = false`` the first refinement round stopped with
    ``AssertionError``: the round's context (the worker's, built for the round) had no champion arm.
    Its turn is compared with the champion's stored samples, as the controller recounts it."""
    steered = run_steered(tmp_path, forge, database_url, _subprocess_broker(tmp_path), interleave=False)
    check_steered(steered, tmp_path, forge, database_url)


# Round 1's first attempt waits until the controller is stopped; the resumed attempt goes on.
WAITING_AGENT = """\
if [ "$CRUCIBLE_ROUND" = "0" ]; then
  echo 8 > src/value.txt
  echo "HYPOTHESIS: lower the value"
elif [ ! -e {gate}/first ]; then
  touch {gate}/first
  for _ in $(seq 1200); do sleep 0.1; done
  exit 1
else
  grep '^> ' "$CRUCIBLE_CANDIDATE" > src/addressed.txt
  echo "HYPOTHESIS: address the review"
fi
"""


@SQLITE_ONLY
def test_a_refinement_round_cut_off_by_a_stopped_controller_is_continued_in_the_worker(
    tmp_path: Path, forge: AppForge, database_url: str
) -> None:
    """SIGTERM mid-round (``Signals.detach``): the round's worker is stopped and decides the turn it
    had started ``cancelled``; the resumed drive continues the round in a new worker (attempt 1) with
    the one turn ``feedback.turns`` leaves, and lands the commit on the same PR, without starting a
    second round."""
    gate = tmp_path / "gate"
    gate.mkdir()

    def stop_the_controller(run_id: str, signals: Signals) -> None:
        wait_until(lambda: (gate / "first").exists(), what="round 1's agent started", timeout=180)
        signals.detach.set()
        signals.cancel.set()

    steered = run_steered(
        tmp_path,
        forge,
        database_url,
        _subprocess_broker(tmp_path),
        agent=WAITING_AGENT.format(gate=gate),
        after_steer=stop_the_controller,
    )
    # The resumed drive passes through round 0 again first (a worker that finds the search's budget
    # spent and hands over at once), then continues round 1.
    launched = ((0, 0), (1, 0), (0, 1), (1, 1))
    outcomes = (Outcome.FAILED, Outcome.ACCEPTED)
    check_steered(steered, tmp_path, forge, database_url, launched=launched, outcomes=outcomes)
    with Store.open(database_url) as store:
        turns = [t for t in store.list_turns(steered.run_id) if t.round == 1]
        assert [(t.number, t.reason) for t in turns] == [(2, Reason.CANCELLED), (3, Reason.IMPROVED)]
        decided = [
            e for e in store.list_events(steered.run_id) if e.kind in (EventKind.ACCEPTED, EventKind.FAILED)
        ]
        assert sorted(e.payload["turn"] for e in decided) == [1, 2, 3], "each turn decided once"
