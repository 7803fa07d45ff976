"""``crucible loop --dry-run``: everything a run would do, resolved, without running anything."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.agents.command import agent_command, find_cli
from controller.agents.registry import preset
from controller.brokers.kubernetes.manifest import TOKEN_VARIABLE, job_manifest, secret_manifest
from controller.config.spec import Spec
from controller.domain.jobs import RoundJob
from controller.engine.policy import check_paths, evaluator_paths
from controller.services.execution.runs import resolve_bases
from controller.workspace.git import run_git
from controller.workspace.sandbox import preflight, resolve_network

SURFACE_LIMIT = 200  # files listed per component; the count is always exact
DRY_RUN_ID = "r0-dry-run"  # a run id is made when the run is created; the dry run shows the shape


def sandbox_problems(spec: Spec, environ: Mapping[str, str]) -> list[str]:
    """What would keep the agent, validation or metric command from starting inside the sandbox
    (issue 13), as a turn would report it; [] without a sandbox."""
    sandboxed, _ = resolve_network(spec.sandbox.mode, spec.sandbox.network)
    if not sandboxed:
        return []
    home = Path(environ.get("HOME") or "/").resolve()
    hide = [home] if home.is_dir() and home != Path("/") else []
    agent = spec.agent.command
    if spec.agent.preset is not None:
        agent = agent_command(spec.agent, spec.spec_dir, sandboxed=True, search_path=environ.get("PATH"))
    commands = {"agent": agent, "metric": spec.metric.command}
    if spec.validation is not None:
        commands["validation"] = spec.validation.command
    problems: list[str] = []
    for role, command in commands.items():
        if command is None:
            continue
        found = preflight(
            command, network=spec.sandbox.network, home="/tmp", hide=hide, search_path=environ.get("PATH")
        )
        problems += [f"{role}: {problem}" for problem in found]
    return problems


def preset_plan(spec: Spec, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """What ``agent.preset`` would run: the CLI found (or how to install it), the key variables it
    would be given and which of them are set, and the wrapper command a turn runs. None without one."""
    agent = spec.agent
    if agent.preset is None:
        return None
    chosen = preset(agent.preset)
    sandboxed, _ = resolve_network(spec.sandbox.mode, spec.sandbox.network)
    cli = find_cli(agent, spec.spec_dir, environ.get("PATH"))
    found = cli is not None and Path(cli).is_file()
    install = chosen.install
    return {
        "name": chosen.name,
        "cli": cli if found else None,
        "missing": None if found else f"{chosen.title} ({cli or chosen.program}) is not installed: {install}",
        "install": chosen.install,
        "model": agent.model,
        "base_url": agent.base_url,
        "keys": list(chosen.keys),
        "keys_set": [k for k in chosen.keys if environ.get(k)],
        "command": agent_command(agent, spec.spec_dir, sandboxed=sandboxed, search_path=environ.get("PATH")),
    }


def dry_run(spec: Spec, environ: Mapping[str, str], turns: int | None = None) -> dict[str, Any]:
    bases = resolve_bases(spec)
    commands = [spec.metric.command] + ([spec.validation.command] if spec.validation else [])
    components = []
    for comp in spec.components:
        repo = comp.repo_path(spec.spec_dir)
        files = run_git(["ls-tree", "-r", "--name-only", "-z", bases[comp.name]], repo).split("\0")
        named = evaluator_paths(commands, repo)
        mutable = [
            f
            for f in files
            if f
            and check_paths([f], mutable=comp.mutable, protected=comp.protected, evaluator_paths=named).ok
        ]
        components.append(
            {
                "name": comp.name,
                "repo": str(repo),
                "base": comp.base,
                "base_sha": bases[comp.name],
                "mutable_files": mutable[:SURFACE_LIMIT],
                "mutable_count": len(mutable),
                "protected": list(comp.protected),
                "evaluator_files": sorted(named),
            }
        )
    budget = spec.budget
    publish = spec.publish
    return {
        "publish": None
        if publish is None
        else {
            "forge": publish.forge,
            "labels": list(publish.labels),
            "reviewers": list(publish.reviewers),
            "team_reviewers": list(publish.team_reviewers),
            "assignees": list(publish.assignees),
            "title": publish.title_template(),
            "commit_message": publish.commit_template(),
            "conventional": publish.conventional,
            "signoff": publish.signoff,
            "author": f"{publish.author.name} <{publish.author.email}>" if publish.author else None,
            "status": publish.status,
        },
        "kubernetes": round_manifests(spec, bases, spec.turns if turns is None else turns),
        "dry_run": True,
        "objective": spec.objective,
        "turns": spec.turns if turns is None else turns,
        "components": components,
        "agent": {
            "command": spec.agent.command,
            "builtin": spec.agent.builtin,
            "preset": preset_plan(spec, environ),
            "knobs": [
                {"file": k.file, "key": k.key, "values": list(k.candidates())} for k in spec.agent.knobs
            ],
        },
        "metric": {
            "command": spec.metric.command,
            "name": spec.metric.name,
            "direction": str(spec.metric.direction),
            "samples": spec.metric.samples,
            "warmups": spec.metric.warmups,
            "interleave": spec.metric.interleave,
            "confidence": spec.metric.confidence,
            "guards": [g.name for g in spec.metric.guards],
        },
        "validation": spec.validation.command if spec.validation else None,
        "sandbox": spec.sandbox.mode,
        "sandbox_problems": sandbox_problems(spec, environ),
        "budget": {
            "wall_clock_s": budget.wall_clock,
            "cost_usd": budget.cost_usd,
            "tokens": budget.tokens,
            "disk_bytes": budget.disk,
            "max_consecutive_failures": budget.max_consecutive_failures,
            "target": budget.target,
        },
    }


def round_manifests(spec: Spec, bases: Mapping[str, str], turns: int) -> list[dict[str, Any]] | None:
    """What the Kubernetes broker would create for round 0 (the Job, and its Secret with the token
    redacted); with ``parallel > 1``, for the first hypothesis of turn 1 (each turn creates one such
    Job per hypothesis, ADR-0018). None unless ``[broker] kind = "kubernetes"``."""
    if spec.broker.kind != "kubernetes":
        return None
    env = {
        "CRUCIBLE_CONTROLLER_URL": "(the controller's API URL)",
        "CRUCIBLE_RUN_ID": DRY_RUN_ID,
        "CRUCIBLE_ROUND": "0",
        TOKEN_VARIABLE: "(minted per round)",
    }
    hypothesis = None
    job = RoundJob(run_id=DRY_RUN_ID, round=0, turns=turns, first_turn=1, heads=bases)
    if spec.broker.parallel > 1:
        hypothesis = (1, 0)
        job = RoundJob(run_id=DRY_RUN_ID, round=0, turns=1, first_turn=1, heads=bases)
        env.update(
            {"CRUCIBLE_TURN": "1", "CRUCIBLE_PARALLEL_INDEX": "0", TOKEN_VARIABLE: "(minted per hypothesis)"}
        )
    secret = secret_manifest(
        job,
        spec.broker,
        "(minted per launch, stored hashed)",
        owner_uid="(the Job's uid)",
        hypothesis=hypothesis,
    )
    return [job_manifest(job, spec.broker, env, hypothesis=hypothesis), secret]
