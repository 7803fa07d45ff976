"""What an evaluator may not change: HEAD, status and content digests of each checkout of an arm.

Validation and metric commands must leave tracked files and HEAD alone (docs/metric.md). Comparing a
snapshot taken before them with one taken after names the offending paths, at the cost of a status
scan per checkout rather than a hash of the whole tree.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.services.execution.context import RunContext

Snapshot = tuple[str, dict[str, str], dict[str, str | None]]


def clean_snapshot(ctx: RunContext) -> dict[str, Snapshot]:
    """What the champion arm must look like: at the champion heads, nothing changed."""
    return {comp.name: (ctx.champion_heads[comp.name], {}, {}) for comp in ctx.components}


def snapshot(ctx: RunContext, arm: str, listed: dict[str, list[str]] | None = None) -> dict[str, Snapshot]:
    """HEAD, status and content digests of every checkout of ``arm``: what an evaluator may not change.
    With ``listed``, the same walk also lists each checkout's ignored entries into it."""
    out = {}
    for comp in ctx.components:
        co = ctx.checkout(arm, comp.name)
        if listed is None:
            status = co.status()
        else:
            status, listed[comp.name] = co.status_and_ignored()
        out[comp.name] = (co.head(), status, co.digest(status))
    return out


def mutations(before: Mapping[str, Snapshot], after: Mapping[str, Snapshot]) -> list[str]:
    found: list[str] = []
    for comp, (head, status, digest) in before.items():
        head2, status2, digest2 = after[comp]
        if head2 != head:
            found.append(f"{comp}: HEAD moved")
        for path in sorted(set(status) | set(status2)):
            if status.get(path) != status2.get(path) or digest.get(path) != digest2.get(path):
                found.append(f"{comp}/{path}")
    return found
