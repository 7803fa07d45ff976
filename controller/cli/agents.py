"""``crucible agents``: the coding-agent presets, whether each CLI is installed here, and its version."""

from __future__ import annotations

import dataclasses

import click

from controller.cli.common import emit_json


def register(cli: click.Group) -> None:
    cli.add_command(agents)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="print the presets as one JSON array")
def agents(as_json: bool) -> None:
    """List the agent presets ([agent] preset = NAME), their CLIs and versions."""
    from controller.agents.probe import probe
    from controller.wiring import process_environment

    found = probe(process_environment())
    if as_json:
        emit_json([dataclasses.asdict(f) for f in found])
        return
    for f in found:
        where = f"{f.path} ({f.version or 'version unknown'})" if f.path else f"not installed: {f.install}"
        keys = ", ".join(f"{k} ({'set' if k in f.keys_set else 'not set'})" for k in f.keys)
        click.echo(f"{f.preset:<12} {f.title}: {where}")
        click.echo(f"{'':<12} key: {keys}")
