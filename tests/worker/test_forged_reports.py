"""The controller decides (issue 21): forged decisions sent with a worker's stolen token change nothing.

A watching run publishes a draft PR on the local forge from round 0 and is steered into a refinement
round, both played by ``crucible worker`` in a child process of the subprocess broker
(``steered_round``). Each round's token is taken as it is minted, as an agent that stole it would
hold it; while each round's turn is running (its agent waits for the attacker), the attacker sends
what the issue's review sent: a keep with a made-up value, a keep naming no commit, a rejection that
moves the champion, a keep whose made-up samples agree with it but whose commit no verified bundle
brought, and a second baseline. Each is refused (403, or 409 for the baseline), the refused reports
are recorded as ``policy_violation`` naming what did not match, the token stays good, and the run's
turns, champion and PR end exactly as the honest steered run's (``check_steered``).

On SQLite only (issue 23): the refusals are the controller's recount and bundle check, not the
store's; the second baseline's 409 is the ledger's ConflictError, checked on both databases through
the HTTP ledger by ``tests/ledger/test_contract.py``, and the forged keep of ``test_forged_keep``
runs on PostgreSQL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from controller.brokers.subprocess import SubprocessBroker
from controller.domain.enums import EventKind, Reason
from controller.domain.jobs import RoundJob
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import Store
from tests.api.sqlite_only import SQLITE_ONLY
from tests.forgekit import app_forge
from tests.k8s.conftest import wait_until
from tests.worker.steered_round import WORKER, check_steered, run_steered

pytestmark = pytest.mark.slow

# REVIEW_AGENT, each round waiting until the attacker has sent its forgeries for that round's turn.
GATED_AGENT = """\
for _ in $(seq 600); do [ -e {gate}/forged-$CRUCIBLE_ROUND ] && break; sleep 0.1; done
if [ "$CRUCIBLE_ROUND" = "0" ]; then
  echo 8 > src/value.txt
  echo "HYPOTHESIS: lower the value"
else
  grep '^> ' "$CRUCIBLE_CANDIDATE" > src/addressed.txt
  echo "HYPOTHESIS: address the review"
fi
"""


def _forgeries(turn: int, round: int) -> list[tuple[str, str, dict[str, object]]]:
    """(what, route, body) of every forged report for ``turn``; the spec measures one sample per arm
    with no test, so one champion and one candidate sample make a keep."""
    decided = {"turn": turn, "round": round, "outcome": "accepted", "reason": "improved"}
    event = {"kind": "accepted", "payload": decided}
    keep = {"outcome": "accepted", "reason": "improved", "value": 0.001, "commits": {"app": "f" * 40}}
    made_up = [["champion", 0, {"value": 10.0}, True], ["candidate", 0, {"value": 0.001}, True]]
    champion = {"value": 0.001, "turn": turn}
    route = f"ledger/turns/{turn}/decision"
    rejected = {"outcome": "rejected", "reason": "not_improved", "value": 0.001}
    return [
        (
            "made-up value",
            route,
            {
                "decision": keep,
                "champion": champion,
                "component_heads": keep["commits"],
                "event": event,
                "samples": [["champion", 0, {"value": 10.0}, True], ["candidate", 0, {"value": 0.5}, True]],
            },
        ),
        (
            "no commit",
            route,
            {
                "decision": {**keep, "commits": {}},
                "champion": champion,
                "component_heads": {},
                "event": event,
                "samples": made_up,
            },
        ),
        (
            "a rejection that moves the champion",
            route,
            {
                "decision": rejected,
                "champion": champion,
                "component_heads": {},
                "event": {
                    "kind": "rejected",
                    "payload": {**decided, "outcome": "rejected", "reason": "not_improved"},
                },
                "samples": [["champion", 0, {"value": 1.0}, True], ["candidate", 0, {"value": 0.001}, True]],
            },
        ),
        (
            "no verified bundle",
            route,
            {
                "decision": keep,
                "champion": champion,
                "component_heads": keep["commits"],
                "event": event,
                "samples": made_up,
            },
        ),
        ("a second baseline", "ledger/baseline", {"value": 0.001, "event_payload": {"value": 0.001}}),
    ]


class Attacker:
    """Holds every minted token; for each, waits for its round's turn to run, sends the forgeries,
    then lets the agent go on (the gate file)."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate
        self.answers: dict[tuple[int, str], httpx.Response] = {}
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
        base = f"{env['CRUCIBLE_CONTROLLER_URL']}/api/worker/runs/{env['CRUCIBLE_RUN_ID']}"
        headers = {"Authorization": f"Bearer {env['CRUCIBLE_WORKER_TOKEN']}"}
        try:
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:

                def running() -> int | None:
                    recent = http.get("/ledger/snapshot", params={"last": 1}).json()["recent"]
                    started = [t for t in recent if t["phase"] == "started" and t["round"] == round]
                    return started[0]["number"] if started else None

                wait_until(lambda: running() is not None, what=f"round {round}'s turn to start", timeout=120)
                turn = running()
                assert turn is not None
                for what, route, body in _forgeries(turn, round):
                    self.answers[(round, what)] = http.post(f"/{route}", json=body)
        except BaseException as exc:  # the test's assertions show it
            self.errors.append(exc)
        finally:
            (self.gate / f"forged-{round}").touch()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)


@SQLITE_ONLY
def test_forged_decisions_with_a_stolen_token_leave_the_run_as_an_honest_one(
    tmp_path: Path, database_url: str
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    attacker = Attacker(gate)

    def make_broker(remote: RemoteRounds, mint: Callable[[RoundJob], dict[str, str]]) -> SubprocessBroker:
        return SubprocessBroker(
            mint_worker_env=attacker.minting(mint),
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            root=tmp_path / "pods",
            environ={"PATH": os.environ["PATH"]},
            command=WORKER,
        )

    with app_forge(tmp_path) as forge:
        steered = run_steered(tmp_path, forge, database_url, make_broker, agent=GATED_AGENT.format(gate=gate))
        attacker.join()
        assert attacker.errors == []
        _check_refused(attacker, steered.run_id, database_url)
        # The turns, the champion, both rounds' records and the PR branch: as the honest run's.
        check_steered(steered, tmp_path, forge, database_url)


def _check_refused(attacker: Attacker, run_id: str, database_url: str) -> None:
    expected = {
        "made-up value": "value: reported 0.001, the samples give 0.5",
        "no commit": "a kept turn names no commit",
        "a rejection that moves the champion": "a not_improved decision moves the champion",
        "no verified bundle": "came in no verified bundle",
    }
    assert {r for r, _what in attacker.answers} == {0, 1}, "both rounds were attacked"
    for (round, what), answer in attacker.answers.items():
        if what == "a second baseline":
            assert answer.status_code == 409, (round, answer.text)
            continue
        assert answer.status_code == 403, (round, what, answer.text)
        assert expected[what] in answer.json()["detail"], (round, what, answer.text)
    with Store.open(database_url) as store:
        refused = [
            e.payload
            for e in store.list_events(run_id, kinds={EventKind.REJECTED})
            if str(e.payload.get("detail", "")).startswith("report refused:")
        ]
    # The three reports whose figures the samples do not give, per round; the unproved commit is
    # refused by the bundle check (nothing recorded: no bundle came), the baseline by the ledger.
    assert len(refused) == 6, refused
    assert all(p["reason"] == str(Reason.POLICY_VIOLATION) for p in refused)
