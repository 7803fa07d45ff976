"""The running turn's progress as events: its step and each measured sample as it arrives.

A decision event says what a turn came to; a person watching a run (the dashboard, ``--events``)
also wants to see where a turn of several minutes is and how its samples are falling. These events
are written through the ledger like every other, so a local loop, ``crucible serve`` and a worker
report them alike, at modest volume: one per step and one per measured sample (warmups are not
reported), each a few fields. They are progress only: nothing decides or recovers from them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from controller.domain.enums import EventKind, SampleArm, TurnStep
from controller.store.ledger import Ledger


class TurnProgress:
    """Writes ``turn_step`` and ``sample`` events for turn ``turn`` of round ``round``."""

    def __init__(self, ledger: Ledger, run_id: str, turn: int, round: int, metric: str) -> None:
        self.ledger, self.run_id, self.metric = ledger, run_id, metric
        self.turn, self.round = turn, round

    def step(self, step: TurnStep, arms: Sequence[SampleArm] = ()) -> None:
        payload: dict[str, object] = {"turn": self.turn, "round": self.round, "step": str(step)}
        if arms:
            payload["arms"] = [str(a) for a in arms]
        self.ledger.append_event(self.run_id, EventKind.TURN_STEP, payload)

    def sample(self, arm: SampleArm, index: int, values: dict[str, float], valid: bool) -> None:
        """One measured sample (``measure``'s ``on_sample``): the primary metric's value, or null
        when the sample is invalid."""
        value = values.get(self.metric) if valid else None
        payload = {
            "turn": self.turn,
            "round": self.round,
            "arm": str(arm),
            "index": index,
            "value": value if value is not None and math.isfinite(value) else None,
            "valid": valid,
        }
        self.ledger.append_event(self.run_id, EventKind.SAMPLE, payload)
