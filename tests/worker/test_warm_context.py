"""A warm hypothesis pod keeps its run context from one hypothesis to the next (ADR-0047): the ledger is
swapped for each hypothesis's own, the checkouts are left alone while the champion stays, and both arms
follow the champion when another pod's hypothesis moved it. Real git repositories (the arms borrow the
source's objects, as a pod's clones borrow its fetched repositories)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import RunStatus
from controller.services.execution.context import RunContext
from controller.services.execution.runs import build_context
from controller.services.remote.warm import WarmContext
from controller.store.records import ComponentRecord, NewRun
from controller.workspace.git import resolve_ref
from tests.conftest import git
from tests.support.memory_ledger import MemoryLedger

SPEC = """
objective = "a warm pod's context"
[agent]
command = "agent"
[sandbox]
mode = "none"
[metric]
command = "metric"
name = "m"
direction = "minimize"
[[component]]
name = "app"
repo = "{repo}"
base = "main"
mutable = ["src/**"]
"""


class Builds:
    """``build`` for ``WarmContext.context``: a real context at ``heads`` with ``ledger``."""

    def __init__(self, tmp_path: Path, repo: Path) -> None:
        (tmp_path / "crucible.toml").write_text(SPEC.format(repo=repo))
        self.spec = load_spec(tmp_path / "crucible.toml")
        self.settings = Settings(home=tmp_path / "home", database_url="sqlite://")
        self.base = resolve_ref(repo, "main")
        self.repo = repo

    def ledger(self) -> MemoryLedger:
        ledger = MemoryLedger()
        text = SPEC.format(repo=self.repo)
        ledger.create_run(
            NewRun("r1", text, self.spec.fingerprint(), None, self.spec.objective, "m", "minimize", 5),
            [ComponentRecord("r1", "app", str(self.repo), "main", self.base, self.base)],
        )
        ledger.set_run_status("r1", RunStatus.RUNNING)
        return ledger

    def builder(self, ledger: MemoryLedger, heads: dict[str, str]) -> Callable[[], RunContext]:
        def build() -> RunContext:
            return build_context(
                self.settings,
                ledger,
                "r1",
                self.spec,
                base_shas={"app": self.base},
                heads=heads,
                environ={"PATH": "/usr/bin:/bin"},
            )

        return build


@pytest.fixture
def builds(tmp_path: Path, repo_factory: Callable[..., Path]) -> Builds:
    return Builds(tmp_path, repo_factory({"src/value.txt": "10\n"}))


def _arm(ctx: RunContext, arm: str) -> Path:
    return ctx.checkout(arm, "app").path


def test_the_next_hypothesis_gets_its_own_ledger_and_the_same_checkouts_untouched(builds: Builds) -> None:
    warm = WarmContext()
    heads = {"app": builds.base}
    first_ledger, second_ledger = builds.ledger(), builds.ledger()
    first = warm.context("k", builds.builder(first_ledger, heads), first_ledger, heads)
    marker = _arm(first, "candidate") / "left.txt"
    marker.write_text("no git command ran in between\n")
    second = warm.context("k", builds.builder(second_ledger, heads), second_ledger, heads)
    assert warm.built == 1, "the second hypothesis reuses the first one's context"
    assert second.ledger is second_ledger and first.ledger is first_ledger
    assert second.checkout("candidate", "app") is first.checkout("candidate", "app")
    assert second.champion is first.champion and second.executor is first.executor
    assert marker.exists(), "the champion did not move: the arms were not restored"


def test_both_arms_follow_a_champion_another_pod_moved(builds: Builds) -> None:
    warm = WarmContext()
    old = {"app": builds.base}
    ledger = builds.ledger()
    first = warm.context("k", builds.builder(ledger, old), ledger, old)
    planted = [_arm(first, arm) / "stray.txt" for arm in ("candidate", "champion")]
    for path in planted:
        path.write_text("left by an earlier hypothesis\n")
    (builds.repo / "src" / "value.txt").write_text("9\n")
    git(builds.repo, "commit", "-qam", "kept in another pod")
    new = {"app": resolve_ref(builds.repo, "main")}
    moved = warm.context("k", builds.builder(ledger, new), ledger, new)
    assert warm.built == 1
    assert dict(moved.champion_heads) == new
    for arm in ("candidate", "champion"):
        assert git(_arm(moved, arm), "rev-parse", "HEAD") == new["app"], arm
        assert (_arm(moved, arm) / "src" / "value.txt").read_text() == "9\n", arm
    assert not any(path.exists() for path in planted), "restored: nothing outside the commit is left"


def test_another_key_builds_a_context_afresh(builds: Builds) -> None:
    warm = WarmContext()
    heads = {"app": builds.base}
    ledger = builds.ledger()
    first = warm.context(("r1", 0), builds.builder(ledger, heads), ledger, heads)
    again = warm.context(("r1", 1), builds.builder(ledger, heads), ledger, heads)
    assert warm.built == 2 and again is not first
