"""``crucible patch`` and ``crucible accept``: the only way a run's result reaches the user's checkout.

``patch`` is read-only. ``accept`` applies the champion's diffs as uncommitted changes, all or nothing,
and refuses (naming the component and why) if a checkout's HEAD or worktree moved since the run started.
"""

from __future__ import annotations

from pathlib import Path

from controller.config.settings import Settings
from controller.domain.errors import GitError, RefusedError
from controller.services.views.reads import component_diff
from controller.services.views.userstate import user_head, user_state
from controller.store.ports import RunReads
from controller.workspace.git import run_git


def patch_text(settings: Settings, store: RunReads, run_id: str) -> str:
    """One unified diff per changed component, each under a ``# component: NAME`` line."""
    parts = []
    for comp in store.list_components(run_id):
        diff = component_diff(settings, run_id, comp)
        if diff:
            parts.append(f"# component: {comp.name}\n{diff if diff.endswith(chr(10)) else diff + chr(10)}")
    return "".join(parts)


def accept(settings: Settings, store: RunReads, run_id: str) -> list[str]:
    """Apply every changed component's diff to the user's checkout; return the components changed."""
    plans: list[tuple[str, Path, str]] = []
    for comp in store.list_components(run_id):
        diff = component_diff(settings, run_id, comp)
        if not diff:
            continue
        repo = Path(comp.repo)
        if not repo.is_dir():
            raise RefusedError(f"{comp.name}: accept works on local checkouts only ({comp.repo} is not one)")
        if user_head(repo) != comp.user_head:
            raise RefusedError(
                f"{comp.name}: HEAD of {repo} moved since the run started; nothing was applied"
            )
        if user_state(repo) != comp.user_state:
            raise RefusedError(
                f"{comp.name}: the working tree of {repo} changed since the run started; nothing was applied"
            )
        try:
            run_git(
                ["apply", "--check", "--binary", "-"], repo, input=diff.encode("utf-8", "surrogateescape")
            )
        except GitError as exc:
            raise RefusedError(f"{comp.name}: the patch does not apply: {exc.stderr.strip()}") from exc
        plans.append((comp.name, repo, diff))
    for _name, repo, diff in plans:
        run_git(["apply", "--binary", "-"], repo, input=diff.encode("utf-8", "surrogateescape"))
    return [name for name, _repo, _diff in plans]
