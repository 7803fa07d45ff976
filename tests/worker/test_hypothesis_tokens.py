"""A hypothesis pod's token (ADR-0018): good for its own hypothesis of its own turn and nothing more.

The N pods of a turn hold N live tokens of the same round; each may fetch the champion, send its
commits for its turn and report its one index. Starting or deciding turns, the baseline and the
run's status are the controller's. A refused bundle makes that hypothesis ``policy_violation``
without deciding the turn, and revokes only that pod's token.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import TypeAdapter

from controller.domain.enums import Direction, Reason, SampleArm, TurnPhase
from controller.domain.jobs import RoundJob
from controller.services.remote.remote_rounds import token_hash
from controller.stats import Arm, KeepRule, decide_keep
from controller.store import HypothesisReport
from tests.conftest import git
from tests.worker.conftest import Controller
from tests.worker.test_bundles import commit, send, worker_clone
from tests.worker.test_bundles import seeded as seeded  # the fixture


def _mint(controller: Controller, turn: int, index: int, sha: str = "a" * 40) -> str:
    job = RoundJob(run_id="r1", round=0, turns=1, first_turn=turn, heads={"app": sha})
    proposal = {"file": "conf.json", "key": "a", "old": 1, "new": 2 + index, "hypothesis": "h"}
    env = controller.remote.mint_hypothesis_env(job, turn, index, proposal)
    assert (env["CRUCIBLE_TURN"], env["CRUCIBLE_PARALLEL_INDEX"]) == (str(turn), str(index))
    return env["CRUCIBLE_WORKER_TOKEN"]


def _report(index: int) -> dict[str, object]:
    """A hypothesis that did not improve, with the figures its samples give (the controller checks)."""
    champion, candidate = (1.0, 1.1, 0.9), (2.0, 2.1, 1.9)
    verdict = decide_keep(KeepRule(Direction.MINIMIZE), Arm(candidate), Arm(champion))
    report = HypothesisReport(
        index=index,
        reason=verdict.reason,
        value=verdict.candidate_median,
        reference_value=verdict.champion_median,
        delta=verdict.delta,
        p_value=verdict.p_value,
        samples=tuple(
            [(SampleArm.CHAMPION, i, {"m": v}, True) for i, v in enumerate(champion)]
            + [(SampleArm.CANDIDATE, i, {"m": v}, True) for i, v in enumerate(candidate)]
        ),
    )
    assert report.reason is Reason.NOT_IMPROVED
    return dict(TypeAdapter(HypothesisReport).dump_python(report, mode="json"))


def test_the_n_tokens_of_a_turn_are_live_at_once_and_each_reports_only_its_own(
    controller: Controller,
) -> None:
    controller.seed_run("r1")
    controller.store.start_turn("r1", 1, 0)
    tokens = [_mint(controller, 1, i) for i in range(3)]
    for i, token in enumerate(tokens):
        with controller.client(token) as http:
            job = http.get("/api/worker/runs/r1/job").json()
            assert job["hypothesis"]["turn"] == 1 and job["hypothesis"]["index"] == i
            assert job["hypothesis"]["proposal"]["new"] == 2 + i
            other = (i + 1) % 3
            answer = http.post("/api/worker/runs/r1/ledger/turns/1/hypotheses", json=_report(other))
            assert answer.status_code == 403, "another index"
            answer = http.post("/api/worker/runs/r1/ledger/turns/2/hypotheses", json=_report(i))
            assert answer.status_code == 403, "another turn"
            answer = http.post("/api/worker/runs/r1/ledger/turns/1/hypotheses", json=_report(i))
            assert answer.status_code == 200, answer.text
    assert sorted(h.index for h in controller.store.list_hypotheses("r1", 1)) == [0, 1, 2]


def test_a_hypothesis_token_cannot_start_or_decide_turns_or_move_the_run(controller: Controller) -> None:
    controller.seed_run("r1")
    controller.store.start_turn("r1", 1, 0)
    token = _mint(controller, 1, 0)
    decision = {"outcome": "rejected", "reason": "not_improved"}
    with controller.client(token) as http:
        for path, body in [
            ("ledger/turns", {"number": 2, "round": 0}),
            ("ledger/turns/1/decision", {"decision": decision, "event": None, "component_heads": {}}),
            ("ledger/baseline/start", {}),
            ("ledger/events", {"kind": "resumed", "payload": {}}),
        ]:
            answer = http.post(f"/api/worker/runs/r1/{path}", json=body)
            assert answer.status_code == 403, (path, answer.text)
            assert "hypothesis 0 of turn 1" in answer.json()["detail"]
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 200, "reads are allowed"
    assert controller.store.get_turn("r1", 1).phase is TurnPhase.STARTED
    assert controller.store.turn_counts("r1").highest == 1, "no turn was started"


def test_a_new_launch_of_a_hypothesis_revokes_only_its_earlier_token(controller: Controller) -> None:
    controller.seed_run("r1")
    first, other = _mint(controller, 1, 0), _mint(controller, 1, 1)
    again = _mint(controller, 1, 0)
    for token, live in ((first, False), (other, True), (again, True)):
        record = controller.store.worker_round_by_token(token_hash(token))
        assert record is not None and (record.revoked_at is None) is live
    round_token = controller.mint("r1")["CRUCIBLE_WORKER_TOKEN"]
    record = controller.store.worker_round_by_token(token_hash(again))
    assert record is not None and record.revoked_at is None, "a round's attempt leaves hypotheses alone"
    with controller.client(again) as http:
        http.post("/api/worker/runs/r1/outcome", json={"run_status": "running", "message": "done"})
    assert controller.remote.remote_outcome("r1", 0) is None, "a hypothesis's ending is not the round's"
    assert controller.store.worker_round_by_token(token_hash(round_token)) is not None


def test_a_refused_bundle_fails_only_that_hypothesis(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, _round_token, repo = seeded
    base = git(repo, "rev-parse", "HEAD")
    controller.store.start_turn("r1", 1, 0)
    token, sibling = _mint(controller, 1, 0, base), _mint(controller, 1, 1, base)
    clone, start = worker_clone(controller, token, tmp_path)
    head = commit(clone, "tests/test_a.py", "rigged\n")
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    assert answer.status_code == 403 and "policy_violation" in answer.json()["detail"]
    (refused,) = controller.store.list_hypotheses("r1", 1)
    assert (refused.index, refused.reason) == (0, Reason.POLICY_VIOLATION)
    assert "tests/test_a.py: protected" in refused.detail
    assert controller.store.get_turn("r1", 1).phase is TurnPhase.STARTED, "the controller decides the turn"
    with controller.client(token) as http:
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 401, "its token is revoked"
    with controller.client(sibling) as http:
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 200, "the sibling's is not"
