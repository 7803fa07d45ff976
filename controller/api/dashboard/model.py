"""What the dashboard's templates show, computed from the typed views (``services.schemas``).

The templates only lay out; every number (change in %, Δ vs champion, durations), every sentence (the
stop reason) and every decision about a link (only http(s) URLs become ``href``) is made here, in
plain typed functions a test can call without HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from controller.domain.enums import StopReason
from controller.services import schemas
from controller.store.records import RunRecord, RunTally

STOP_SENTENCES: dict[StopReason, str] = {
    StopReason.MAX_TURNS: "It ran every turn it was asked for.",
    StopReason.WALL_CLOCK: "It stopped when its wall-clock budget ran out.",
    StopReason.COST: "It stopped when its cost budget ran out.",
    StopReason.TOKENS: "It stopped when its token budget ran out.",
    StopReason.DISK: "It stopped because the disk was nearly full.",
    StopReason.EXHAUSTED: "It stopped because the agent had no further ideas.",
    StopReason.TARGET_REACHED: "It stopped because the metric reached its target.",
    StopReason.FEEDBACK_CLOSED: "It stopped because its pull requests were closed or merged.",
    StopReason.MAX_ROUNDS: "It stopped after its last allowed refinement round.",
    StopReason.CONSECUTIVE_FAILURES: "It stopped after too many failed turns in a row.",
    StopReason.BASELINE_FAILED: "It stopped because the baseline could not be measured.",
    StopReason.CANCELLED: "It was cancelled by an operator.",
    StopReason.ERROR: "It stopped on an error.",
}


def stop_sentence(reason: StopReason | None, message: str | None) -> str:
    if reason is None:
        return ""
    sentence = STOP_SENTENCES.get(reason, f"It stopped ({reason}).")
    return f"{sentence} {message}" if message else sentence


def change_pct(baseline: float | None, best: float | None) -> str:
    """``+12.5%`` style change from the baseline to the best value ('' when undefined)."""
    if baseline is None or best is None or baseline == 0:
        return ""
    return f"{(best - baseline) / abs(baseline) * 100:+.1f}%"


def duration(start: datetime, end: datetime | None, now: datetime | None = None) -> str:
    end = end or now or datetime.now(UTC)
    seconds = max(0, int((end - start).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def safe_url(url: str) -> str | None:
    """The URL if it may become a link (http or https), else None: ``javascript:`` stays text."""
    return url if url.lower().startswith(("https://", "http://")) else None


@dataclass(frozen=True)
class RunLine:
    run: RunRecord
    tally: RunTally

    @property
    def change(self) -> str:
        return change_pct(self.run.baseline_value, self.run.champion_value)

    @property
    def duration(self) -> str:
        return duration(self.run.created_at, self.run.finished_at)


@dataclass(frozen=True)
class TurnLine:
    turn: schemas.Turn
    delta: str  # vs the champion before this turn

    @property
    def commit(self) -> str:
        c = self.turn.commit
        if c is None:
            return ""
        if isinstance(c, str):
            return c[:10]
        return ", ".join(f"{k}:{v[:10]}" for k, v in c.items())

    @property
    def samples(self) -> str:
        cand = ", ".join(f"{v:.6g}" for v in self.turn.samples)
        ref = ", ".join(f"{v:.6g}" for v in self.turn.reference_samples)
        return f"candidate: {cand or '-'} | champion: {ref or '-'}"


def turn_lines(turns: list[schemas.Turn], baseline: float | None) -> list[TurnLine]:
    """Turns with their change vs the champion they faced (the running kept value)."""
    champion = baseline
    out = []
    for t in sorted(turns, key=lambda t: t.turn):
        delta = change_pct(champion, t.value) if t.value is not None else ""
        out.append(TurnLine(t, delta))
        if t.outcome == "accepted" and t.value is not None:
            champion = t.value
    return out


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """A unified diff as (css class, line) pairs: the colouring, with the text left to autoescape."""
    out = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "diff --git", "index ")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out
