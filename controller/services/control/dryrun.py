"""``crucible loop --dry-run``: everything a run would do, resolved, without running anything.

The plan is a JSON object (``--dry-run --json`` prints it as it is), typed by the TypedDicts below so
the CLI's printer and this builder agree on its keys (mypy checks both sides).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from controller.agents.command import find_cli, preview_command
from controller.agents.registry import preset
from controller.brokers.kubernetes.manifest import TOKEN_VARIABLE, job_manifest, secret_manifest
from controller.config.paths import home_dir
from controller.config.spec import Spec
from controller.domain.jobs import RoundJob
from controller.engine.policy import check_paths, evaluator_paths
from controller.services.execution.runs import resolve_bases
from controller.workspace.envscrub import scrub_env
from controller.workspace.git import run_git
from controller.workspace.sandbox import resolve_network, sandbox_unusable
from controller.workspace.sandboxhost import readonly_paths, run_sandbox
from controller.workspace.sandboxprobe import preflight

SURFACE_LIMIT = 200  # files listed per component; the count is always exact
SANDBOX_HOME = "/tmp/crucible-home"  # a run's (RunLayout.sandbox_home)
DRY_RUN_ID = "r0-dry-run"  # a run id is made when the run is created; the dry run shows the shape

# A toolchain root the sandbox shows read-only, and the commands (``for``) that need it.
BoundToolchain = TypedDict("BoundToolchain", {"kind": str, "root": str, "for": list[str]})


class SandboxCheck(TypedDict):
    on: bool
    why: str
    problems: list[str]
    bound: list[BoundToolchain]


class PresetPlan(TypedDict):
    name: str
    cli: str | None
    missing: str | None
    install: str
    model: str | None
    base_url: str | None
    keys: list[str]
    keys_set: list[str]
    command: str


class KnobPlan(TypedDict):
    file: str
    key: str
    values: list[int | float | str | bool]


class AgentPlan(TypedDict):
    command: str | None
    builtin: str | None
    preset: PresetPlan | None
    knobs: list[KnobPlan]


class MetricPlan(TypedDict):
    command: str
    name: str
    direction: str
    samples: int
    warmups: int
    interleave: bool
    confidence: float
    guards: list[str]


class BudgetPlan(TypedDict):
    wall_clock_s: float | None
    cost_usd: float | None
    tokens: int | None
    disk_bytes: int | None
    max_consecutive_failures: int
    target: float | None


class PublishPlan(TypedDict):
    forge: str
    labels: list[str]
    reviewers: list[str]
    team_reviewers: list[str]
    assignees: list[str]
    title: str
    commit_message: str
    conventional: bool
    signoff: bool
    author: str | None
    status: str


class ComponentPlan(TypedDict):
    name: str
    repo: str
    base: str
    base_sha: str
    mutable_files: list[str]
    mutable_count: int
    protected: list[str]
    evaluator_files: list[str]


class DryRunPlan(TypedDict):
    publish: PublishPlan | None
    kubernetes: list[dict[str, object]] | None  # the manifests, as kubectl reads them
    dry_run: bool
    objective: str
    turns: int
    components: list[ComponentPlan]
    agent: AgentPlan
    metric: MetricPlan
    validation: str | None
    sandbox: str
    sandbox_on: bool
    sandbox_why: str
    sandbox_bound: list[BoundToolchain]
    sandbox_problems: list[str]
    budget: BudgetPlan


def sandbox_check(spec: Spec, environ: Mapping[str, str]) -> SandboxCheck:
    """Whether commands run sandboxed here, what the sandbox shows them of the hidden directories
    (toolchain roots), and what would keep the agent, validation or metric command from starting
    inside it, each a sentence naming the path and the fix, as a turn would report it.

    Each command's programs are started (interpreters with a no-op: ``python3 -c pass``) in the
    sandbox a run would build here (``sandboxhost.run_sandbox``: the same homes, deny list,
    ``sandbox.readonly`` and scrubbed environment), in the first component's repository, without
    running the command's work; a preset's CLI is started the same way."""
    sandboxed, _ = resolve_network(spec.sandbox.mode, spec.sandbox.network)
    if not sandboxed:
        why = "" if spec.sandbox.mode == "none" else f" ({sandbox_unusable()})"
        return {"on": False, "why": f"commands run without a sandbox{why}", "problems": [], "bound": []}
    repos = [comp.repo_path(spec.spec_dir) for comp in spec.components]
    box = run_sandbox(
        network=spec.sandbox.network,
        home=SANDBOX_HOME,
        environ=environ,
        readonly=readonly_paths(spec.sandbox.readonly, environ),
        private=[home_dir(environ)],
        projects=repos,
    )
    env = {**scrub_env(environ, spec.agent.env_allow).env, "HOME": SANDBOX_HOME}
    search = env.get("PATH")
    commands: list[tuple[str, str | None]] = [("agent", spec.agent.command)]
    if spec.agent.preset is not None:  # the CLI is the agent command (its argv's other words are data)
        cli = find_cli(spec.agent, spec.spec_dir, search)
        real = os.path.realpath(cli) if cli is not None and Path(cli).is_file() else None
        commands = [("agent", shlex.quote(real) if real is not None else None)]
    commands.append(("metric", spec.metric.command))
    if spec.validation is not None:
        commands.append(("validation", spec.validation.command))
    problems: list[str] = []
    bound: dict[str, BoundToolchain] = {}
    for role, command in commands:
        if command is None:
            continue
        found = preflight(command, box, environ=env, cwd=repos[0] if repos else None)
        problems += [f"{role}: {problem}" for problem in found if f"{role}: {problem}" not in problems]
        for chain in box.exposure(["/bin/sh", "-c", command], search).toolchains:
            entry = bound.setdefault(
                str(chain.root), {"kind": chain.kind, "root": str(chain.root), "for": []}
            )
            if role not in entry["for"]:
                entry["for"].append(role)
    return {"on": True, "why": "bubblewrap", "problems": problems, "bound": list(bound.values())}


def preset_plan(spec: Spec, environ: Mapping[str, str]) -> PresetPlan | None:
    """What ``agent.preset`` would run: the CLI found (or how to install it), the key variables it
    would be given and which of them are set, and the command a turn runs (the CLI's own). None without
    one."""
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
        "base_url": None if agent.base_url is None else str(agent.base_url),
        "keys": list(chosen.keys),
        "keys_set": [k for k in chosen.keys if environ.get(k)],
        "command": preview_command(
            agent,
            spec.spec_dir,
            sandboxed=sandboxed,
            search_path=environ.get("PATH"),
            workdir=spec.components[0].repo_path(spec.spec_dir),
        ),
    }


def dry_run(spec: Spec, environ: Mapping[str, str], turns: int | None = None) -> DryRunPlan:
    bases = resolve_bases(spec)
    sandbox = sandbox_check(spec, environ)
    commands = [spec.metric.command] + ([spec.validation.command] if spec.validation else [])
    components: list[ComponentPlan] = []
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
        "sandbox_on": sandbox["on"],
        "sandbox_why": sandbox["why"],
        "sandbox_bound": sandbox["bound"],
        "sandbox_problems": sandbox["problems"],
        "budget": {
            "wall_clock_s": budget.wall_clock,
            "cost_usd": budget.cost_usd,
            "tokens": budget.tokens,
            "disk_bytes": budget.disk,
            "max_consecutive_failures": budget.max_consecutive_failures,
            "target": budget.target,
        },
    }


def round_manifests(spec: Spec, bases: Mapping[str, str], turns: int) -> list[dict[str, object]] | None:
    """What the Kubernetes broker would create for round 0 (the Job, and its Secret with the token
    redacted); with ``parallel > 1``, for the pod of index 0 started in turn 1 (a round starts one
    such warm pod per index, which runs that index's hypotheses of every turn, ADR-0034). None
    unless ``[broker] kind = "kubernetes"``."""
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
            {"CRUCIBLE_PARALLEL_INDEX": "0", "CRUCIBLE_SLOT": "1", TOKEN_VARIABLE: "(minted per slot)"}
        )
    secret = secret_manifest(
        job,
        spec.broker,
        "(minted per launch, stored hashed)",
        owner_uid="(the Job's uid)",
        hypothesis=hypothesis,
    )
    return [job_manifest(job, spec.broker, env, hypothesis=hypothesis), secret]
