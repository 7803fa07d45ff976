"""Creating a run and (re)building its live context from the store.

``create_run`` resolves every component's base sha once, before anything is committed
(docs/architecture.md, "Vocabulary"), and records the user's checkout state for ``accept``;
``open_context`` turns stored facts back into checkouts at the recorded heads, which is also how a
resumed run reconciles its workspaces.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.agents.registry import preset
from controller.config.settings import Settings
from controller.config.spec import Spec
from controller.domain.errors import GitError, SpecError
from controller.domain.ids import new_run_id
from controller.forge.base import Forge
from controller.services.execution.context import Champion, Hooks, Observer, RunContext
from controller.services.execution.execute import Executor
from controller.services.execution.pgroups import GroupRegistry
from controller.services.views.layout import RunLayout
from controller.services.views.userstate import user_head, user_state
from controller.store.ledger import Ledger
from controller.store.ports import ContextRecords, RunLifecycle
from controller.store.records import ComponentRecord, NewRun
from controller.workspace.envscrub import scrub_env
from controller.workspace.git import resolve_ref
from controller.workspace.sandbox import resolve_network
from controller.workspace.sandboxhost import readonly_paths, run_sandbox


def resolve_bases(spec: Spec, forge: Forge | None = None) -> dict[str, str]:
    """Each component's base sha, resolved now (the run's one and only resolution).

    With a forge and an ``upstream``, the base comes from the upstream repository's branch, so
    commits the user has not pushed never leak into a PR (docs/architecture.md, "Vocabulary"); the
    local repository must already have that commit (crucible never fetches into the user's repository).
    """
    shas: dict[str, str] = {}
    for i, comp in enumerate(spec.components):
        if not comp.is_local():
            raise SpecError(f"component[{i}].repo", "only local repositories are supported by this version")
        repo = comp.repo_path(spec.spec_dir)
        if forge is not None and comp.upstream:
            shas[comp.name] = _upstream_base(forge, repo, comp.upstream, comp.base, i)
            continue
        try:
            shas[comp.name] = resolve_ref(repo, comp.base)
        except Exception as exc:
            raise SpecError(f"component[{i}].base", f"cannot resolve {comp.base!r}: {exc}") from exc
    return shas


def _upstream_base(forge: Forge, repo: Path, upstream: str, base: str, index: int) -> str:
    branch = forge.repo(upstream).default_branch if base == "HEAD" else base
    sha = forge.branch_sha(upstream, branch)
    if sha is None:
        raise SpecError(f"component[{index}].base", f"branch {branch!r} does not exist in {upstream}")
    try:
        resolve_ref(repo, sha)
    except GitError as exc:
        raise SpecError(
            f"component[{index}].upstream",
            f"{upstream} {branch} is at {sha[:12]}, which {repo} does not have; run `git fetch` there first",
        ) from exc
    return sha


def create_run(
    store: RunLifecycle,
    spec: Spec,
    spec_text: str,
    spec_path: Path | None,
    *,
    turns: int | None = None,
    options: Mapping[str, Any] | None = None,
    forge: Forge | None = None,
) -> str:
    """Record a new run (status pending) with its components; return its id."""
    bases = resolve_bases(spec, forge)
    run_id = new_run_id()
    components = [
        ComponentRecord(
            run_id=run_id,
            name=comp.name,
            repo=str(repo),
            base_ref=comp.base,
            base_sha=bases[comp.name],
            head_sha=bases[comp.name],
            user_head=user_head(repo),
            user_state=user_state(repo),
            upstream=comp.upstream,
            extra={},
        )
        for comp in spec.components
        for repo in [comp.repo_path(spec.spec_dir)]
    ]
    # One transaction: a server's scheduler may claim the pending run the moment it is committed.
    store.create_run(
        NewRun(
            id=run_id,
            spec_text=spec_text,
            spec_fingerprint=spec.fingerprint(),
            spec_path=str(spec_path) if spec_path else None,
            objective=spec.objective,
            metric_name=spec.metric.name,
            direction=str(spec.metric.direction),
            turns_planned=spec.turns if turns is None else turns,
            options=dict(options or {}),
        ),
        components,
    )
    return run_id


def check_sandbox(spec: Spec, environ: Mapping[str, str] | None = None) -> None:
    """SpecError when the spec asks for what no sandbox here can enforce (``sandbox.network = false``),
    or names a ``sandbox.readonly`` entry that does not exist here or would show a credential.
    ``environ``: the controller's (whose ``HOME`` expands ``~``); default this process's, which is the
    one that will run the commands."""
    resolve_network(spec.sandbox.mode, spec.sandbox.network)
    readonly_paths(spec.sandbox.readonly, os.environ if environ is None else environ)


def secret_files(settings: Settings) -> list[Path]:
    """The controller's own secret files (a GitHub App key, a kubeconfig): masked in every sandbox."""
    found = [settings.forge.github_app_private_key_file, settings.kubernetes.kubeconfig]
    return [p for p in found if p is not None]


def open_context(
    settings: Settings,
    store: ContextRecords,
    run_id: str,
    spec: Spec,
    *,
    environ: Mapping[str, str],
    observer: Observer | None = None,
    cancel: threading.Event | None = None,
    hooks: Hooks | None = None,
) -> RunContext:
    """The live context of a stored run, with candidate and champion checkouts at the stored heads
    (read from ``store``, which the context then holds as its ledger, and as nothing else);
    ``hooks``: what its driver hands the rounds (none: results stay local, ``run_loop`` claims the lease)."""
    components = store.list_components(run_id)
    return build_context(
        settings,
        store,
        run_id,
        spec,
        base_shas={c.name: c.base_sha for c in components},
        heads={c.name: c.head_sha for c in components},
        environ=environ,
        observer=observer,
        cancel=cancel,
        hooks=hooks,
    )


def build_context(
    settings: Settings,
    ledger: Ledger,
    run_id: str,
    spec: Spec,
    *,
    base_shas: Mapping[str, str],
    heads: Mapping[str, str],
    environ: Mapping[str, str],
    observer: Observer | None = None,
    cancel: threading.Event | None = None,
    lease_elsewhere: bool = False,
    contained: bool = False,
    hooks: Hooks | None = None,
) -> RunContext:
    """A run's live context from its spec and heads (by component, in the spec's order), with candidate
    and champion checkouts at ``heads``: ``open_context`` reads them from the store, ``crucible worker``
    from its round job. ``ledger``: the run's record as the turn path reaches it (the store on the
    controller, the HTTP ledger in a worker), the only part of the record the context holds;
    ``lease_elsewhere`` and ``contained`` as on ``RunContext``."""
    names = tuple(comp.name for comp in spec.components)
    layout = RunLayout(settings.run_dir(run_id), names)
    layout.agent_dir.mkdir(parents=True, exist_ok=True)
    layout.logs.mkdir(parents=True, exist_ok=True)
    sandbox, network_warning = resolve_network(spec.sandbox.mode, spec.sandbox.network)
    box = None
    if sandbox:
        box = run_sandbox(
            network=spec.sandbox.network,
            home=layout.sandbox_home,
            environ=environ,
            readonly=readonly_paths(spec.sandbox.readonly, environ),
            private=[settings.home],
            projects=[comp.repo_path(spec.spec_dir) for comp in spec.components],
            secret_files=secret_files(settings),
            tmpfs_bytes=spec.budget.disk,
        )
    executor = Executor(
        groups=GroupRegistry(layout.process_groups),
        run_id=run_id,
        scrubbed=scrub_env(environ, spec.agent.env_allow),
        box=box,
        disk_budget=spec.budget.disk,
        disk_root=layout.root,
        sandbox=sandbox,
        network=spec.sandbox.network,
        sandbox_home=layout.sandbox_home,
    )
    if cancel is not None:
        executor.cancel = cancel
    agent_env: dict[str, str] = {}
    if spec.agent.preset is not None:
        agent_env = {k: environ[k] for k in preset(spec.agent.preset).keys if environ.get(k)}
    ctx = RunContext(
        run_id=run_id,
        spec=spec,
        settings=settings,
        layout=layout,
        executor=executor,
        champion=Champion(heads, base_shas),
        ledger=ledger,
        observer=observer or Observer(),
        hooks=hooks or Hooks(),
        agent_env=agent_env,
        lease_elsewhere=lease_elsewhere,
        contained=contained,
    )
    ctx.ensure_arm("candidate", ctx.champion_heads)
    ctx.ensure_arm("champion", ctx.champion_heads)
    executor.readonly.append(layout.agent_dir)
    for comp in spec.components:
        # The other arms borrow the candidate clone's objects; they must stay visible, read-only.
        executor.readonly.append(ctx.checkout("candidate", comp.name).path / ".git" / "objects")
    if network_warning is not None:
        ctx.observer.warn(network_warning)
    if not sandbox:
        ctx.observer.warn(
            "no sandbox: agent, validation and metric commands run as you and can read your secrets "
            "(install bubblewrap or set sandbox.mode)"
        )
    return ctx
