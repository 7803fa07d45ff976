"""The Gemini API (``POST /v1beta/models/MODEL:streamGenerateContent``), as Gemini CLI calls it.

Gemini CLI streams its agent requests (``?alt=sse``: ``data:`` events, each a ``GenerateContentResponse``)
and offers its tools as ``functionDeclarations`` (``read_file``, ``replace``, ``write_file``, …). The
script's edit becomes one ``replace`` call (Gemini CLI edits a file it has not read; the path is relative
to the workspace, which it resolves), then the final text. The step is chosen from the number of
``functionCall`` parts the model already made in the conversation. The call is made whenever the request
offers tools at all, ``replace`` among them or not: in an approval mode that allows no edits Gemini CLI
offers none, and a model that calls it anyway is how that mode shows in its output.

Gemini CLI also makes side calls without tools that want JSON back (``generationConfig.responseJsonSchema``:
the model router's complexity score, the next-speaker check): those get the smallest object the schema
accepts, so a test that leaves the model on ``auto`` still works.
"""

from __future__ import annotations

import json
from typing import Any

from tests.agentkit.script import Finish, Read, Replace, Step, next_step
from tests.agentkit.server import Reply, Request, ScriptedModel, json_reply

EDIT_TOOL = "replace"


def _function_calls(contents: list[dict[str, Any]]) -> int:
    return sum(
        1
        for content in contents
        if content.get("role") == "model"
        for part in content.get("parts") or []
        if isinstance(part, dict) and "functionCall" in part
    )


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {
        str(declaration.get("name"))
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
        for declaration in tool.get("functionDeclarations") or []
        if isinstance(declaration, dict)
    }


def minimal(schema: Any) -> Any:
    """The smallest value ``schema`` (an OpenAPI-style or JSON schema) accepts: required properties only."""
    if not isinstance(schema, dict):
        return None
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: minimal(properties.get(name)) for name in schema.get("required") or []}
    return {"string": "", "integer": 1, "number": 1, "boolean": False, "array": []}.get(kind)


def _parts(step: Step) -> list[dict[str, Any]]:
    if isinstance(step, Finish):
        return [{"text": step.text}]
    if isinstance(step, Read):
        return [{"functionCall": {"name": "read_file", "args": {"file_path": step.path}}}]
    assert isinstance(step, Replace)
    args = {"file_path": step.path, "instruction": "apply the planned change", "old_string": step.old,
            "new_string": step.new}  # fmt: skip
    return [{"functionCall": {"name": EDIT_TOOL, "args": args}}]


def answer(body: dict[str, Any], model: ScriptedModel) -> list[dict[str, Any]]:
    """The parts of the model's answer to ``body``."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if schema is not None:
        return [{"text": json.dumps(minimal(schema))}]
    if model.edit is None or not _tool_names(body):
        return [{"text": "Nothing to change.\nHYPOTHESIS: nothing to change"}]
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    return _parts(next_step(model.edit, _function_calls(contents), read_first=False))


class GeminiGenerateContent:
    name = "gemini"

    def matches(self, method: str, path: str) -> bool:
        return method == "POST" and path.endswith((":streamGenerateContent", ":generateContent"))

    def reply(self, request: Request, model: ScriptedModel) -> Reply:
        body = request.json()
        model_name = request.path.split("?")[0].rsplit("/", 1)[-1].split(":")[0]
        response = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": answer(body, model)},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": model.input_tokens,
                "candidatesTokenCount": model.output_tokens,
                "totalTokenCount": model.input_tokens + model.output_tokens,
            },
            "modelVersion": model_name,
        }
        path = request.path.split("?")[0]
        if path.endswith(":generateContent"):
            return json_reply(response)
        if "alt=sse" in request.path:
            return Reply(200, f"data: {json.dumps(response)}\n\n".encode(), "text/event-stream")
        return json_reply([response])
