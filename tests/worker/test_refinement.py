"""A refinement round played by ``crucible worker`` in a child process of the subprocess broker, with
only a worker token, against the controller's app over HTTP (ADR-0019; ``steered_round`` says how)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.brokers.subprocess import SubprocessBroker
from controller.domain.jobs import RoundJob
from controller.services.remote_rounds import RemoteRounds
from tests.forgekit import AppForge, app_forge
from tests.worker.steered_round import WORKER, check_steered, run_steered

pytestmark = pytest.mark.slow


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[AppForge]:
    with app_forge(tmp_path) as app:
        yield app


def test_a_steered_refinement_round_runs_in_the_worker_and_lands_on_the_same_pr(
    tmp_path: Path, forge: AppForge, database_url: str
) -> None:
    def subprocess_broker(
        remote: RemoteRounds, mint: Callable[[RoundJob], dict[str, str]]
    ) -> SubprocessBroker:
        return SubprocessBroker(
            mint_worker_env=mint,
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            root=tmp_path / "pods",
            environ={"PATH": os.environ["PATH"]},
            command=WORKER,
        )

    steered = run_steered(tmp_path, forge, database_url, subprocess_broker)
    check_steered(steered, tmp_path, forge, database_url)
