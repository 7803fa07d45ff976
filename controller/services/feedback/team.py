"""Fitting a published PR into the team's process (``[publish]``), once per PR and per pushed head.

The publisher calls these after it has pushed and described a PR:

- ``fit`` adds the labels, requests the reviews and adds the assignees the spec names that this PR's
  record has not handled yet. Each name is handled once, whether the forge took it or refused it, so
  a push of a better candidate never requests the same reviews again, a person who removes a label
  does not see it come back, and an unknown reviewer is reported once (in the run's events and on
  the dashboard) instead of failing every publish. A transient failure handles nothing: the next
  publish tries again.
- ``report_result`` puts the measured result on the pushed head, once per head: a check run when the
  credentials are a GitHub App's (or the spec asks for one), else a commit status, named
  ``crucible/<metric>``. A head nobody measured (someone else's push) gets nothing.
- ``mark_unheld`` marks a refinement round that could not hold the score on the PR head it left in
  place (``crucible/<metric>/refinement``: a neutral check run, or a failed status, which has no
  neutral), once per round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from controller.config.publish import PublishSpec
from controller.engine.conventions import status_line
from controller.forge.base import Applied, CommitCheck, ForgeError, TeamProcess
from controller.store.records import ProcessState


@dataclass(frozen=True)
class Fitted:
    """The PR's new process state, the refusals first seen now (for the run's events), and the
    transient failures that left something for the next publish (for the log)."""

    state: ProcessState
    refused: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()


def _wanted(publish: PublishSpec) -> tuple[list[str], list[str], list[str]]:
    reviewers = [*publish.reviewers, *(f"team:{slug}" for slug in publish.team_reviewers)]
    return list(publish.labels), reviewers, list(publish.assignees)


def _new(names: Sequence[str], handled: Sequence[str]) -> list[str]:
    seen = {name.casefold() for name in handled}
    return [name for name in names if name.casefold() not in seen]


def fit(
    process: TeamProcess, publish: PublishSpec | None, repo: str, number: int, state: ProcessState
) -> Fitted:
    """Apply what ``publish`` asks and ``state`` has not handled to PR ``repo#number``."""
    if publish is None:
        return Fitted(state)
    labels, reviewers, assignees = _wanted(publish)
    refused: list[str] = []
    deferred: list[str] = []

    def step(
        kind: str, names: list[str], handled: tuple[str, ...], call: Callable[[list[str]], Applied]
    ) -> tuple[str, ...]:
        todo = _new(names, handled)
        if not todo:
            return handled
        try:
            applied = call(todo)
        except ForgeError as exc:
            deferred.append(f"{kind} {', '.join(todo)}: {exc}")
            return handled
        refused.extend(f"{kind} {name} was refused: {why}" for name, why in applied.refused)
        return (*handled, *applied.done, *(name for name, _ in applied.refused))

    new_labels = step("label", labels, state.labels, lambda todo: process.add_labels(repo, number, todo))
    new_reviewers = step(
        "reviewer",
        reviewers,
        state.reviewers,
        lambda todo: process.request_reviewers(
            repo,
            number,
            [n for n in todo if not n.startswith("team:")],
            [n.removeprefix("team:") for n in todo if n.startswith("team:")],
        ),
    )
    new_assignees = step(
        "assignee", assignees, state.assignees, lambda todo: process.add_assignees(repo, number, todo)
    )
    fitted = ProcessState(
        labels=new_labels,
        reviewers=new_reviewers,
        assignees=new_assignees,
        problems=(*state.problems, *refused),
        marked=state.marked,
    )
    return Fitted(fitted, tuple(refused), tuple(deferred))


def check_name(metric: str) -> str:
    return f"crucible/{metric}"


def run_url(dashboard_url: str | None, run_id: str) -> str:
    """The run's page on the dashboard, when the operator said where it is served."""
    return f"{dashboard_url.rstrip('/')}/runs/{run_id}" if dashboard_url else ""


@dataclass(frozen=True)
class Measured:
    """What is reported for one pushed head: its median against the baseline, the test's p-value
    when this head is the one the test ran for, and the score table for a check run's text."""

    metric: str
    minimize: bool
    baseline: float | None
    value: float
    p_value: float | None
    table: str


def report_result(
    process: TeamProcess,
    publish: PublishSpec,
    repo: str,
    sha: str,
    measured: Measured,
    details_url: str,
) -> str | None:
    """Report ``measured`` on ``sha``; None, or a sentence when a check run was refused and a
    commit status stands in for it (the run's events say so). ForgeError when nothing could be
    reported (the next publish tries again)."""
    better = measured.baseline is None or (
        measured.value < measured.baseline if measured.minimize else measured.value > measured.baseline
    )
    line = status_line(measured.metric, measured.baseline, measured.value, measured.p_value)
    check = CommitCheck(
        name=check_name(measured.metric),
        conclusion="success" if better else "neutral",
        title=line,
        summary=line + (f"\n\n[The run on the dashboard]({details_url})" if details_url else ""),
        text=measured.table,
        details_url=details_url,
    )
    return _report(process, publish, repo, sha, check)


def mark_unheld(
    process: TeamProcess,
    publish: PublishSpec,
    repo: str,
    sha: str,
    metric: str,
    round_number: int,
    detail: str,
) -> str | None:
    """Mark on ``sha`` (the PR head a refinement round left in place) that the round could not hold
    the score; as ``report_result``."""
    title = f"round {round_number} could not hold the score; nothing was pushed: {detail}"
    check = CommitCheck(
        name=f"{check_name(metric)}/refinement",
        conclusion="neutral",
        title=title if len(title) <= 140 else title[:139] + "…",
        summary=title,
    )
    return _report(process, publish, repo, sha, check)


def _report(
    process: TeamProcess, publish: PublishSpec, repo: str, sha: str, check: CommitCheck
) -> str | None:
    wants_run = publish.status == "check-run" or (publish.status == "auto" and process.check_runs)
    if not wants_run:
        process.report(repo, sha, check, check_run=False)
        return None
    try:
        process.report(repo, sha, check, check_run=True)
        return None
    except ForgeError as exc:
        if "403" not in str(exc):
            raise
        process.report(repo, sha, replace(check, text=""), check_run=False)
        return f"check runs were refused ({exc}); the result is a commit status instead"
