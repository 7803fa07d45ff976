"""The bundle round trip and its checks (ADR-0014), with real git repositories and real HTTP.

The worker's side is played by plain git here (clone the start bundle, commit, bundle the result)
so each refusal can be provoked exactly: a protected path, a ref outside the run, a commit that
does not descend from the start. ``test_round_trip.py`` runs the real ``crucible worker``.

A refusal is recorded the same way whatever the bundle did (the turn rejected as a
``policy_violation``, the attempt's token revoked): the good bundle, the unproved head and the
protected path run on both databases, the other refusals, which differ only in what git finds, on
SQLite (issue 23).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from controller.domain.enums import EventKind, Outcome, Reason, SampleArm, TurnPhase
from controller.domain.errors import ForbiddenError
from controller.store import ChampionUpdate, TurnDecision
from controller.store.http_ledger import HttpLedger
from tests.api.sqlite_only import SQLITE_ONLY
from tests.conftest import git, make_repo
from tests.worker.conftest import Controller

SPEC = """
objective = "faster"
[agent]
command = "true"
[metric]
command = "python bench.py"
name = "m"
direction = "minimize"
samples = 1
confidence = 0
[[component]]
name = "app"
repo = "."
mutable = ["src/**", "tests/**", "bench.py"]
protected = ["tests/**"]
"""


@pytest.fixture
def seeded(controller: Controller, tmp_path: Path) -> tuple[Controller, str, Path]:
    repo = make_repo(
        tmp_path / "user",
        {"src/a.py": "x = 1\n", "tests/test_a.py": "ok\n", "bench.py": "print('METRIC m=1')\n"},
    )
    base = git(repo, "rev-parse", "HEAD")
    controller.seed_run("r1", repo=str(repo), sha=base, spec_text=SPEC)
    token = controller.mint("r1", sha=base)["CRUCIBLE_WORKER_TOKEN"]
    return controller, token, repo


def worker_clone(controller: Controller, token: str, where: Path) -> tuple[Path, str]:
    """What ``crucible worker`` does first: the start commits, from the controller's bundle."""
    with controller.client(token) as http:
        answer = http.get("/api/worker/runs/r1/components/app/bundle")
    assert answer.status_code == 200, answer.text
    bundle = where / "start.bundle"
    bundle.write_bytes(answer.content)
    clone = where / "app"
    clone.mkdir()
    git(clone, "init", "-q")
    git(clone, "config", "user.email", "w@example.com")
    git(clone, "config", "user.name", "W")
    git(clone, "fetch", "-q", str(bundle), "refs/crucible/r1/start/app:refs/heads/start")
    git(clone, "checkout", "-q", "start")
    return clone, git(clone, "rev-parse", "HEAD")


def commit(clone: Path, path: str, text: str) -> str:
    target = clone / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", f"change {path}")
    return git(clone, "rev-parse", "HEAD")


def send(
    controller: Controller, token: str, clone: Path, refs: dict[str, str], *, exclude: str | None
) -> httpx.Response:
    for name, sha in refs.items():
        git(clone, "update-ref", name, sha)
    out = clone.parent / "result.bundle"
    git(clone, "bundle", "create", "-q", str(out), *refs, *([f"^{exclude}"] if exclude else []))
    with controller.client(token) as http:
        return http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=out.read_bytes())


def start_turn(controller: Controller) -> None:
    controller.store.start_turn("r1", 1, 0)


def keep(ledger: HttpLedger, sha: str) -> None:
    """Keep ``sha`` as turn 1, with the one pair of samples (``SPEC``: one sample, no test) that makes
    it a keep: the controller recomputes the decision from them."""
    decision = TurnDecision(Outcome.ACCEPTED, Reason.IMPROVED, value=1.0, commits={"app": sha})
    ledger.decide_turn(
        "r1",
        1,
        decision,
        champion=ChampionUpdate(value=1.0, turn=1),
        component_heads={"app": sha},
        event=(EventKind.ACCEPTED, {"turn": 1, "round": 0, "outcome": "accepted", "reason": "improved"}),
        samples=[(SampleArm.CHAMPION, 0, {"m": 2.0}, True), (SampleArm.CANDIDATE, 0, {"m": 1.0}, True)],
    )


def test_a_good_bundle_is_imported_and_its_head_may_be_kept(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    assert start == git(repo, "rev-parse", "HEAD")
    head = commit(clone, "src/a.py", "x = 2\n")
    start_turn(controller)
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"heads": {"app": head}}
    assert git(repo, "rev-parse", "refs/crucible/r1/worker/app") == head, "pinned where publishing finds it"
    with HttpLedger(controller.url, token) as ledger:
        keep(ledger, head)
    assert [c.head_sha for c in controller.store.list_components("r1")] == [head]


def test_a_head_no_bundle_brought_cannot_be_kept(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, _repo = seeded
    clone, _start = worker_clone(controller, token, tmp_path)
    head = commit(clone, "src/a.py", "x = 2\n")
    start_turn(controller)
    with (
        HttpLedger(controller.url, token) as ledger,
        pytest.raises(ForbiddenError, match="no verified bundle"),
    ):
        keep(ledger, head)
    assert controller.store.get_turn("r1", 1).phase is TurnPhase.STARTED


def _refused(controller: Controller, answer: httpx.Response, token: str, what: str) -> None:
    assert answer.status_code == 403, answer.text
    assert "policy_violation" in answer.json()["detail"] and what in answer.json()["detail"]
    turn = controller.store.get_turn("r1", 1)
    assert (turn.outcome, turn.reason) == (Outcome.REJECTED, Reason.POLICY_VIOLATION)
    run = controller.store.get_run("r1")
    assert run.champion_turn is None
    assert [c.head_sha for c in controller.store.list_components("r1")] == [
        controller.store.list_components("r1")[0].base_sha
    ]
    with controller.client(token) as http:
        assert http.get("/api/worker/runs/r1/ledger/run").status_code == 401, "the attempt is revoked"


def test_a_commit_touching_a_protected_path_is_refused(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    commit(clone, "tests/test_a.py", "rigged\n")
    head = commit(clone, "src/a.py", "x = 2\n")  # the last commit alone looks innocent
    start_turn(controller)
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    _refused(controller, answer, token, "tests/test_a.py: protected")
    assert git(repo, "for-each-ref", "refs/crucible/r1/worker") == "", "nothing pinned"


@SQLITE_ONLY
def test_a_commit_touching_the_evaluator_is_refused(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, _repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    head = commit(clone, "bench.py", "print('METRIC m=0')\n")
    start_turn(controller)
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=start)
    _refused(controller, answer, token, "bench.py: evaluator file")


@SQLITE_ONLY
def test_a_ref_outside_the_run_is_refused(seeded: tuple[Controller, str, Path], tmp_path: Path) -> None:
    controller, token, _repo = seeded
    clone, start = worker_clone(controller, token, tmp_path)
    head = commit(clone, "src/a.py", "x = 2\n")
    start_turn(controller)
    refs = {"refs/crucible/r1/app": head, "refs/heads/main": head}
    answer = send(controller, token, clone, refs, exclude=start)
    _refused(controller, answer, token, "refs/heads/main")


@SQLITE_ONLY
def test_a_commit_not_descending_from_the_start_is_refused(
    seeded: tuple[Controller, str, Path], tmp_path: Path
) -> None:
    controller, token, _repo = seeded
    clone, _start = worker_clone(controller, token, tmp_path)
    git(clone, "checkout", "-q", "--orphan", "elsewhere")
    head = commit(clone, "src/a.py", "x = 3\n")
    start_turn(controller)
    answer = send(controller, token, clone, {"refs/crucible/r1/app": head}, exclude=None)
    _refused(controller, answer, token, "does not descend from the start")


@SQLITE_ONLY
def test_garbage_is_refused(seeded: tuple[Controller, str, Path]) -> None:
    controller, token, _repo = seeded
    start_turn(controller)
    with controller.client(token) as http:
        answer = http.post("/api/worker/runs/r1/bundle", params={"turn": 1}, content=b"not a bundle")
    _refused(controller, answer, token, "not a git bundle")
