"""Fixtures for the presets' tests: the end-to-end ``project`` (a user repository and a spec beside it) and
a scripted model server speaking every wire format the presets use."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agentkit.anthropic import AnthropicMessages
from tests.agentkit.chat import ChatCompletions
from tests.agentkit.gemini import GeminiGenerateContent
from tests.agentkit.responses import OpenAIResponses
from tests.agentkit.script import Edit
from tests.agentkit.server import ModelServer, ScriptedModel, running_model_server
from tests.e2e.conftest import Project, migrated_home, project

__all__ = ["EDIT", "migrated_home", "model_server", "preset_spec", "project"]

EDIT = Edit("src/value.txt", "10", "8", hypothesis="lower the value to 8")
"""The one edit the scripted model makes: the default project's metric reads src/value.txt."""


DIALECTS = (AnthropicMessages(), OpenAIResponses(), ChatCompletions(), GeminiGenerateContent())


@pytest.fixture(autouse=True)
def _home_run_in_before(migrated_home: Path) -> None:
    """The presets' runs start on a home crucible ran in before (``migrated_home``): they are about
    the agents, not a first run."""


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with running_model_server(DIALECTS, ScriptedModel(edit=EDIT)) as server:
        yield server


@pytest.fixture
def listening() -> Iterator[str]:
    """A base URL whose port accepts connections (the endpoint check's TCP connect)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def preset_spec(project: Project, preset: str, cli: Path, base_url: str, **agent: Any) -> Path:
    """The default project's spec with ``[agent] preset = …`` pointed at ``cli`` and ``base_url``."""
    table = {"preset": preset, "cli": str(cli), "base_url": base_url, "timeout": "120s", **agent}
    return project.write_spec(agent={**table, "command": None})
