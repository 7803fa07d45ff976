"""``docs/openapi.json`` and ``docs/api.md``: the API's contract, generated from the app itself.

The OpenAPI document is what FastAPI derives from the routes and the typed views, so committing it pins
every route and field: ``tests/api/test_docs.py`` fails when the committed files differ from what the
code generates (a field renamed by accident, or a change not written down). Regenerate with

    python -m controller.api.docs [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TypedDict, cast

DOCS = Path(__file__).resolve().parents[2] / "docs"
METHODS = ("get", "post", "put", "patch", "delete")

# The parts of an OpenAPI 3.1 document that ``markdown`` reads, as TypedDicts (``total=False``: a part
# FastAPI leaves out is absent, and the reader keeps its default). Names with ``$`` or a keyword are
# spelt with the functional syntax.
JsonSchema = TypedDict(
    "JsonSchema",
    {
        "$ref": str,
        "anyOf": list["JsonSchema"],
        "type": str,
        "prefixItems": list["JsonSchema"],
        "items": "JsonSchema",
        "enum": list[str | int | float | bool | None],
        "additionalProperties": "JsonSchema | bool",
        "description": str,
        "properties": dict[str, "JsonSchema"],
        "required": list[str],
    },
    total=False,
)
Parameter = TypedDict(
    "Parameter",
    {"name": str, "in": str, "schema": JsonSchema, "required": bool, "description": str},
    total=False,
)


class MediaType(TypedDict, total=False):
    schema: JsonSchema


class RequestBody(TypedDict, total=False):
    content: dict[str, MediaType]


class Answer(TypedDict, total=False):
    description: str
    content: dict[str, MediaType]


class Operation(TypedDict, total=False):
    description: str
    summary: str
    parameters: list[Parameter]
    requestBody: RequestBody
    responses: dict[str, Answer]


class Info(TypedDict, total=False):
    title: str
    version: str
    description: str


class Components(TypedDict, total=False):
    schemas: dict[str, JsonSchema]


class OpenApiDocument(TypedDict, total=False):
    openapi: str
    info: Info
    paths: dict[str, dict[str, Operation]]  # path -> method -> operation
    components: Components


def openapi() -> OpenApiDocument:
    """The OpenAPI document of ``create_app`` (built over an in-memory store that is never opened)."""
    from controller.api.app import create_app
    from controller.api.auth import ApiTokens
    from controller.config.settings import Settings
    from controller.services.remote.remote_rounds import RemoteRounds
    from controller.services.views.schemas import RoundRequest
    from controller.store.store import Store

    class _NoControl:
        def cancel(self, run_id: str) -> str:
            raise NotImplementedError

        def resume(self, run_id: str) -> str:
            raise NotImplementedError

        def steer(self, run_id: str, text: str, component: str | None = None) -> RoundRequest:
            raise NotImplementedError

        def wake(self) -> None:
            raise NotImplementedError

    store = Store("sqlite://")
    try:
        settings = Settings(home=Path("/nonexistent"), database_url="sqlite://")
        # With the worker routes: their schemas are the worker protocol's contract (ADR-0028).
        remote = RemoteRounds(settings, store, controller_url="http://unused")
        app = create_app(settings, store, ApiTokens("unused"), _NoControl(), remote=remote)
        # FastAPI types its document as a plain dict; it is an OpenAPI 3.1 document, so the cast only
        # names the shape ``markdown`` reads (the golden test compares the whole document).
        return cast(OpenApiDocument, app.openapi())
    finally:
        store.close()


def _type(schema: JsonSchema | bool) -> str:
    if not isinstance(schema, dict):  # ``additionalProperties: true``: any JSON value
        return "any"
    if "$ref" in schema:
        return f"[{schema['$ref'].rsplit('/', 1)[-1]}](#{schema['$ref'].rsplit('/', 1)[-1].lower()})"
    if "anyOf" in schema:
        return " \\| ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array" and "prefixItems" in schema:  # a tuple
        return "[" + ", ".join(_type(s) for s in schema["prefixItems"]) + "]"
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if schema.get("type") == "object" and "additionalProperties" in schema:
        return f"map of {_type(schema['additionalProperties'])}"
    return str(schema.get("type", "any"))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown(doc: OpenApiDocument) -> str:
    """``docs/api.md``: routes with their parameters and answers, then every schema's fields."""
    out = [
        "# Operator API",
        "",
        "Generated from the OpenAPI document by `python -m controller.api.docs`; do not edit by hand.",
        "The machine-readable contract is `docs/openapi.json` (also served at `/openapi.json`, browsable",
        "at `/docs`). " + _cell(doc["info"].get("description", "")),
        "",
        "## Routes",
        "",
    ]
    for path, item in doc["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            out += [f"### `{method.upper()} {path}`", ""]
            summary = op.get("description") or op.get("summary") or ""
            if summary:
                out += [_cell(summary), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
                for p in params:
                    out.append(
                        f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                        f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                    )
                out.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                out += [f"Body: {_type(body['schema'])}", ""]
            out += ["| status | answer |", "|---|---|"]
            for status, response in op.get("responses", {}).items():
                content = response.get("content", {})
                kinds = [
                    _type(c["schema"]) if c.get("schema") else f"`{ctype}`" for ctype, c in content.items()
                ]
                answer = ", ".join(k for k in kinds if k and k != "any") or _cell(
                    response.get("description", "")
                )
                out.append(f"| {status} | {answer} |")
            out.append("")
    out += ["## Schemas", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        out += [f"### {name}", ""]
        if schema.get("description"):
            out += [_cell(schema["description"]), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| field | type | required | description |", "|---|---|---|---|"]
            for field, spec in props.items():
                out.append(
                    f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} | "
                    f"{_cell(spec.get('description', ''))} |"
                )
            out.append("")
        elif "enum" in schema:
            out += [f"One of {_type(schema)}.", ""]
    return "\n".join(out).rstrip() + "\n"


def rendered() -> dict[Path, str]:
    """The generated files, by path."""
    doc = openapi()
    return {
        DOCS / "openapi.json": json.dumps(doc, indent=2, sort_keys=True) + "\n",
        DOCS / "api.md": markdown(doc),
    }


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for path, text in rendered().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in stale:
        print(f"{'stale' if check else 'wrote'}: {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
