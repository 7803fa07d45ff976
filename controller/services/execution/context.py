"""The live state of one run inside a controller process, rebuilt from the store on start and on resume.

Nothing here is the source of truth: the store is. A ``RunContext`` only caches what the turn loop needs
(checkouts, champion heads, the champion's samples) so that every fact it holds can be reconstructed after
a crash from the database and the git refs crucible wrote.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from controller.brokers.base import HypothesisLauncher
from controller.config.settings import Settings
from controller.config.spec import ComponentSpec, Spec
from controller.config.units import Tolerance
from controller.domain.enums import Direction, SampleArm
from controller.domain.errors import CrucibleError
from controller.services.execution.execute import Executor
from controller.services.execution.liveness import Heartbeat
from controller.services.execution.observer import Observer
from controller.services.views.layout import RunLayout
from controller.stats import Arm, GuardRule, KeepRule
from controller.store.ledger import Ledger
from controller.store.ports import RunStore
from controller.workspace.checkout import Checkout

__all__ = ["Detached", "Observer", "Parked", "RoundRule", "RunContext"]


@dataclass(frozen=True)
class RoundRule:
    """How a refinement round keeps a turn: hold the score within ``hold`` of the PR head and of the
    first published score."""

    hold: Tolerance
    first_published: float


class Detached(Exception):
    """This process stopped driving the run without ending it (``RunContext.detach``, SIGTERM): the
    run stays running, its lease is handed back, and a resume or a takeover continues it."""


class Parked(Exception):
    """A watching run has nothing to do until something wakes it (``crucible serve``, ADR-0020): its
    driver lets go of the thread and the context but keeps the lease and the feedback subscription.
    ``after_s``: look again after this many seconds even if nothing wakes it (a quiet window or the
    wall-clock budget runs out then); None: only news wakes it."""

    def __init__(self, run_id: str, after_s: float | None) -> None:
        super().__init__(f"run {run_id} waits for feedback")
        self.run_id, self.after_s = run_id, after_s


@dataclass
class RunContext:
    run_id: str
    spec: Spec
    settings: Settings
    layout: RunLayout
    executor: Executor
    base_shas: dict[str, str]
    champion_heads: dict[str, str]
    # The run's record as the turn path sees it (ADR-0003): only the ``Ledger`` methods. The store on
    # the controller, the HTTP client of ``crucible worker`` in a worker.
    ledger: Ledger
    # The controller's store through the ports publishing, the watch and refinement rounds use;
    # None in ``crucible worker``, which has no store (``store`` then says so).
    records: RunStore | None = None
    observer: Observer = field(default_factory=Observer)
    champion_arm: Arm | None = None
    # Called after every keep and at the end of the run (publishing); None: keep results local.
    on_champion: Callable[[RunContext], object] | None = None
    # The lease this process holds on the run while it drives it (``liveness.Heartbeat``).
    heartbeat: Heartbeat | None = None
    # Set to wake a waiting run at once: news for it, a cancel, a shutdown (the watch sleeps on it).
    wakeup: threading.Event = field(default_factory=threading.Event)
    # Set with the cancel event when this process stops driving the run without ending it
    # (SIGTERM): the turn cut off stays undecided and the run stays running, for a resume or a takeover.
    detach: threading.Event = field(default_factory=threading.Event)
    _checkouts: dict[tuple[str, str], Checkout] = field(default_factory=dict)
    # The controller holds the run's lease while a worker executes its round elsewhere (ADR-0014):
    # the round's loop claims none of its own.
    lease_elsewhere: bool = False
    # Each parallel hypothesis of a search turn in a pod of its own (Kubernetes, ADR-0018); None: the
    # hypotheses run here, one after another.
    hypothesis_pods: HypothesisLauncher | None = None
    # A preset's credential variables from the controller's environment (``agent.preset``): given to the
    # agent command only, never to validation or metric commands.
    agent_env: dict[str, str] = field(default_factory=dict)
    # The commands run inside a boundary other than bubblewrap: a Kubernetes loop pod (restricted, no
    # service-account token, no forge credentials), where neither bubblewrap nor a CLI's own sandbox
    # can start. A preset then runs its CLI as it does inside crucible's sandbox.
    contained: bool = False

    @property
    def store(self) -> RunStore:
        """The controller's store (``records``); CrucibleError in ``crucible worker``, where the turn
        path reaches the record through ``ledger`` only and any use of the store is a bug."""
        if self.records is None:
            raise CrucibleError("crucible worker has no store; the turn path uses the ledger")
        return self.records

    @property
    def direction(self) -> Direction:
        return self.spec.metric.direction

    @property
    def components(self) -> list[ComponentSpec]:
        return list(self.spec.components)

    def source(self, component: ComponentSpec) -> Path:
        return component.repo_path(self.spec.spec_dir)

    def checkout(self, arm: str, component: str, *, at: str | None = None) -> Checkout:
        """The checkout of ``component`` for ``arm``, created (or reconciled) at ``at`` on first use."""
        key = (arm, component)
        existing = self._checkouts.get(key)
        if existing is not None:
            return existing
        sha = at or self.champion_heads[component]
        if arm == "candidate":
            source = self.source(self.spec.component(component))
        else:
            # Commits are made in the candidate clone; the other arms borrow its objects (and, through
            # its alternates, the user's), so a new champion is visible to them without a fetch.
            source = self.checkout("candidate", component).path
        made = Checkout.create(source, self.layout.checkout(arm, component), sha)
        self._checkouts[key] = made
        # Every checkout's .git (its config above all: core.fsmonitor, hooks, filters) stays read-only
        # to sandboxed commands, or kept code could plant a command that crucible's own git runs.
        for path in [*made.sandbox_readonly_paths(), made.path / ".git"]:
            if path not in self.executor.readonly:
                self.executor.readonly.append(path)
        # Without a sandbox nothing stops a command writing .git: the executor undoes and reports it.
        if made.git_dir not in self.executor.guarded:
            self.executor.guarded.append(made.git_dir)
        return made

    def ensure_arm(self, arm: str, heads: dict[str, str]) -> None:
        """Make every component's checkout for ``arm`` exist and sit exactly at ``heads``."""
        for comp in self.components:
            co = self.checkout(arm, comp.name, at=heads[comp.name])
            co.restore(heads[comp.name], self.spec.workspace.keep_ignored)

    def keep_rule(self) -> KeepRule:
        metric = self.spec.metric
        return KeepRule(
            direction=metric.direction,
            min_improvement=metric.min_improvement,
            confidence=metric.confidence,
            guards=tuple(GuardRule(g.name, g.direction, g.tolerance) for g in metric.guards),
        )

    def guard_names(self) -> list[str]:
        return [g.name for g in self.spec.metric.guards]

    def protocol_env(self, turn: int, round_number: int, arm: str = "candidate") -> dict[str, str]:
        return {
            "CRUCIBLE_RUN_ID": self.run_id,
            "CRUCIBLE_ROUND": str(round_number),
            "CRUCIBLE_TURN": str(turn),
            "CRUCIBLE_WORKSPACE": str(self.layout.workspace_root(arm)),
            "CRUCIBLE_CANDIDATE": str(self.layout.candidate_file),
            "CRUCIBLE_STEER_FILE": str(self.layout.steer_file),
        }

    def arm_from_store(self, turn: int, arm: SampleArm) -> Arm:
        """The stored samples of one arm of one turn, as the keep rule wants them."""
        rows = [s for s in self.ledger.list_samples(self.run_id, turn) if s.arm == arm and s.valid]
        metric = self.spec.metric.name
        return Arm(
            primary=tuple(r.values[metric] for r in rows),
            guards={g: tuple(r.values[g] for r in rows) for g in self.guard_names()},
        )
