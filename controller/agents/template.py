"""The ``[agent]`` table ``crucible init --agent NAME`` writes: the preset, its optional keys commented
out with an example each (the template's test enables them all and parses the result), and where its key
comes from."""

from __future__ import annotations

import json

from controller.agents.registry import preset


def agent_table(name: str) -> str:
    """The commented ``[agent]`` table for preset ``name`` (SpecError naming agent.preset if unknown)."""
    chosen = preset(name)
    keys = " or ".join(chosen.keys)
    return f"""\
[agent]
# {chosen.title}, run headless by crucible (docs/agents.md). Install it with: {chosen.install}
# Its key comes from crucible's environment: {keys}; no other secret reaches it.
preset = {json.dumps(chosen.name)}
#model = {json.dumps(chosen.example_model)}      # the CLI's default when unset
#base_url = {json.dumps(chosen.example_base_url)}   # a gateway or a self-hosted compatible endpoint
#cli = "/opt/agents/bin/{chosen.program}"   # when the CLI is not the one on PATH
#args = []                       # extra flags for the CLI, after the preset's own
timeout = "20m"
# USD per million tokens by model, so a CLI that reports only tokens counts towards budget.cost_usd:
#prices = {{ {json.dumps(chosen.example_model)} = {{ input = 1.25, output = 10.0 }} }}
"""
