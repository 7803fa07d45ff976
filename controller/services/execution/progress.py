"""The running turn's progress as events: its step and each measured sample as it arrives.

A decision event says what a turn came to; a person watching a run (the dashboard, ``--events``)
also wants to see where a turn of several minutes is and how its samples are falling. These events
are written through the ledger like every other, so a local loop, ``crucible serve`` and a worker
report them alike, at modest volume: one per step and one per measured sample (warmups are not
reported), each a few fields. They are progress only: nothing decides or recovers from them. A
parallel turn's hypotheses (ADR-0016) each report their own, with ``parallel_index`` added; a turn of
one leaves it out, so its events keep the shape ``docs/cli.md`` documents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from controller.domain import events
from controller.domain.enums import EventKind, SampleArm, TurnStep
from controller.store.ledger import Ledger

P = TypeVar("P", bound=events.EventPayload)


class TurnProgress:
    """Writes ``turn_step`` and ``sample`` events for turn ``turn`` of round ``round`` (of its
    hypothesis ``parallel_index`` when the turn runs several)."""

    def __init__(
        self,
        ledger: Ledger,
        run_id: str,
        turn: int,
        round: int,
        metric: str,
        parallel_index: int | None = None,
    ) -> None:
        self.ledger, self.run_id, self.metric = ledger, run_id, metric
        self.turn, self.round, self.parallel_index = turn, round, parallel_index

    def _of_hypothesis(self, payload: P) -> P:
        """The payload with the hypothesis it is of; a turn of one leaves the field out."""
        if self.parallel_index is None:
            return payload
        return payload.model_copy(update={"parallel_index": self.parallel_index})

    def step(self, step: TurnStep, arms: Sequence[SampleArm] = ()) -> None:
        payload = events.TurnStepPayload(turn=self.turn, round=self.round, step=step)
        if arms:
            payload = payload.model_copy(update={"arms": list(arms)})
        self.ledger.append_event(self.run_id, EventKind.TURN_STEP, self._of_hypothesis(payload).dump())

    def sample(self, arm: SampleArm, index: int, values: dict[str, float], valid: bool) -> None:
        """One measured sample (``measure``'s ``on_sample``): the primary metric's value, or null
        when the sample is invalid."""
        value = values.get(self.metric) if valid else None
        finite = value if value is not None and math.isfinite(value) else None
        payload = events.SamplePayload(
            turn=self.turn, round=self.round, arm=arm, index=index, value=finite, valid=valid
        )
        self.ledger.append_event(self.run_id, EventKind.SAMPLE, self._of_hypothesis(payload).dump())
