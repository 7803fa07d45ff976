"""What the dashboard's templates show, computed from the typed views (``services.views.schemas``).

The templates only lay out; every number (change in %, Δ vs champion, durations), every sentence (the
stop reason), the running turn and every decision about a link (only http(s) URLs become ``href``) is
made here, in plain typed functions a test can call without HTTP.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from controller.config.options import RunOptions
from controller.domain import events as payloads
from controller.domain.enums import EventKind, Outcome, RunStatus, StopReason, TurnStep
from controller.services.feedback.steer import STEERABLE
from controller.services.views import schemas
from controller.store.records import ComponentRecord, EventRecord, PullRecord, RunRecord, RunTally

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


ACTIONS = {"cancel": "Cancel this run", "resume": "Resume this run", "round": "Start a refinement round"}


def run_actions(run: RunRecord, pulls: Sequence[PullRecord]) -> dict[str, str]:
    """The operator actions that apply to ``run`` now, as the services would accept them: cancel a
    pending or running run; resume a cancelled one (a finished run cannot be resumed, a running one
    needs nothing); start a refinement round on a run that watches feedback and has an open PR."""
    out = {}
    if run.status in (RunStatus.PENDING, RunStatus.RUNNING):
        out["cancel"] = ACTIONS["cancel"]
    if run.status is RunStatus.CANCELLED:
        out["resume"] = ACTIONS["resume"]
    watching = run.status is RunStatus.RUNNING and run.phase in STEERABLE
    if watching and RunOptions.stored(run.options).watch_feedback and any(p.state == "open" for p in pulls):
        out["round"] = ACTIONS["round"]
    return out


@dataclass(frozen=True)
class PullLine:
    """What the PR table adds to a PR's view: the base it targets and how it drifted."""

    base: str
    drift: str


def pull_lines(pulls: Sequence[PullRecord], components: Sequence[ComponentRecord]) -> dict[str, PullLine]:
    """Per component: ``main @ <base sha>``, and the drift: bases followed since the run started (the
    upstream moved) and a head someone else pushed (adopted or paused on), else ``none``."""
    by_name = {c.name: c for c in components}
    out = {}
    for pull in pulls:
        component = by_name.get(pull.component)
        ref = component.base_ref if component else "base"
        drift = []
        bases = list(component.extra.get("bases", [])) if component else []
        if len(bases) > 1:
            drift.append(f"followed the base {len(bases) - 1}× since {str(bases[0])[:10]}")
        if pull.head_sha != pull.pushed_sha:
            drift.append(f"someone else pushed {pull.head_sha[:10]} (crucible pushed {pull.pushed_sha[:10]})")
        out[pull.component] = PullLine(f"{ref} @ {pull.base_sha[:10]}", "; ".join(drift) or "none")
    return out


@dataclass(frozen=True)
class HypothesisLine:
    """One of a parallel turn's hypotheses as its table shows it: its median against the champion's
    (from its own samples), the change between them, and whether it is the one the turn kept."""

    hypothesis: schemas.Hypothesis

    @property
    def kept(self) -> bool:
        return self.hypothesis.outcome is Outcome.ACCEPTED

    @property
    def champion_median(self) -> float | None:
        ref = self.hypothesis.reference_samples
        return statistics.median(ref) if ref else None

    @property
    def change(self) -> str:
        return change_pct(self.champion_median, self.hypothesis.value)

    @property
    def samples(self) -> str:
        cand = ", ".join(f"{v:.6g}" for v in self.hypothesis.samples)
        ref = ", ".join(f"{v:.6g}" for v in self.hypothesis.reference_samples)
        return f"candidate: {cand or '-'} | champion: {ref or '-'}"


def hypothesis_lines(turn: schemas.Turn) -> list[HypothesisLine]:
    return [HypothesisLine(h) for h in sorted(turn.hypotheses, key=lambda h: h.index)]


def unfolded_turns(parallel: Collection[int], latest: int) -> frozenset[int]:
    """The latest ``latest`` of the ``parallel`` turns, whose hypotheses the run page tabulates under
    their row (and so reads with their samples); older ones link to their turn page, so a long
    parallel run's page stays about as heavy as a run of one (``bench/dashboard.py --parallel 3``)."""
    return frozenset(sorted(parallel)[-latest:]) if latest > 0 else frozenset()


def hypotheses_summary(outcomes: Mapping[int, Outcome]) -> str:
    """``3 hypotheses, #1 kept`` (or ``none kept``) for the folded row under a parallel turn, from
    each hypothesis's outcome by index (``Store.hypothesis_outcomes``)."""
    kept = sorted(index for index, outcome in outcomes.items() if outcome is Outcome.ACCEPTED)
    which = f"#{kept[0]} kept" if kept else "none kept"
    return f"{len(outcomes)} hypotheses, {which}"


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


DECISIONS = frozenset({EventKind.ACCEPTED, EventKind.REJECTED, EventKind.FAILED, EventKind.NO_CHANGE})


def step_text(step: str, arms: Sequence[str]) -> str:
    if step == TurnStep.MEASURING and arms:
        return f"measuring {' vs '.join(arms)}"
    return step


@dataclass
class RunningTurn:
    """The undecided turn as its events tell it so far: the live panel of the run page (``live.js``
    keeps it current with the same texts). A parallel turn's events carry ``parallel_index``: each
    hypothesis has its own step (``steps``) and its own rows of samples (``#1 candidate``)."""

    turn: int
    round: int
    parallel: int = 0  # the hypotheses the turn runs; 0 for a turn of one
    step_text: str = "starting"
    steps: dict[int, str] = field(default_factory=dict)
    samples: dict[str, list[float | None]] = field(default_factory=dict)

    def lines(self) -> list[tuple[str, str, str]]:
        """(arm, its samples so far, their median) per arm, in the order they were first measured."""
        out = []
        for arm, values in self.samples.items():
            valid = [v for v in values if v is not None]
            shown = ", ".join("invalid" if v is None else f"{v:.6g}" for v in values)
            out.append((arm, shown, f"{statistics.median(valid):.6g}" if valid else ""))
        return out


def running_turn(events: Sequence[EventRecord]) -> RunningTurn | None:
    """Fold a run's events from its last ``turn_started`` on into the running turn (None: decided).
    An event whose payload does not match its kind is left out (``domain.events``)."""
    current: RunningTurn | None = None
    for event in events:
        if event.kind is EventKind.TURN_STARTED:
            started = payloads.read(payloads.TurnStartedPayload, event.payload)
            if started is not None:
                current = RunningTurn(started.turn, started.round, started.parallel or 0)
        elif current is None or event.payload.get("turn") != current.turn:
            continue
        elif event.kind in DECISIONS:
            current = None
        elif event.kind is EventKind.TURN_STEP:
            step = payloads.read(payloads.TurnStepPayload, event.payload)
            if step is None:
                continue
            text = step_text(str(step.step), [str(a) for a in step.arms])
            if step.parallel_index is not None:
                current.steps[step.parallel_index] = text
                text = f"hypothesis #{step.parallel_index}: {text}"
            current.step_text = text
        elif event.kind is EventKind.SAMPLE:
            sample = payloads.read(payloads.SamplePayload, event.payload)
            if sample is None:
                continue
            index = sample.parallel_index
            arm = str(sample.arm) if index is None else f"#{index} {sample.arm}"
            current.samples.setdefault(arm, []).append(sample.value)
    return current
