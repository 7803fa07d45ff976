"""A confirmation (issue 21, ADR-0043): a claimed keep measured again by a worker no agent ran in.

The controller mints a confirmation's token for one turn's claim (the champion's heads and the
claimed commits, which a verified bundle brought to the controller's repository); ``crucible worker``
runs as its own process with it, fetches both commits from the controller, measures them with the
run's metric and reports only samples; the controller judges them with the run's keep rule. The
token is good for nothing else, and no other token may report a confirmation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.brokers.subprocess import SubprocessConfirmations
from controller.domain.enums import EventKind, Outcome, Reason, SampleArm
from controller.domain.errors import ForbiddenError, UnconfirmedError
from controller.domain.jobs import RoundJob
from controller.services.remote.keep_gate import KeepGate
from controller.services.remote.remote_rounds import token_hash
from controller.store import ChampionUpdate, TurnDecision
from controller.store.http_ledger import HttpLedger
from controller.store.records import WorkerRoundRecord
from tests.conftest import git, make_repo
from tests.worker.conftest import Controller
from tests.worker.test_bundles import commit, send, worker_clone

WORKER = (sys.executable, "-m", "controller.cli.main", "worker")

SPEC = """
objective = "bring m down"
[agent]
command = "true"
[sandbox]
mode = "none"
[metric]
command = "python3 bench.py"
name = "m"
direction = "minimize"
samples = 3
warmups = 0
confidence = 0
sequential = false
[[component]]
name = "app"
repo = "."
mutable = ["src/**"]
"""

BENCH = "print('METRIC m=' + open('src/value.txt').read().strip())\n"


def _seeded(controller: Controller, tmp_path: Path) -> tuple[str, str, Path]:
    """A run whose repository's metric reads ``src/value.txt`` (10 at the base); the round's token."""
    repo = make_repo(tmp_path / "user", {"src/value.txt": "10\n", "bench.py": BENCH})
    base = git(repo, "rev-parse", "HEAD")
    controller.seed_run("r1", repo=str(repo), sha=base, spec_text=SPEC)
    controller.store.start_turn("r1", 1, 0)
    return base, controller.mint("r1", sha=base)["CRUCIBLE_WORKER_TOKEN"], repo


def _claimed(controller: Controller, token: str, tmp_path: Path, value: str) -> str:
    """A commit setting the value, sent by the round's worker in a verified bundle (as a keep is)."""
    where = tmp_path / f"worker-{value}"
    where.mkdir()
    clone, start = worker_clone(controller, token, where)
    sha = commit(clone, "src/value.txt", f"{value}\n")
    answer = send(controller, token, clone, {"refs/crucible/r1/app": sha}, exclude=start)
    assert answer.status_code == 200, answer.text
    return sha


def _confirm(controller: Controller, tmp_path: Path, base: str, candidate: str) -> WorkerRoundRecord:
    """Mint a confirmation of turn 1's claim and run ``crucible worker`` with it to its end."""
    job = RoundJob(run_id="r1", round=0, turns=3, first_turn=1, heads={"app": base})
    env = controller.remote.mint_confirm_env(job, 1, {"app": base}, {"app": candidate})
    workdir = tmp_path / f"confirm-{candidate[:8]}"
    workdir.mkdir()
    child = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV")}
    done = subprocess.run(
        WORKER, cwd=workdir, env={**child, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    grant = controller.store.confirmations("r1", 0, 1)[-1]
    assert grant.token_hash == token_hash(env["CRUCIBLE_WORKER_TOKEN"])
    assert grant.revoked_at is not None, "a confirmation reports once"
    return grant


@pytest.mark.slow
def test_a_confirmation_measures_the_claim_from_the_controllers_commits(
    controller: Controller, tmp_path: Path
) -> None:
    base, token, _repo = _seeded(controller, tmp_path)
    better = _claimed(controller, token, tmp_path, "8")
    found = _confirm(controller, tmp_path, base, better)
    assert found.outcome is not None
    assert found.outcome["confirmation"]["confirmed"] is True, found.outcome
    assert found.outcome["confirmation"]["value"] == 8.0
    arms = sorted({(arm, values["m"]) for arm, _i, values, _ok in found.outcome["samples"]})
    assert arms == [(str(SampleArm.CANDIDATE), 8.0), (str(SampleArm.CHAMPION), 10.0)]

    worse = _claimed(controller, token, tmp_path, "12")
    found = _confirm(controller, tmp_path, base, worse)
    assert found.outcome is not None
    assert found.outcome["confirmation"]["confirmed"] is False, found.outcome
    assert found.outcome["confirmation"]["value"] == 12.0
    assert "Not kept" in found.outcome["confirmation"]["detail"]


def test_a_confirmations_token_fetches_and_reports_only(controller: Controller, tmp_path: Path) -> None:
    base, token, _repo = _seeded(controller, tmp_path)
    job = RoundJob(run_id="r1", round=0, turns=3, first_turn=1, heads={"app": base})
    env = controller.remote.mint_confirm_env(job, 1, {"app": base}, {"app": base})
    confirming = env["CRUCIBLE_WORKER_TOKEN"]
    decision = {"outcome": "rejected", "reason": "not_improved"}
    event = {"kind": "rejected", "payload": {"turn": 1, "round": 0, **decision}}
    decide = {"decision": decision, "event": event}
    with controller.client(confirming) as http:
        inputs = http.get("/api/worker/runs/r1/job").json()
        assert inputs["confirm"] == {"turn": 1, "champion": {"app": base}, "candidate": {"app": base}}
        assert inputs["hypothesis"] is None and inputs["job"]["heads"] == {"app": base}
        assert http.get("/api/worker/runs/r1/components/app/bundle").status_code == 200
        refused = [
            http.post("/api/worker/runs/r1/ledger/turns/1/decision", json=decide),
            http.post("/api/worker/runs/r1/ledger/turns", json={"number": 2, "round": 0}),
            http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=b"x"),
            http.post("/api/worker/runs/r1/outcome", json={"run_status": "running", "message": "m"}),
        ]
        assert [a.status_code for a in refused] == [403] * 4, [a.text for a in refused]
    # The round's own token cannot report a confirmation (nor can it mint one: no route does).
    with controller.client(token) as http:
        answer = http.post("/api/worker/runs/r1/confirmation", json={"samples": []})
        assert answer.status_code == 403, answer.text
    # The round's worker keeps its token: a confirmation's grant revokes no other.
    grant = controller.store.worker_round_by_token(token_hash(token))
    assert grant is not None and grant.revoked_at is None
    # A confirmation reports once: its token is revoked with its report.
    with controller.client(confirming) as http:
        samples = [["champion", 0, {"m": 10.0}, True], ["candidate", 0, {"m": 10.0}, True]]
        answer = http.post("/api/worker/runs/r1/confirmation", json={"samples": samples})
        assert answer.status_code == 200, answer.text
        assert answer.json()["confirmed"] is False
        again = http.post("/api/worker/runs/r1/confirmation", json={"samples": samples})
        assert again.status_code == 401, again.text
    assert controller.store.get_turn("r1", 1).outcome is None, "a confirmation decides no turn"


def test_a_confirmation_that_ends_without_a_report_refuses_the_keep_and_the_turn_settles_unconfirmed(
    controller: Controller, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The keep waits on its confirmation (503 ``confirming``, sent again by the worker's ledger); a
    confirmation whose process exits without reporting is concluded not confirmed, so the keep is
    refused as ``unconfirmed`` and the worker may settle the turn so, never before."""
    _base, token, _repo = _seeded(controller, tmp_path)
    sha = _claimed(controller, token, tmp_path, "8")
    launcher = SubprocessConfirmations(root=tmp_path / "confirm", environ={}, command=("sh", "-c", "exit 3"))
    request.addfinalizer(launcher.close)
    remote = controller.remote
    remote.gate = KeepGate(controller.store, remote.mint_confirm_env, lambda _run: launcher, wait_s=1.0)
    unconfirmed = TurnDecision(Outcome.REJECTED, Reason.UNCONFIRMED, value=8.0, detail="not reproduced")
    rejected_event = (
        EventKind.REJECTED,
        {"turn": 1, "round": 0, "outcome": "rejected", "reason": "unconfirmed"},
    )
    with HttpLedger(controller.url, token) as ledger:
        with pytest.raises(ForbiddenError, match="no failed confirmation"):
            ledger.decide_turn("r1", 1, unconfirmed, champion=None, component_heads={}, event=rejected_event)
        with pytest.raises(UnconfirmedError, match="the confirmation sent no report: worker_failed"):
            ledger.decide_turn(
                "r1",
                1,
                TurnDecision(Outcome.ACCEPTED, Reason.IMPROVED, value=8.0, commits={"app": sha}),
                champion=ChampionUpdate(value=8.0, turn=1),
                component_heads={"app": sha},
                event=(
                    EventKind.ACCEPTED,
                    {"turn": 1, "round": 0, "outcome": "accepted", "reason": "improved"},
                ),
                samples=[(SampleArm.CHAMPION, i, {"m": 10.0}, True) for i in range(3)]
                + [(SampleArm.CANDIDATE, i, {"m": 8.0}, True) for i in range(3)],
            )
        assert controller.store.get_turn("r1", 1).outcome is None, "refused, the turn still open"
        record = ledger.decide_turn(
            "r1", 1, unconfirmed, champion=None, component_heads={}, event=rejected_event
        )
    assert (record.outcome, record.reason) == (Outcome.REJECTED, Reason.UNCONFIRMED)
    assert controller.store.get_run("r1").champion_value is None
    (grant,) = controller.store.confirmations("r1", 0, 1)
    assert grant.outcome is not None and grant.outcome["confirmation"]["confirmed"] is False
    refused = [
        str(e.payload.get("detail")) for e in controller.store.list_events("r1", kinds={EventKind.REJECTED})
    ]
    assert any("claimed keep; the confirmation measured nothing" in d for d in refused), refused
