"""The Anthropic Messages API (``POST /v1/messages``), streamed or not, as Claude Code calls it.

Claude Code's agent requests carry its tools (``Read``, ``Edit``, …); it also makes side calls without
tools (a title, a quota probe) that get a short text answer. An agent request is answered with the next
step of the script: ``Read`` and ``Edit`` as ``tool_use`` blocks (Claude Code refuses to edit a file the
model has not read), then the final text.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tests.agentkit.script import Finish, Read, Replace, Step, next_step, workdir
from tests.agentkit.server import Reply, Request, ScriptedModel, event, json_reply, sse_reply


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


def _calls_made(messages: list[dict[str, Any]]) -> int:
    return sum(
        1
        for message in messages
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    )


def _prompt(body: dict[str, Any]) -> str:
    users = [_text_of(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user"]
    return "\n".join(users)


def _blocks(step: Step, root: str, turn: int) -> tuple[list[dict[str, Any]], str]:
    """(content blocks, stop reason) for one step; paths are absolute under ``root``."""
    if isinstance(step, Read):
        call = {"file_path": os.path.join(root, step.path)}
        return [{"type": "tool_use", "id": f"toolu_read_{turn}", "name": "Read", "input": call}], "tool_use"
    if isinstance(step, Replace):
        call = {"file_path": os.path.join(root, step.path), "old_string": step.old, "new_string": step.new}
        return [{"type": "tool_use", "id": f"toolu_edit_{turn}", "name": "Edit", "input": call}], "tool_use"
    assert isinstance(step, Finish)
    return [{"type": "text", "text": step.text}], "end_turn"


def _stream(message: dict[str, Any]) -> Reply:
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    events: list[tuple[str | None, Any]] = [event("message_start", message=start)]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(event("content_block_start", index=index, content_block=opened))
        events.append(event("content_block_delta", index=index, delta=delta))
        events.append(event("content_block_stop", index=index))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    events.append(event("message_delta", delta=stop, usage=usage))
    events.append(event("message_stop"))
    return sse_reply(events)


class AnthropicMessages:
    name = "anthropic"

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and path.rstrip("/").endswith("/v1/messages")

    def reply(self, request: Request, model: ScriptedModel) -> Reply:
        body = request.json()
        messages = body.get("messages", [])
        tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
        calls = _calls_made(messages)
        root = workdir(_prompt(body))
        if model.edit is not None and "Edit" in tools and root is not None:
            content, stop = _blocks(next_step(model.edit, calls, read_first=True), root, calls)
        else:
            content, stop = [{"type": "text", "text": "HYPOTHESIS: nothing to change"}], "end_turn"
        message = {
            "id": f"msg_{len(messages)}_{calls}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-sonnet-4-5"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": model.input_tokens, "output_tokens": model.output_tokens},
        }
        if body.get("stream"):
            return _stream(message)
        return json_reply(message)
