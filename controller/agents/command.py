"""The command a turn runs for ``[agent] preset = …``: crucible's own small wrapper around the CLI.

The wrapper (``controller.agents.run``) runs inside the sandbox like any agent command, so
everything it and the CLI need must be visible there. The sandbox binds back, read-only, what a command
*names* that its masks (``$HOME``, ``/tmp``) would hide; so the command names the CLI by its absolute
path, and with ``--needs`` the directories behind it: the CLI's package (for an npm install, the
``node_modules`` folder holding it and its platform binaries), the Python that runs the wrapper and where
crucible's code lives. ``-I`` keeps the workspace (a repository may well have a ``controller`` folder of
its own) and ``PYTHON*`` variables out of the wrapper's imports. ``-S`` skips ``site`` (its ``.pth`` files,
an editable install's import hook: a third of the wrapper's start-up, ADR-0033), so the command appends
crucible's code root to ``sys.path`` itself: ``python -I -S -c 'import sys; sys.path.append(ROOT); …'
--preset …``.

A CLI that is not found is still named (by its program name): the wrapper then fails the turn saying how to
install it, and ``crucible loop --dry-run`` says so before any turn.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import controller
from controller.agents.registry import preset
from controller.config.agent import AgentSpec

WRAPPER_MODULE = "controller.agents.run"
# What ``python -I -S -c`` runs: crucible's code root (where ``controller`` is) appended after the
# standard library, then the wrapper's ``main`` with the words that follow as its arguments.
BOOTSTRAP = "import sys; sys.path.append({root}); from {module} import main; sys.exit(main())"


def find_cli(agent: AgentSpec, spec_dir: Path | None, search_path: str | None) -> str | None:
    """The CLI's path: ``agent.cli`` (``~`` expanded, relative to the spec's folder) when set, whether it
    exists or not; else the preset's program on ``search_path``; None when it is not there."""
    assert agent.preset is not None
    if agent.cli is not None:
        path = Path(agent.cli).expanduser()
        if not path.is_absolute() and "/" not in agent.cli:
            return shutil.which(agent.cli, path=search_path)
        if not path.is_absolute() and spec_dir is not None:
            path = spec_dir / path
        return str(path)
    return shutil.which(preset(agent.preset).program, path=search_path)


def install_roots(cli: str) -> list[Path]:
    """What the CLI needs beside its own file: for an npm package, the outermost ``node_modules`` above
    its real path (its dependencies and per-platform binaries are siblings there). A Python tool's virtual
    environment the sandbox finds by itself (``pyvenv.cfg``)."""
    real = Path(os.path.realpath(cli))
    modules = [parent for parent in real.parents if parent.name == "node_modules"]
    return [modules[-1]] if modules else []


def code_root() -> Path:
    """The folder ``controller`` is imported from (site-packages, or the clone of an editable install)."""
    return Path(controller.__file__).resolve().parent.parent


def bootstrap() -> str:
    """The code ``python -I -S -c`` runs to start the wrapper (``BOOTSTRAP`` filled in)."""
    return BOOTSTRAP.format(root=json.dumps(str(code_root())), module=WRAPPER_MODULE)


def wrapper_roots() -> list[Path]:
    """What the wrapper needs to start: the Python installation and environment running crucible, and
    the folder crucible's code is imported from when it is not inside that environment (an editable
    install)."""
    roots = {Path(sys.base_prefix), Path(sys.prefix)}
    package = code_root()
    if not package.is_relative_to(Path(sys.prefix).resolve()):
        roots.add(package)
    return sorted(roots)


def agent_command(
    agent: AgentSpec,
    spec_dir: Path | None,
    *,
    sandboxed: bool,
    search_path: str | None,
    python: str = sys.executable,
) -> str:
    """The shell command that runs ``agent``'s preset for one turn."""
    assert agent.preset is not None
    chosen = preset(agent.preset)
    cli = find_cli(agent, spec_dir, search_path)
    if cli is not None and os.path.exists(cli):
        # The file itself, not a symlink to it (npm's ``.bin/codex``): the sandbox binds a symlink's
        # target in its place, and node then looks for the package's modules beside the link.
        cli = os.path.realpath(cli)
    words = [python, "-I", "-S", "-c", bootstrap(), "--preset", chosen.name, "--cli", cli or chosen.program]
    if agent.model is not None:
        words += ["--model", agent.model]
    if agent.base_url is not None:
        words += ["--base-url", agent.base_url]
    words += [f"--arg={arg}" for arg in agent.args]
    words += [f"--price={model}={price.input}:{price.output}" for model, price in agent.prices.items()]
    if sandboxed:
        words.append("--sandboxed")
    needs = [*wrapper_roots(), *(install_roots(cli) if cli and os.path.exists(cli) else [])]
    for need in needs:
        words += ["--needs", str(need)]
    return " ".join(shlex.quote(word) for word in words)
