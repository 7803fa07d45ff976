"""Following a moved upstream base without rewriting history (DESIGN §7, base drift).

Before re-publishing, if the upstream base branch moved, the candidate's change is applied three-way
onto the new base. If that is clean, crucible makes a commit whose parents are the PR head and the new
base (so pushing it is a fast-forward and the PR's diff becomes candidate vs new base), measures it,
and records both bases. On a conflict nothing is pushed and the PR body says ``needs rebase: <paths>``.
"""

from __future__ import annotations

from controller.config.spec import ComponentSpec
from controller.domain.enums import SampleArm
from controller.forge.base import Forge
from controller.services.context import RunContext
from controller.services.measure import ArmRoot, measure
from controller.stats import median
from controller.workspace.push import fetch_commit


def follow_upstream(ctx: RunContext, forge: Forge, component: ComponentSpec, notes: list[str]) -> None:
    """Bring ``component`` onto its upstream base if that moved; explain what happened in ``notes``."""
    upstream = component.upstream
    if upstream is None:
        return
    name = component.name
    branch = forge.repo(upstream).default_branch if component.base == "HEAD" else component.base
    now = forge.branch_sha(upstream, branch)
    old = ctx.base_shas[name]
    if now is None or now == old:
        return
    clone = ctx.checkout("candidate", name)
    new_base = fetch_commit(clone.path, forge.repo(upstream).clone_url, now, forge.git_auth_env(upstream))
    head = ctx.champion_heads[name]
    tree, conflicts = clone.merge_onto(new_base, head)
    if tree is None:
        notes.append(f"needs rebase: {', '.join(conflicts)} (upstream {branch} moved to {new_base[:12]})")
        return
    message = f"crucible: follow {branch} to {new_base[:12]}\n\nrun {ctx.run_id}: the candidate on it"
    merged = clone.commit_tree(tree, [head, new_base], message)
    heads = {**ctx.champion_heads, name: merged}
    ctx.ensure_arm("candidate", heads)
    result = measure(
        ctx.executor,
        ctx.spec.metric,
        [ArmRoot(SampleArm.CANDIDATE, ctx.layout.workspace_root("candidate"))],
        protocol=ctx.protocol_env(0, ctx.store.get_run(ctx.run_id).round),
        log_prefix=ctx.layout.logs / f"base-{new_base[:12]}.log",
    )
    if result.error is not None:
        ctx.ensure_arm("candidate", ctx.champion_heads)
        notes.append(
            f"upstream {branch} moved to {new_base[:12]}, but the candidate on it fails: {result.error}"
        )
        return
    values = [row[ctx.spec.metric.name] for row in result.samples[SampleArm.CANDIDATE]]
    value = median(values)
    event = {"component": name, "old_base": old, "new_base": new_base, "head": merged, "samples": values}
    ctx.store.follow_base(
        ctx.run_id, name, new_base=new_base, head_sha=merged, event={**event, "value": value}
    )
    clone.set_refs({"refs/crucible/champion": merged})
    ctx.base_shas[name] = new_base
    ctx.champion_heads = heads
    ctx.ensure_arm("champion", heads)
    notes.append(
        f"followed {branch} from {old[:12]} to {new_base[:12]} with {merged[:12]}; "
        f"re-measured there: {ctx.spec.metric.name} = {value:.6g}"
    )
