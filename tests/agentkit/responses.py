"""The OpenAI Responses API (``POST /v1/responses``, streamed), as Codex CLI calls it.

Codex sends the whole conversation as ``input`` items; the model's earlier tool calls are items of type
``function_call`` or ``custom_tool_call``. The edit is made the way Codex's own models make it: an
``apply_patch`` call, as a freeform (custom) tool when the request offers one, else as a function tool,
else through the shell tool (Codex intercepts ``apply_patch`` there too). Then the final message.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.agentkit.script import Finish, Replace, Step, next_step
from tests.agentkit.server import Reply, Request, ScriptedModel, event, sse_reply

CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")


def patch_text(step: Replace) -> str:
    """The apply_patch envelope that replaces one line's text in one file."""
    return f"*** Begin Patch\n*** Update File: {step.path}\n@@\n-{step.old}\n+{step.new}\n*** End Patch\n"


def _tools(body: dict[str, Any]) -> dict[str, str]:
    """Tool name -> its type (``function``, ``custom``, …)."""
    out: dict[str, str] = {}
    for tool in body.get("tools", []):
        if isinstance(tool, dict):
            out[str(tool.get("name") or tool.get("type"))] = str(tool.get("type"))
    return out


def _item(step: Step, tools: dict[str, str], index: int) -> dict[str, Any]:
    call_id = f"call_{index}"
    if isinstance(step, Replace):
        patch = patch_text(step)
        kind = tools.get("apply_patch")
        if kind == "custom":
            return {"type": "custom_tool_call", "id": f"ctc_{index}", "call_id": call_id,
                    "name": "apply_patch", "input": patch, "status": "completed"}  # fmt: skip
        if kind == "function":
            arguments = json.dumps({"input": patch})
            return {"type": "function_call", "id": f"fc_{index}", "call_id": call_id,
                    "name": "apply_patch", "arguments": arguments, "status": "completed"}  # fmt: skip
        shell = "exec_command" if "exec_command" in tools else "shell"
        if shell == "exec_command":
            arguments = json.dumps({"cmd": f"apply_patch <<'EOF'\n{patch}EOF\n"})
        else:
            arguments = json.dumps({"command": ["apply_patch", patch]})
        return {"type": "function_call", "id": f"fc_{index}", "call_id": call_id,
                "name": shell, "arguments": arguments, "status": "completed"}  # fmt: skip
    assert isinstance(step, Finish)
    content = [{"type": "output_text", "text": step.text, "annotations": []}]
    return {
        "type": "message",
        "id": f"msg_{index}",
        "status": "completed",
        "role": "assistant",
        "content": content,
    }


def _usage(model: ScriptedModel) -> dict[str, Any]:
    return {
        "input_tokens": model.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": model.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": model.input_tokens + model.output_tokens,
    }


class OpenAIResponses:
    name = "responses"

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and path.rstrip("/").endswith("/responses")

    def reply(self, request: Request, model: ScriptedModel) -> Reply:
        body = request.json()
        items = body.get("input", [])
        calls = sum(1 for item in items if isinstance(item, dict) and item.get("type") in CALL_TYPES)
        tools = _tools(body)
        if model.edit is not None and tools:
            step = next_step(model.edit, calls, read_first=False)
        else:
            step = Finish("HYPOTHESIS: nothing to change")
        item = _item(step, tools, calls)
        response = {
            "id": f"resp_{calls}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": body.get("model", "gpt-5"),
            "output": [],
        }
        events: list[tuple[str | None, Any]] = [
            event("response.created", response=response),
            event("response.output_item.added", output_index=0, item=item),
        ]
        if item["type"] == "message":
            text = item["content"][0]["text"]
            where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
            events.append(event("response.output_text.delta", **where, delta=text))
        events.append(event("response.output_item.done", output_index=0, item=item))
        done = {**response, "status": "completed", "output": [item], "usage": _usage(model)}
        events.append(event("response.completed", response=done))
        return sse_reply(events)
