"""Building the forge client at the edge, from the spec and the environment (never from the spec alone:
credentials come only from the environment, so they never sit in a file that is committed or stored)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import NoReturn

import click

from controller.config.spec import Spec
from controller.forge.base import Forge

DEFAULT_WRITE_INTERVAL = 1.0  # seconds between writes, as GitHub asks of integrations


def _usage(message: str) -> NoReturn:
    click.echo(f"crucible: {message}", err=True)
    sys.exit(2)


def forge_for(spec: Spec, environ: Mapping[str, str] | None = None) -> Forge:
    """The forge named by ``publish.forge``, authenticated from the environment; exit 2 if unusable."""
    # Imported here: PyGithub is slow to import and only publishing runs need it.
    from controller.forge.auth import ForgeCredentials
    from controller.forge.github import GithubForge

    env = os.environ if environ is None else environ
    if spec.publish is None:
        _usage("publish.forge: required with --publish-prs (the forge API URL)")
    if not any(c.upstream for c in spec.components):
        _usage("component[0].upstream: required with --publish-prs (owner/name of the repository PRs target)")
    credentials = ForgeCredentials.from_env(env)
    if credentials is None:
        _usage(
            "publishing needs CRUCIBLE_GITHUB_TOKEN, or CRUCIBLE_GITHUB_APP_ID with "
            "CRUCIBLE_GITHUB_APP_PRIVATE_KEY or CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE"
        )
    raw = env.get("CRUCIBLE_FORGE_WRITE_INTERVAL")
    try:
        interval = DEFAULT_WRITE_INTERVAL if raw is None else float(raw)
    except ValueError:
        _usage(f"CRUCIBLE_FORGE_WRITE_INTERVAL: not a number of seconds: {raw!r}")
    return GithubForge(spec.publish.forge, credentials, write_interval=interval)
