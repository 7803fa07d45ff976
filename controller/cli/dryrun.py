"""``crucible loop --dry-run`` without ``--json``: the plan (``services/control/dryrun.py``) as lines.

Kept out of ``main.py`` because it is a printer of one typed object, not a command: the command
resolves the plan, this says it in words (the JSON form is the plan itself).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from controller.services.control.dryrun import DryRunPlan, PresetPlan


def print_plan(plan: DryRunPlan, *, parallel: bool) -> None:
    """The plan, one fact a line; ``parallel``: the spec runs hypotheses in parallel pods, so the
    Kubernetes manifests shown are those of one hypothesis."""
    click.echo(f"objective: {plan['objective']}")
    click.echo(f"turns: {plan['turns']}")
    for comp in plan["components"]:
        click.echo(f"component {comp['name']}: {comp['repo']} base {comp['base']} = {comp['base_sha']}")
        click.echo(f"  mutable files ({comp['mutable_count']}): {', '.join(comp['mutable_files'][:20])}")
        if comp["evaluator_files"]:
            click.echo(f"  evaluator files (protected): {', '.join(comp['evaluator_files'])}")
    agent = plan["agent"]
    if agent["preset"] is not None:
        _echo_preset(agent["preset"])
    else:
        click.echo(f"agent: {agent['command'] or 'builtin ' + str(agent['builtin'])}")
    for knob in agent["knobs"]:
        click.echo(f"  knob {knob['file']}:{knob['key']} in {knob['values']}")
    m = plan["metric"]
    click.echo(f"metric: {m['command']}  ({m['name']}, {m['direction']}, {m['samples']} samples)")
    click.echo(f"validation: {plan['validation'] or '-'}")
    click.echo(f"sandbox: {plan['sandbox']} ({plan['sandbox_why']})")
    for chain in plan["sandbox_bound"]:
        click.echo(f"  shows read-only: {chain['kind']} {chain['root']} (for {', '.join(chain['for'])})")
    for problem in plan["sandbox_problems"]:  # reported, not fatal: init's placeholder agent is one
        click.echo(f"  cannot start: {problem}")
    if plan["sandbox_on"] and not plan["sandbox_problems"]:
        click.echo("  every command's programs start inside it")
    click.echo("budget: " + ", ".join(f"{k}={v}" for k, v in plan["budget"].items() if v is not None))
    pub = plan["publish"]
    if pub is not None:
        click.echo(f"publish: {pub['forge']}  (status: {pub['status']})")
        people = {
            "labels": pub["labels"],
            "reviewers": pub["reviewers"],
            "team_reviewers": pub["team_reviewers"],
            "assignees": pub["assignees"],
        }
        for key, names in people.items():
            if names:
                click.echo(f"  {key}: {', '.join(names)}")
        click.echo(f"  title: {pub['title']}")
        click.echo(f"  commit message: {pub['commit_message'].splitlines()[0]}")
        flags = " ".join(
            name for name, on in (("conventional", pub["conventional"]), ("signoff", pub["signoff"])) if on
        )
        click.echo(f"  author: {pub['author'] or 'crucible <crucible@localhost>'}  {flags}".rstrip())
    if plan["kubernetes"] is not None:
        where = "round 0 would run in this Job"
        if parallel:
            where = "each turn would run a Job like this per hypothesis (turn 1, hypothesis 0)"
        click.echo(f"kubernetes: {where}, its token in this Secret (kubectl reads JSON):")
        for manifest in plan["kubernetes"]:
            click.echo(json.dumps(manifest, indent=2))


def _echo_preset(chosen: PresetPlan) -> None:
    model = f", model {chosen['model']}" if chosen["model"] else ""
    endpoint = f", endpoint {chosen['base_url']}" if chosen["base_url"] else ""
    click.echo(f"agent: preset {chosen['name']}{model}{endpoint}")
    if chosen["missing"]:
        click.echo(f"  cannot start: {chosen['missing']}")
    else:
        click.echo(f"  cli: {chosen['cli']}")
    keys = ", ".join(f"{k} ({'set' if k in chosen['keys_set'] else 'not set'})" for k in chosen["keys"])
    click.echo(f"  key variables it gets: {keys}")
    click.echo(f"  runs: {chosen['command']}")
