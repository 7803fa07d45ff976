"""The baseline: validation and measurement of the base state before any turn (docs/metric.md).

A baseline that cannot be measured, fails validation, or whose evaluator changes tracked files stops
the run with ``baseline_failed`` and a message that names the cause (and the offending paths).
"""

from __future__ import annotations

from controller.domain.enums import SampleArm
from controller.domain.events import BaselinePayload
from controller.services.execution.context import RunContext
from controller.services.execution.measure import ArmRoot, measure
from controller.services.execution.snapshots import clean_snapshot, mutations, snapshot
from controller.services.execution.validate import Validation, run_validation
from controller.stats import median


def run_baseline(ctx: RunContext) -> str | None:
    """Measure the champion arm (== the base); return None on success, else why the baseline failed."""
    ctx.ledger.start_baseline(ctx.run_id)  # drops samples of a baseline cut off by a crash
    root = ctx.layout.workspace_root("champion")
    protocol = ctx.protocol_env(0, 0, arm="champion")
    before = clean_snapshot(ctx)
    validation = run_validation(ctx, "champion", 0, 0)
    if validation is Validation.CANCELLED:
        return "cancelled"
    if validation is Validation.FAILED:
        cause = f": {ctx.executor.last_start_problem}" if ctx.executor.last_start_problem else ""
        return f"validation fails on the base commit{cause}"
    ctx.observer.step("baseline: measuring")
    metric = ctx.spec.metric
    result = measure(
        ctx.executor,
        metric,
        [ArmRoot(SampleArm.BASELINE, root)],
        protocol=protocol,
        log_prefix=ctx.layout.log_file(0, "metric"),
    )
    ctx.ledger.add_samples(ctx.run_id, 0, result.raw)
    violations = ctx.executor.take_violations()
    if violations:
        return "the metric or validation command misbehaved: " + "; ".join(violations[:10])
    if result.error is not None:
        return result.error
    mutated = mutations(before, snapshot(ctx, "champion"))
    if mutated:
        return "the metric or validation command changed tracked files: " + ", ".join(mutated[:20])
    arm = result.arm(SampleArm.BASELINE, metric.name, ctx.guard_names())
    value = median(arm.primary)
    ctx.ledger.set_baseline(ctx.run_id, value, BaselinePayload(value=value, samples=list(arm.primary)).dump())
    ctx.champion.measured(arm)
    ctx.observer.baseline(value, list(arm.primary))
    return None
