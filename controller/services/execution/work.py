"""What a turn carries from its first step to its decision, and how a step settles it early.

Shared by the steps (``steps``), the verdict (``verdict``), the keep (``keep``) and the two ways a
turn is played (one candidate in ``turn``, N hypotheses in ``hypotheses``), so none of them imports
another only for its types.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.domain.enums import EventKind, Outcome, Reason, SampleArm, SequentialStop, TurnStep
from controller.engine.knobs import Proposal
from controller.services.execution.progress import TurnProgress
from controller.services.execution.snapshots import Snapshot
from controller.stats import KeepVerdict
from controller.workspace import ignored, treeprint

EVENT_OF_OUTCOME: dict[Outcome, EventKind] = {
    Outcome.ACCEPTED: EventKind.ACCEPTED,
    Outcome.REJECTED: EventKind.REJECTED,
    Outcome.FAILED: EventKind.FAILED,
    Outcome.NO_CHANGE: EventKind.NO_CHANGE,
}


@dataclass
class TurnWork:
    """What a turn accumulates on its way to a decision."""

    number: int
    round: int
    started: float = field(default_factory=time.monotonic)
    hypothesis: str | None = None
    cost_usd: float = 0.0
    tokens: int = 0
    changed: dict[str, list[str]] = field(default_factory=dict)
    value: float | None = None
    p_value: float | None = None
    samples: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)
    proposal: Proposal | None = None
    before: dict[str, Snapshot] = field(default_factory=dict)
    raw_samples: list[tuple[SampleArm, int, dict[str, float], bool]] = field(default_factory=list)
    # Fingerprints of the ignored files kept across turns (workspace.keep_ignored), before the agent ran.
    kept_before: dict[str, dict[str, ignored.Fingerprint]] = field(default_factory=dict)
    # The candidate's ignored entries per component, from the policy check's status walk.
    ignored_entries: dict[str, list[str]] = field(default_factory=dict)
    # The candidate's tree per component as the policy check's walk left it (a small tree only), and the
    # ignored entries the measurement's tidy removed since: the walk after the measurement that finds it
    # unchanged stands in for git's (``snapshots.snapshot``, ADR 0049).
    prints: dict[str, treeprint.TreePrint] = field(default_factory=dict)
    tidied: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The components whose champion copy the policy check walked and found as crucible left it.
    champion_checked: set[str] = field(default_factory=set)
    # The candidate's ignored entries per component from the walk after the measurement (None: not
    # listed, no ``keep_ignored``), and the executor's command count then (``candidate_copy``).
    ignored_after: dict[str, list[str]] | None = None
    listed_at: int = -1
    pairs: int | None = None
    stop: SequentialStop | None = None
    progress: TurnProgress | None = None  # the live view's events (step, samples)
    # Parallel hypotheses (ADR-0016): this hypothesis's index, and its verdict on its own.
    index: int | None = None
    verdict: KeepVerdict | None = None

    def step(self, step: TurnStep, arms: Sequence[SampleArm] = ()) -> None:
        if self.progress is not None:
            self.progress.step(step, arms)

    def changed_paths(self, composite: bool) -> tuple[str, ...]:
        out: list[str] = []
        for comp, paths in self.changed.items():
            out += [f"{comp}/{p}" if composite else p for p in paths]
        return tuple(sorted(out))


@dataclass(frozen=True)
class Settled:
    reason: Reason
    detail: str


class TurnStop(Exception):
    """A step settled the turn (or a parallel hypothesis) with ``settled``: nothing after it runs."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.settled = Settled(reason, detail)
