"""The presets by name: ``[agent] preset = NAME`` picks one (the spec checks the name against
``controller.config.agent.PRESET_NAMES``, which a test holds equal to these)."""

from __future__ import annotations

from controller.agents.aider import Aider
from controller.agents.base import Preset
from controller.agents.claude_code import ClaudeCode
from controller.agents.codex import Codex
from controller.agents.gemini import GeminiCli
from controller.agents.qwen_code import QwenCode
from controller.domain.errors import SpecError

PRESETS: dict[str, Preset] = {
    preset.name: preset for preset in (ClaudeCode(), Codex(), Aider(), GeminiCli(), QwenCode())
}


def preset(name: str) -> Preset:
    """The preset called ``name``; SpecError on ``agent.preset`` listing the presets otherwise."""
    found = PRESETS.get(name)
    if found is None:
        raise SpecError("agent.preset", f"unknown preset {name!r}; the presets are {', '.join(PRESETS)}")
    return found
