"""Confirmations (issue 21, ADR-0043): a claimed keep measured again where no agent ran.

The recount (``recount``) checks that a worker's decision is what its samples give, but the samples
themselves come from the worker: whoever holds a round's token can upload a real bundle whose commit
makes the metric worse and post a keep whose made-up samples agree with it. A confirmation is the
controller's own measurement of such a claim: a ``crucible worker`` started for it alone (through the
run's broker, with a token minted here, scoped to that one turn and never handed to the round's pod)
fetches the champion and the claimed commits from the controller's clone (the start bundles, where the
verified bundle was imported), measures both arms interleaved with the run's metric, and reports only
its samples. The controller decides from them with the run's keep rule (``confirm_rule``, which the
confirmation's worker stops its measurement with too) and records the outcome with the grant.

- ``confirm_grant``: what is stored with a confirmation's token (the round's job, the champion's
  heads, and ``confirm``: the turn and the claimed commits).
- ``confirm_rule``: the rule a confirmation decides with: the run's keep rule (the refinement round's
  hold rule in a round past 0), the sequential looks of the run's metric as if interleaved (both arms
  are measured here, whatever ``metric.interleave`` says of the round's own turns).
- ``record_confirmation``: a confirmation's report, judged and stored with its grant (its token is
  revoked with it). The other worker routes refuse a confirmation's token (``scopes``).
- ``judge``: the outcome of a confirmation's samples (``ConfirmationOutcome``): confirmed when the rule
  keeps the candidate on them; never confirmed when a sample is invalid or the samples decide nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.config.spec import Spec
from controller.domain.enums import SampleArm
from controller.domain.errors import ForbiddenError
from controller.domain.jobs import RoundJob
from controller.services.remote.recount import Mismatch, keep_rule, stored_arm
from controller.stats import Arm
from controller.stats.verdicts import HoldScore, TurnRule, sequential_design, turn_verdict
from controller.store.ports import RemoteRoundStore
from controller.store.records import Sample, WorkerRoundRecord
from controller.store.worker_protocol import ConfirmationOutcome, ConfirmScope


def record_confirmation(
    store: RemoteRoundStore, spec: Spec, grant: WorkerRoundRecord, samples: Sequence[Sample]
) -> ConfirmationOutcome:
    """What a confirmation's ``samples`` conclude of its claim (``judge``), stored with them on its
    grant, which revokes its token: a confirmation reports once."""
    scope = confirm_scope_of(grant.job)
    if scope is None:
        raise ForbiddenError("only a confirmation's token reports a confirmation")
    bases = {c.name: c.base_sha for c in store.list_components(grant.run_id)}
    found = judge(spec, RoundJob.from_json(grant.job), scope, samples, bases)
    stored = {"confirmation": found.model_dump(mode="json"), "samples": [list(s) for s in samples]}
    store.finish_worker_round(grant.token_hash, stored)
    return found


def confirm_grant(
    job: RoundJob, turn: int, champion: Mapping[str, str], candidate: Mapping[str, str]
) -> dict[str, object]:
    """The job stored with a confirmation's token: the round's, at the champion's heads (which the
    start bundles serve), and the claim it measures."""
    data: dict[str, object] = {**job.to_json(), "heads": dict(champion)}
    data["confirm"] = {"turn": turn, "champion": dict(champion), "candidate": dict(candidate)}
    return data


def confirm_scope_of(job: Mapping[str, Any]) -> ConfirmScope | None:
    """The claim a grant's job confirms; None for any other grant."""
    scope = job.get("confirm")
    return ConfirmScope.model_validate(scope) if isinstance(scope, Mapping) else None


def confirm_rule(spec: Spec, job: RoundJob) -> TurnRule:
    """The rule a confirmation decides with (module docstring)."""
    hold = None
    if job.round > 0 and job.hold is not None and spec.feedback is not None:
        hold = HoldScore(spec.feedback.hold, job.hold.first_published)
    metric = spec.metric.model_copy(update={"interleave": True})
    return TurnRule(keep=keep_rule(spec), design=sequential_design(metric), hold=hold)


def judge(
    spec: Spec, job: RoundJob, scope: ConfirmScope, samples: Sequence[Sample], bases: Mapping[str, str]
) -> ConfirmationOutcome:
    """Whether ``samples`` (a confirmation's) keep the claimed candidate (module docstring)."""
    turn = scope.turn
    invalid = [f"{arm} sample {index}" for arm, index, _v, valid in samples if not valid]
    if invalid:
        return ConfirmationOutcome(turn=turn, confirmed=False, detail=f"the metric failed ({invalid[0]})")
    try:
        candidate = stored_arm(spec, samples, SampleArm.CANDIDATE)
        champion = stored_arm(spec, samples, SampleArm.CHAMPION)
        if not candidate.primary or not champion.primary:
            raise Mismatch("the confirmation measured no pair")

        def base() -> Arm:
            arm = stored_arm(spec, samples, SampleArm.BASE)
            if arm.primary:
                return arm
            if dict(scope.champion) != dict(bases):
                raise Mismatch("a keep with guards, and no samples of the base")
            return champion

        found = turn_verdict(confirm_rule(spec, job), candidate, champion, base)
    except (Mismatch, ValueError) as exc:
        return ConfirmationOutcome(turn=turn, confirmed=False, detail=f"the samples decide nothing: {exc}")
    verdict = found.verdict
    return ConfirmationOutcome(
        turn=turn, confirmed=verdict.keep, detail=verdict.detail, value=verdict.candidate_median
    )
