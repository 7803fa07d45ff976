"""When a run stops, and the one sentence that says why (docs/spec.md, docs/keep-rule.md).

Pure: the run loop passes in counters, this module answers with a stop reason or None. The same checks
run before every turn, so a resumed run stops for exactly the reasons an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.domain.enums import Direction, StopReason


@dataclass(frozen=True)
class Budgets:
    turns: int
    wall_clock_s: float | None = None
    cost_usd: float | None = None
    tokens: int | None = None
    disk_bytes: int | None = None
    max_consecutive_failures: int = 5
    target: float | None = None


@dataclass(frozen=True)
class Progress:
    turns_done: int
    elapsed_s: float
    cost_usd: float
    tokens: int
    disk_bytes: int | None
    consecutive_failures: int
    champion_value: float | None
    direction: Direction


def reached(direction: Direction, value: float | None, target: float | None) -> bool:
    """Whether ``value`` meets ``target`` in the metric's good direction."""
    if value is None or target is None:
        return False
    return value <= target if direction is Direction.MINIMIZE else value >= target


def check_stop(budgets: Budgets, progress: Progress) -> StopReason | None:
    """The first budget that is spent, in a fixed order, or None to run another turn."""
    if reached(progress.direction, progress.champion_value, budgets.target):
        return StopReason.TARGET_REACHED
    if progress.consecutive_failures >= budgets.max_consecutive_failures:
        return StopReason.CONSECUTIVE_FAILURES
    if budgets.wall_clock_s is not None and progress.elapsed_s >= budgets.wall_clock_s:
        return StopReason.WALL_CLOCK
    if budgets.cost_usd is not None and progress.cost_usd >= budgets.cost_usd:
        return StopReason.COST
    if budgets.tokens is not None and progress.tokens >= budgets.tokens:
        return StopReason.TOKENS
    if (
        budgets.disk_bytes is not None
        and progress.disk_bytes is not None
        and progress.disk_bytes >= budgets.disk_bytes
    ):
        return StopReason.DISK
    if progress.turns_done >= budgets.turns:
        return StopReason.MAX_TURNS
    return None


def explain_stop(reason: StopReason, budgets: Budgets, progress: Progress, *, detail: str = "") -> str:
    """One sentence for the user: why the run stopped and with what."""
    best = "" if progress.champion_value is None else f"; best {progress.champion_value:.6g}"
    exhausted_note = "; the search was not exhausted"
    texts = {
        StopReason.MAX_TURNS: f"turn budget spent ({progress.turns_done}/{budgets.turns}){exhausted_note}",
        StopReason.WALL_CLOCK: (
            f"wall-clock budget spent ({progress.elapsed_s:.0f}s of {budgets.wall_clock_s}s)"
        ),
        StopReason.COST: f"cost budget spent (${progress.cost_usd:.2f} of ${budgets.cost_usd})",
        StopReason.TOKENS: f"token budget spent ({progress.tokens} of {budgets.tokens})",
        StopReason.DISK: f"disk budget spent ({progress.disk_bytes} of {budgets.disk_bytes} bytes)",
        StopReason.CONSECUTIVE_FAILURES: (
            f"{progress.consecutive_failures} consecutive turns produced no valid measurement"
        ),
        StopReason.TARGET_REACHED: f"target {budgets.target} reached",
        StopReason.EXHAUSTED: "the knob surface is exhausted: every neighbouring setting was tried",
        StopReason.CANCELLED: "cancelled by the user",
        StopReason.BASELINE_FAILED: "the baseline failed",
        StopReason.ERROR: "an internal error stopped the run",
        StopReason.FEEDBACK_CLOSED: "the pull requests were closed",
        StopReason.MAX_ROUNDS: "the refinement-round budget is spent",
    }
    text = texts[reason]
    if detail:
        text += f": {detail}"
    return f"stopped: {text}{best}"
