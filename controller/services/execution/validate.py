"""Validation with retries, shared by the baseline and every turn (docs/metric.md).

Retries exist for flaky suites: validation passes if any attempt exits 0. A cancel stops at once.
"""

from __future__ import annotations

from enum import StrEnum

from controller.services.execution.context import RunContext


class Validation(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    CANCELLED = "cancelled"


def run_validation(ctx: RunContext, arm: str, turn: int, round_number: int) -> Validation:
    """Run the spec's validation command in ``arm``'s workspace; PASSED when there is none."""
    validation = ctx.spec.validation
    if validation is None:
        return Validation.PASSED
    for attempt in range(1 + validation.retries):
        label = "baseline" if turn == 0 else f"turn {turn}"
        ctx.observer.step(f"{label}: validating (attempt {attempt + 1})")
        result = ctx.executor.run(
            validation.command,
            cwd=ctx.layout.workspace_root(arm),
            timeout=validation.timeout,
            writable=[ctx.layout.arm_dir(arm)],
            protocol=ctx.protocol_env(turn, round_number, arm=arm),
            log=ctx.layout.log_file(turn, f"validation-{attempt + 1}"),
        )
        if result.cancelled:
            return Validation.CANCELLED
        if result.returncode == 0:
            return Validation.PASSED
    return Validation.FAILED
