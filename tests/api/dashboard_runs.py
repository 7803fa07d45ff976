"""Real runs in a real store for the dashboard tests and ``bench/dashboard.py``: turns decided through
``Store.decide_turn``, a candidate clone with a real commit (so the page shows a real diff), a pull
request, feedback with verdicts, a round and a drafted reply, every text field carrying ``text``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.config.settings import Settings
from controller.domain.enums import EventKind, Outcome, Reason, RunStatus, SampleArm
from controller.forge.base import FeedbackEvent
from controller.services.views.layout import RunLayout
from controller.store import NewRun, Store
from controller.store.records import (
    ChampionUpdate,
    ComponentRecord,
    HypothesisReport,
    ProcessState,
    PullRecord,
    TurnDecision,
)
from tests.conftest import git, make_repo


def seeded_run(
    store: Store,
    settings: Settings,
    run_id: str,
    *,
    turns: int,
    text: str = "",
    component: str = "app",
    options: Mapping[str, Any] | None = None,
    metric: str = "m",
) -> str:
    """A run of ``turns`` decided turns (every third kept, every seventh failed) with PRs and feedback;
    ``options`` as ``crucible loop`` stores them (``{"watch_feedback": True, ...}``)."""
    store.create_run(
        NewRun(
            id=run_id,
            spec_text="",
            spec_fingerprint="f",
            spec_path=None,
            objective=f"make it faster {text}",
            metric_name=metric,
            direction="minimize",
            turns_planned=turns + 2,
            options=dict(options or {}),
        )
    )
    clone = RunLayout(settings.run_dir(run_id), (component,)).checkout("candidate", component)
    make_repo(clone, {"src/a.py": "x = 1\n"})
    base = git(clone, "rev-parse", "HEAD")
    (clone / "src/a.py").write_text(f"x = 2  # {text}\n")
    git(clone, "commit", "-qam", "kept")
    head = git(clone, "rev-parse", "HEAD")
    store.add_component(ComponentRecord(run_id, component, str(clone), "main", base, base))
    store.start_baseline(run_id)
    store.set_baseline(run_id, 100.0, {"value": 100.0})
    best = 100.0
    for n in range(1, turns + 1):
        store.start_turn(run_id, n, 1 if n > turns * 0.8 else 0)
        kept, failed = n % 3 == 0, n % 7 == 0 and n % 3 != 0
        value = None if failed else (best * 0.99 if kept else best * 1.01)
        outcome = Outcome.ACCEPTED if kept else Outcome.FAILED if failed else Outcome.REJECTED
        reason = Reason.IMPROVED if kept else Reason.AGENT_FAILED if failed else Reason.NOT_IMPROVED
        decision = TurnDecision(
            outcome=outcome,
            reason=reason,
            value=value,
            p_value=0.01 if kept else 0.4,
            hypothesis=f"hypothesis {n} {text}",
            commits={component: head} if kept else {},
            cost_usd=0.01,
            duration_s=1.5,
        )
        samples = [] if value is None else [(SampleArm.CANDIDATE, i, {metric: value}, True) for i in range(3)]
        champion = ChampionUpdate(value, n) if kept and value is not None else None
        heads = {component: head} if kept else {}
        event = (EventKind(str(outcome)), {"turn": n})
        store.decide_turn(
            run_id, n, decision, champion=champion, component_heads=heads, event=event, samples=samples
        )
        if kept and value is not None:
            best = value
    store.save_pull(
        PullRecord(
            run_id,
            component,
            "o/app",
            7,
            f"javascript:alert(1)//{text}",
            f"crucible/{text}",
            head,
            head,
            base,
            process=ProcessState(labels=("perf",), problems=(f"reviewer ghost was refused: 422 {text}",)),
        )
    )
    item = store.add_feedback(
        run_id,
        component,
        FeedbackEvent(
            "o/app",
            7,
            "issue_comment",
            1,
            None,
            "rev",
            "User",
            "OWNER",
            f"please {text}",
            None,
            None,
            "created",
            "2026-01-01T00:00:00Z",
        ),
    )
    assert item is not None
    store.set_feedback_verdict(item.id, trusted=False, verdict="rejected", reason=f"untrusted {text}")
    store.append_event(
        run_id,
        EventKind.ROUND_FINISHED,
        {
            "round": 1,
            "component": component,
            "feedback": [item.id],
            "kept": True,
            "head": head,
            "detail": text,
        },
    )
    store.append_event(run_id, EventKind.REPLY_DRAFTED, {"feedback": item.id, "author": "rev", "reply": text})
    return run_id


def settings_of(home: Path, database_url: str) -> Settings:
    return Settings(home=home, database_url=database_url)


def running_turn(store: Store, run_id: str, number: int, samples: int = 3) -> None:
    """Mark the run running with turn ``number`` in its measurement: its step and some samples."""
    if store.get_run(run_id).status is not RunStatus.RUNNING:
        store.set_run_status(run_id, RunStatus.RUNNING)
    store.start_turn(run_id, number, 0, event=(EventKind.TURN_STARTED, {"turn": number, "round": 0}))
    step = {"turn": number, "round": 0, "step": "measuring", "arms": ["champion", "candidate"]}
    store.append_event(run_id, EventKind.TURN_STEP, step)
    for index in range(samples):
        for arm, value in (("champion", 100.0 + index), ("candidate", 97.5 - index)):
            sample = {"turn": number, "round": 0, "arm": arm, "index": index, "value": value, "valid": True}
            store.append_event(run_id, EventKind.SAMPLE, sample)


def parallel_turn(store: Store, run_id: str, number: int, text: str = "") -> None:
    """Decide turn ``number`` with three parallel hypotheses (ADR-0016): #0 could be kept but #1
    improved more and is kept (#0 superseded), #2 failed. Minimize: the champion's samples are 100.
    The run must not be running a turn (the champion value is not moved: the page reads the views)."""
    store.start_turn(
        run_id, number, 0, event=(EventKind.TURN_STARTED, {"turn": number, "round": 0, "parallel": 3})
    )
    ref = [(SampleArm.CHAMPION, i, {"m": 100.0}, True) for i in range(3)]
    for index, reason, value in (
        (0, Reason.IMPROVED, 95.0),
        (1, Reason.IMPROVED, 90.0),
        (2, Reason.AGENT_FAILED, None),
    ):
        samples = (
            [] if value is None else ref + [(SampleArm.CANDIDATE, i, {"m": value}, True) for i in range(3)]
        )
        report = HypothesisReport(
            index=index,
            reason=reason,
            value=value,
            reference_value=None if value is None else 100.0,
            delta=None if value is None else 100.0 - value,
            p_value=None if value is None else 0.01 * (index + 1),
            hypothesis=f"idea {index} {text}",
            samples=tuple(samples),
            detail=f"detail {index} {text}",
        )
        store.report_hypothesis(run_id, number, report)
    decision = TurnDecision(
        outcome=Outcome.ACCEPTED,
        reason=Reason.IMPROVED,
        value=90.0,
        p_value=0.02,
        hypothesis=f"idea 1 {text}",
    )
    final = {
        0: (Reason.SUPERSEDED, f"another improved more {text}"),
        1: (Reason.IMPROVED, "kept"),
        2: (Reason.AGENT_FAILED, f"the agent failed {text}"),
    }
    event = (EventKind.ACCEPTED, {"turn": number, "parallel_index": 1})
    store.decide_turn(
        run_id,
        number,
        decision,
        champion=None,
        component_heads={},
        event=event,
        samples=ref,
        hypotheses=final,
    )


def running_parallel_turn(store: Store, run_id: str, number: int) -> None:
    """Mark the run running with turn ``number`` of two hypotheses under way: #0 measuring (a
    champion sample, a candidate sample and an invalid one), #1 proposing."""
    if store.get_run(run_id).status is not RunStatus.RUNNING:
        store.set_run_status(run_id, RunStatus.RUNNING)
    started = {"turn": number, "round": 0, "parallel": 2}
    store.start_turn(run_id, number, 0, event=(EventKind.TURN_STARTED, started))
    for index, step, arms in ((0, "measuring", ["champion", "candidate"]), (1, "proposing", [])):
        payload: dict[str, object] = {"turn": number, "round": 0, "parallel_index": index, "step": step}
        if arms:
            payload["arms"] = arms
        store.append_event(run_id, EventKind.TURN_STEP, payload)
    for arm, value in (("champion", 100.0), ("candidate", 96.5), ("candidate", None)):
        sample = {"turn": number, "round": 0, "parallel_index": 0, "arm": arm, "index": 0}
        sample.update(value=value, valid=value is not None)
        store.append_event(run_id, EventKind.SAMPLE, sample)
