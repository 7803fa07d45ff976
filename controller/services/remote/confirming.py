"""The worker's side of a confirmation (ADR-0043): measure a claimed keep again, report only samples.

``crucible worker`` started with a confirmation's token fetches the champion and the claimed commits
from the controller (its start bundles, made from the controller's own clone), checks both out, and
measures them interleaved with the run's metric, stopping at the look that decides under the rule
the controller judges with (``confirm.confirm_rule``); when the candidate would be kept and a guard
needs the base while the champion is not the base, the base is measured as a third arm, as a turn
does. It sends the samples and nothing else: no agent runs, and the controller decides.
"""

from __future__ import annotations

import contextlib

from controller.brokers.base import RoundOutcome
from controller.domain.enums import RunStatus, SampleArm, StopReason
from controller.domain.jobs import RoundJob
from controller.services.execution.context import RunContext
from controller.services.execution.measure import ArmRoot, Measurement, measure
from controller.services.remote.confirm import confirm_rule
from controller.stats import Arm
from controller.stats.hold import hold_look
from controller.stats.sequential import LookAction, look
from controller.stats.verdicts import TurnRule, turn_verdict
from controller.store.http_ledger import WorkerApi
from controller.store.records import Sample
from controller.store.worker_protocol import ConfirmScope


def confirm_claim(ctx: RunContext, api: WorkerApi, job: RoundJob, scope: ConfirmScope) -> RoundOutcome:
    """Measure ``scope``'s claim (module docstring) and report it; the outcome for the worker's log."""
    spec, turn = ctx.spec, scope.turn
    metric, guards = spec.metric, ctx.guard_names()
    rule = confirm_rule(spec, job)
    ctx.ensure_arm("champion", scope.champion)
    ctx.ensure_arm("candidate", scope.candidate)
    protocol = ctx.protocol_env(turn, job.round)
    arms = [
        ArmRoot(SampleArm.CHAMPION, ctx.layout.workspace_root("champion")),
        ArmRoot(SampleArm.CANDIDATE, ctx.layout.workspace_root("candidate")),
    ]

    def decided(result: Measurement, pairs: int) -> bool:
        design = rule.design
        if design is None or pairs < design.min_pairs:
            return False
        candidate = result.arm(SampleArm.CANDIDATE, metric.name, guards)
        champion = result.arm(SampleArm.CHAMPION, metric.name, guards)
        if rule.hold is None:
            seen = look(rule.keep, design, candidate, champion)
        else:
            hold = rule.hold
            seen = hold_look(rule.keep, hold.tolerance, design, candidate, champion, hold.first_published)
        return seen.action is not LookAction.CONTINUE

    result = measure(ctx.executor, metric, arms, protocol=protocol, after_pair=decided)
    if result.cancelled:
        return RoundOutcome(RunStatus.CANCELLED, StopReason.CANCELLED, f"confirmation of turn {turn} cut off")
    samples: list[Sample] = list(result.raw)
    if result.error is None:
        samples += _base_if_needed(ctx, rule, result, scope, protocol)
    found = api.confirm(samples)
    verdict = "confirmed" if found.confirmed else "not confirmed"
    return RoundOutcome(RunStatus.RUNNING, None, f"turn {turn}: {verdict}: {found.detail}")


def _base_if_needed(
    ctx: RunContext, rule: TurnRule, result: Measurement, scope: ConfirmScope, protocol: dict[str, str]
) -> list[Sample]:
    """The base's samples when the rule asks for them (a keep with guards, the champion not the base)."""
    metric, guards = ctx.spec.metric, ctx.guard_names()
    candidate = result.arm(SampleArm.CANDIDATE, metric.name, guards)
    champion = result.arm(SampleArm.CHAMPION, metric.name, guards)
    extra: list[Sample] = []

    def base() -> Arm:
        if dict(scope.champion) == dict(ctx.base_shas):
            return champion
        ctx.ensure_arm("base", ctx.base_shas)
        root = ArmRoot(SampleArm.BASE, ctx.layout.workspace_root("base"))
        measured = measure(ctx.executor, metric, [root], protocol=protocol)
        extra.extend(measured.raw)
        return measured.arm(SampleArm.BASE, metric.name, guards)

    with contextlib.suppress(ValueError):  # the samples decide nothing: the controller says so
        turn_verdict(rule, candidate, champion, base)
    return extra
