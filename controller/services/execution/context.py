"""The live state of one run inside a controller process, rebuilt from the store on start and on resume.

Nothing here is the source of truth: the store is. A ``RunContext`` only caches what the turn loop needs
(checkouts, champion heads, the champion's samples) so that every fact it holds can be reconstructed after
a crash from the database and the git refs crucible wrote. It is frozen: the champion (``Champion``) is
the one part that moves, and the driver's hooks (``Hooks``) are handed in when it is built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.brokers.base import HypothesisLauncher
from controller.config.settings import Settings
from controller.config.spec import ComponentSpec, Spec
from controller.config.units import Tolerance
from controller.domain.enums import Direction, SampleArm
from controller.services.execution.execute import Executor
from controller.services.execution.liveness import Heartbeat
from controller.services.execution.observer import Observer
from controller.services.views.layout import RunLayout
from controller.stats import Arm, GuardRule, KeepRule
from controller.store.ledger import Ledger
from controller.store.records import Sample
from controller.workspace import trackedstatus
from controller.workspace.checkout import Checkout
from controller.workspace.ignored import Fingerprint
from controller.workspace.treeprint import TreePrint

__all__ = ["Champion", "CopyPrint", "Detached", "Hooks", "Observer", "Parked", "RoundRule", "RunContext"]


@dataclass(frozen=True)
class RoundRule:
    """How a refinement round keeps a turn: hold the score within ``hold`` of the PR head and of the
    first published score."""

    hold: Tolerance
    first_published: float


@dataclass(frozen=True)
class CopyPrint:
    """An arm's copy of one component as crucible left it for the next agent (``champion_copy.settle``,
    ``candidate_copy.settle``): at ``head``, with only the ignored files in ``kept`` (by path, with
    their fingerprints) besides the commit's own; ``commands``: how many commands the executor had run
    when it was taken (``Executor.commands_run``; the candidate's print holds only while none ran).

    ``tree`` (the champion's, on a small tree): the whole working tree's stat data where crucible left
    it (``treeprint``), and ``clean`` whether a check proved that tree the commit plus ``kept`` and
    nothing else: then a walk that finds it unchanged stands in for git's (ADR 0049)."""

    head: str
    kept: Mapping[str, Fingerprint]
    commands: int = 0
    tree: TreePrint | None = None
    clean: bool = False


class Detached(Exception):
    """This process stopped driving the run without ending it (``Hooks.detach``, SIGTERM): the
    run stays running, its lease is handed back, and a resume or a takeover continues it."""


class Parked(Exception):
    """A watching run has nothing to do until something wakes it (``crucible serve``, ADR-0020): its
    driver lets go of the thread and the context but keeps the lease and the feedback subscription.
    ``after_s``: look again after this many seconds even if nothing wakes it (a quiet window or the
    wall-clock budget runs out then); None: only news wakes it."""

    def __init__(self, run_id: str, after_s: float | None) -> None:
        super().__init__(f"run {run_id} waits for feedback")
        self.run_id, self.after_s = run_id, after_s


class Champion:
    """The champion as the rounds driven in this process know it: its heads (by component), the
    bases it builds on, and, when it is not re-measured beside each candidate (``metric.interleave =
    false``), its samples as the arm to beat. The one part of a run's live state that moves: a keep,
    a remote round taken over, an adopted head move it (``move``), a followed upstream rebases it
    (``rebase``); every other part of ``RunContext`` is fixed when the context is built. The record
    (the ledger) stays the truth: a resume rebuilds this from it."""

    def __init__(self, heads: Mapping[str, str], bases: Mapping[str, str], arm: Arm | None = None) -> None:
        self._heads: dict[str, str] = dict(heads)
        self._bases: dict[str, str] = dict(bases)
        self._arm = arm

    @property
    def heads(self) -> Mapping[str, str]:
        """The champion's commit by component (a new mapping after each ``move``: keep no reference
        to compare with later)."""
        return self._heads

    @property
    def arm(self) -> Arm | None:
        """The champion's samples as the keep rule wants them; None: not known in this process yet."""
        return self._arm

    @property
    def bases(self) -> Mapping[str, str]:
        """The base commit by component: where the run started, or the upstream it followed since."""
        return self._bases

    def rebase(self, component: str, base: str) -> None:
        """``component``'s upstream moved and the run follows it from ``base`` (``drift``)."""
        self._bases = {**self._bases, component: base}

    def move(self, heads: Mapping[str, str]) -> None:
        """The champion is at ``heads`` now (the checkouts are the caller's: see ``ensure_arm``)."""
        self._heads = dict(heads)

    def measured(self, arm: Arm | None) -> None:
        """The champion's samples are ``arm`` (the baseline, a kept turn's, the record's); None: read
        them from the record before they are needed next (a round that ran elsewhere kept)."""
        self._arm = arm


@dataclass(frozen=True)
class Hooks:
    """What the driver of a run (``control.service``, or a test) hands the rounds it runs, fixed when
    the context is built: nothing is set on a context after construction.

    ``on_champion`` is called after every keep and at the end of the run (publishing; None: keep
    results local). ``lease`` is the lease this process holds on the run while it drives it
    (``liveness.Heartbeat``; None: ``run_loop`` claims one, or the controller holds it elsewhere,
    ``RunContext.lease_elsewhere``). ``wakeup`` wakes a waiting run at once (news for it, a cancel, a
    shutdown: the watch sleeps on it). ``detach``, set with the cancel event, stops this process
    driving the run without ending it (SIGTERM): the turn cut off stays undecided and the run stays
    running, for a resume or a takeover. ``hypothesis_pods`` runs each parallel hypothesis of a
    search turn in a pod of its own (Kubernetes, ADR-0018); None: they run here, one after another."""

    on_champion: Callable[[RunContext], object] | None = None
    lease: Heartbeat | None = None
    wakeup: threading.Event = field(default_factory=threading.Event)
    detach: threading.Event = field(default_factory=threading.Event)
    hypothesis_pods: HypothesisLauncher | None = None


@dataclass(frozen=True)
class RunContext:
    """A run's round environment: what every turn of every round driven here reads, fixed when it is
    built (``runs.build_context``). What moves is the ``champion`` (its own object, moved by a keep);
    what a round varies (its rule, its feedback) is an argument of the turn; what the driver hands
    the rounds is ``hooks``. The checkouts are created on first use (``checkout``) and cached.

    It holds no store (ADR-0045): the record is reached through ``ledger`` alone, the same port on the
    controller and in ``crucible worker``. The controller's own bookkeeping around rounds (publishing,
    the feedback watch, refinement rounds' start and end, round jobs) is handed the small ports it
    uses by its driver, never through here; ``tests/services/test_round_environment.py`` fails on a
    field typed by a store port."""

    run_id: str
    spec: Spec
    settings: Settings
    layout: RunLayout
    executor: Executor
    champion: Champion
    # The run's record as the turn path sees it (ADR-0003): only the ``Ledger`` methods. The store on
    # the controller, the HTTP client of ``crucible worker`` in a worker.
    ledger: Ledger
    observer: Observer = field(default_factory=Observer)
    hooks: Hooks = field(default_factory=Hooks)
    _checkouts: dict[tuple[str, str], Checkout] = field(default_factory=dict)
    # The champion's copy per component as crucible last left it (``champion_copy``): a cache, like the
    # checkouts; a context built afresh fingerprints the copies again before its first agent runs.
    champion_prints: dict[str, CopyPrint] = field(default_factory=dict)
    # The candidate's copy per component as the last turn left it (``candidate_copy``), taken by the
    # next turn as its fingerprint from before the agent.
    candidate_prints: dict[str, CopyPrint] = field(default_factory=dict)
    # The candidate's copy per component as a rejected turn's settle left it (the commit plus its kept
    # files, ``CopyPrint.tree`` on a small tree): the next settle's listing (``candidate_copy``).
    candidate_settled: dict[str, CopyPrint] = field(default_factory=dict)
    # The (arm, component) checkouts whose measurement changed their tree where a print of it expected
    # nothing (a metric that writes caches), or whose tree was too large for one: their trees are left
    # to git for the rest of this context, so no walk is spent on a print that will not hold (ADR 0049).
    unprinted: set[tuple[str, str]] = field(default_factory=set)
    # The candidate's index per component as crucible's reset or commit left it, or a status walk found
    # nothing staged in: (the commit it matches, its checksum). With it, the policy check may read the
    # agent's change in this process (``trackedstatus``, ADR 0052).
    clean_indexes: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    # The controller holds the run's lease while a worker executes its round elsewhere (ADR-0014):
    # the round's loop claims none of its own.
    lease_elsewhere: bool = False
    # A preset's credential variables from the controller's environment (``agent.preset``): given to the
    # agent command only, never to validation or metric commands.
    agent_env: Mapping[str, str] = field(default_factory=dict)
    # The commands run inside a boundary other than bubblewrap: a Kubernetes loop pod (restricted, no
    # service-account token, no forge credentials), where neither bubblewrap nor a CLI's own sandbox
    # can start. A preset then runs its CLI as it does inside crucible's sandbox.
    contained: bool = False

    @property
    def base_shas(self) -> Mapping[str, str]:
        """The bases the champion builds on (``champion.bases``)."""
        return self.champion.bases

    @property
    def champion_heads(self) -> Mapping[str, str]:
        """The champion's heads (``champion.heads``): read here, moved through ``champion.move``."""
        return self.champion.heads

    @property
    def champion_arm(self) -> Arm | None:
        """The champion's samples (``champion.arm``), None until measured or read in this process."""
        return self.champion.arm

    def with_lease(self, lease: Heartbeat) -> RunContext:
        """This environment with ``lease`` as the lease its rounds hold (``run_loop`` hands the rounds
        the lease it claimed itself); the champion, the checkouts and the executor are shared."""
        return replace(self, hooks=replace(self.hooks, lease=lease))

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
        if arm == "candidate":  # created or restored at ``sha`` by git: its index is that commit's
            checksum = trackedstatus.index_checksum(made.path)
            if checksum is not None:
                self.clean_indexes[component] = (sha, checksum)
        # Every checkout's .git (its config above all: core.fsmonitor, hooks, filters) stays read-only
        # to sandboxed commands, or kept code could plant a command that crucible's own git runs.
        for path in [*made.sandbox_readonly_paths(), made.path / ".git"]:
            if path not in self.executor.readonly:
                self.executor.readonly.append(path)
        # Without a sandbox nothing stops a command writing .git: the executor undoes and reports it.
        if made.git_dir not in self.executor.guarded:
            self.executor.guarded.append(made.git_dir)
        return made

    def ensure_arm(self, arm: str, heads: Mapping[str, str]) -> None:
        """Make every component's checkout for ``arm`` exist and sit exactly at ``heads``. A checkout
        this context makes here was just cloned at that commit, or restored to it with every ignored
        file removed (``Checkout.create``, what a crash left is not trusted): restoring it again, even
        keeping ``keep_ignored``, would find nothing to do and run the same git commands twice, which
        a warm hypothesis pod did for both arms of every hypothesis (ADR-0040) and every served run
        for both arms as it started."""
        keep = self.spec.workspace.keep_ignored
        for comp in self.components:
            made = (arm, comp.name) not in self._checkouts
            co = self.checkout(arm, comp.name, at=heads[comp.name])
            if not made:
                co.restore(heads[comp.name], keep)

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
        rows = self.ledger.list_samples(self.run_id, turn)
        return self.arm_of([(r.arm, r.index, r.values, r.valid) for r in rows], arm)

    def arm_of(self, samples: Sequence[Sample], arm: SampleArm) -> Arm:
        """One arm of raw samples (as a turn stores them), as the keep rule wants them: what
        ``arm_from_store`` reads back, without the read when the samples are at hand."""
        values = [v for a, _, v, valid in samples if a == arm and valid]
        metric = self.spec.metric.name
        return Arm(
            primary=tuple(v[metric] for v in values),
            guards={g: tuple(v[g] for v in values) for g in self.guard_names()},
        )

    def champion_reference(self) -> Arm:
        """The arm to beat without interleaving: ``champion_arm``, read from the champion's stored
        samples (the baseline's, or its kept turn's candidate arm) when this context has none yet,
        as a context built for a refinement round or by ``crucible worker`` has not (issue 21). The
        controller recounts a worker's decisions against the same stored samples."""
        arm = self.champion.arm
        if arm is None:
            turn = self.ledger.get_run(self.run_id).champion_turn or 0
            arm = self.arm_from_store(turn, SampleArm.BASELINE if turn == 0 else SampleArm.CANDIDATE)
            self.champion.measured(arm)
        return arm
