"""Verifying and importing the bundle of a worker's commits (ADR-0014, ADR-0031), apart from the
worker tokens and routes of ``remote_rounds``: this is the one place a worker's objects enter a
repository the controller publishes from, so every check that keeps a loop pod from widening its
round's reach is here, in order, each refusal recorded as the turn's ``policy_violation``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from controller.config.spec import Spec
from controller.domain.errors import GitError
from controller.domain.jobs import RoundJob
from controller.engine.policy import check_paths, evaluator_paths
from controller.services.remote.refusals import PolicyViolation, refuse_bundle
from controller.store.ports import RemoteRoundStore
from controller.store.records import WorkerRoundRecord
from controller.workspace import bundles
from controller.workspace.checkout import CRUCIBLE_REF_PREFIX
from controller.workspace.git import is_ancestor


def import_bundle(
    store: RemoteRoundStore,
    grant: WorkerRoundRecord,
    path: Path,
    turn: int | None,
    *,
    spec: Spec,
    components: tuple[str, ...],
    repo_of: Callable[[str], Path],
    scratch: Path,
) -> dict[str, str]:
    """The heads the bundle at ``path`` proves, fetched into each component's repository and pinned
    under ``refs/crucible/<run>/worker/``: only the run's own refs, each building on and descending
    from the round's start, changing only paths the spec lets the agent change, with no submodule
    link or symlink leaving the repository. PolicyViolation (recorded) at the first refusal."""
    run_id = grant.run_id
    job = RoundJob.from_json(grant.job)

    def refuse(detail: str) -> PolicyViolation:
        return refuse_bundle(store, grant, turn, detail)

    try:
        heads = bundles.list_heads(path, scratch)
    except GitError as exc:
        raise refuse(f"not a git bundle: {exc}") from exc
    allowed = {f"{CRUCIBLE_REF_PREFIX}{run_id}/{name}": name for name in components}
    outside = sorted(ref for ref in heads if ref not in allowed)
    if outside or not heads:
        raise refuse(f"refs outside the run: {', '.join(outside) or '(none at all)'}")
    proved: dict[str, str] = {}
    for ref, sha in heads.items():
        name = allowed[ref]
        repo = repo_of(name)
        problem = bundles.verify(path, repo)
        if problem is not None:
            raise refuse(f"{name}: the bundle does not build on the round's start: {problem}")
        bundles.fetch(path, repo, [ref])
        start = job.heads[name]
        if not is_ancestor(repo, start, sha):
            raise refuse(f"{name}: {sha[:12]} does not descend from the start {start[:12]}")
        comp_spec = spec.component(name)
        commands = [spec.metric.command] + ([spec.validation.command] if spec.validation else [])
        named = evaluator_paths(commands, repo)
        for commit, paths in bundles.paths_by_commit(repo, start, sha).items():
            verdict = check_paths(
                paths, mutable=comp_spec.mutable, protected=comp_spec.protected, evaluator_paths=named
            )
            if not verdict.ok:
                raise refuse(f"{name}: commit {commit[:12]} changes {'; '.join(verdict.violations[:10])}")
        unsafe = bundles.unsafe_entries(repo, start, sha)
        if unsafe:
            raise refuse(f"{name}: {'; '.join(unsafe[:10])}")
        proved[name] = sha
    for name, sha in proved.items():
        bundles.pin(repo_of(name), f"{CRUCIBLE_REF_PREFIX}{run_id}/worker/{name}", sha)
    store.prove_worker_heads(grant.token_hash, proved)
    return proved
