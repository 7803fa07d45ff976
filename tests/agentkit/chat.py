"""OpenAI chat completions (``POST …/chat/completions``), streamed or not, as qwen-code and aider call it.

Two kinds of client speak it, and the model answers each the way a real model would:

- qwen-code offers tools (``read_file``, ``edit``, ``write_file``, …) and expects ``tool_calls``: the
  script's steps become a ``read_file`` call (its ``edit`` tool refuses a file not read in the session),
  an ``edit`` call with absolute paths, then the final text. The step is chosen from the number of tool
  calls already in the conversation, so a retried request gets the same answer. The calls are made
  whether or not the request offers those tools (an approval mode that allows no edits offers none): a
  model that calls a tool it was not given is how such a mode shows in qwen-code's output.
- aider offers no tools: it parses edit blocks out of the text. The answer is always the same
  SEARCH/REPLACE block with the hypothesis. Aider first adds the file the block names to its chat and
  asks again (the second answer, the same block, is the one it applies); a block that no longer matches
  is reflected back at most three times, then aider stops.

Streaming follows OpenAI's wire format: ``data:`` chunks whose ``choices[0].delta`` carry the role, the
text and the tool calls, a chunk with the ``finish_reason``, a chunk with ``usage`` (the clients ask for
it with ``stream_options.include_usage``), then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tests.agentkit.script import Edit, Finish, Read, Replace, Step, next_step, workdir
from tests.agentkit.server import Reply, Request, ScriptedModel, json_reply

MODEL_FALLBACK = "scripted-model"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _calls_made(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")


def _tool_names(body: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            names.add(str(tool["function"].get("name")))
    return names


def edit_block(edit: Edit) -> str:
    """The answer aider parses: a SEARCH/REPLACE block on ``edit.path``, then the hypothesis."""
    old = edit.old if edit.old.endswith("\n") else edit.old + "\n"
    new = edit.new if edit.new.endswith("\n") else edit.new + "\n"
    return (
        f"{edit.path}\n```\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n\n"
        f"HYPOTHESIS: {edit.hypothesis}\n"
    )


def _tool_message(step: Step, root: str, index: int) -> dict[str, Any]:
    """The assistant message for one step of a tool-calling client; paths absolute under ``root``."""
    if isinstance(step, Finish):
        return {"role": "assistant", "content": step.text}
    if isinstance(step, Read):
        name, arguments = "read_file", {"file_path": os.path.join(root, step.path)}
    else:
        assert isinstance(step, Replace)
        arguments = {
            "file_path": os.path.join(root, step.path),
            "old_string": step.old,
            "new_string": step.new,
        }
        name = "edit"
    call = {
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def answer(body: dict[str, Any], model: ScriptedModel) -> dict[str, Any]:
    """The assistant message the scripted model answers ``body`` with."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    tools = _tool_names(body)
    if model.edit is None:
        return {"role": "assistant", "content": "Nothing to change.\nHYPOTHESIS: nothing to change"}
    if not tools:
        return {"role": "assistant", "content": edit_block(model.edit)}
    root = workdir("\n".join(_text_of(m.get("content")) for m in messages if m.get("role") == "user"))
    if root is None:
        return {"role": "assistant", "content": "HYPOTHESIS: nothing to change"}
    calls = _calls_made(messages)
    return _tool_message(next_step(model.edit, calls, read_first=True), root, calls)


def _chunks(base: dict[str, Any], message: dict[str, Any], usage: dict[str, int]) -> list[Any]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out: list[Any] = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": index, **call}]}))
    out.append(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
    out.append({**base, "choices": [], "usage": usage})
    return out


class ChatCompletions:
    name = "chat"

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and path.rstrip("/").endswith("/chat/completions")

    def reply(self, request: Request, model: ScriptedModel) -> Reply:
        body = request.json()
        message = answer(body, model)
        usage = {
            "prompt_tokens": model.input_tokens,
            "completion_tokens": model.output_tokens,
            "total_tokens": model.input_tokens + model.output_tokens,
        }
        base = {"id": "chatcmpl-scripted", "created": 0, "model": body.get("model") or MODEL_FALLBACK}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return json_reply({**base, "object": "chat.completion", "choices": [choice], "usage": usage})
        events = _chunks({**base, "object": "chat.completion.chunk"}, message, usage)
        data = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
        return Reply(200, data.encode(), "text/event-stream")
