"""``POST /api/graphql``: GitHub's GraphQL endpoint (under GitHub Enterprise's layout, which is
where clients given ``…/api/v3`` as their REST root send GraphQL).

Documents are parsed and validated by ``graphql-core`` against the slice of GitHub's schema in
``graphql_nodes``, so variables (``$id``, ``$input``), inline literals, aliases and fragments all
work, and a field outside the slice gets GitHub's ``undefinedField`` error rather than a wrong
answer. Errors use GitHub's shapes: validation errors alone (no ``data``), resolution errors next
to ``data`` with GitHub's ``type`` (``NOT_FOUND``, ``FORBIDDEN``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from graphql import (
    ExecutionResult,
    FieldNode,
    FragmentDefinitionNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    Visitor,
    execute,
    parse,
    validate,
    visit,
)

from controller.localforge.graphql_nodes import not_found
from controller.localforge.graphql_write import WriteGraph, schema, write_roots
from controller.localforge.httpkit import get_ctx, json_body, services
from controller.localforge.service import Ctx

router = APIRouter()
_UNDEFINED = re.compile(r"""Cannot query field ["'](\w+)["'] on type ["'](\w+)["']""")


def _located(error: GraphQLError) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if error.locations:
        out["locations"] = [{"line": loc.line, "column": loc.column} for loc in error.locations]
    return out


class _FieldPaths(Visitor):
    """Where each field sits in the document, as GitHub's validation errors name it:
    ``["query Threads", "repository", "stargazerCount"]``."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.paths: dict[int, list[str]] = {}

    def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
        name = f" {node.name.value}" if node.name else ""
        self.stack.append(f"{node.operation.value}{name}")

    def enter_fragment_definition(self, node: FragmentDefinitionNode, *_: Any) -> None:
        self.stack.append(f"fragment {node.name.value}")

    def enter_inline_fragment(self, node: InlineFragmentNode, *_: Any) -> None:
        self.stack.append(f"... on {node.type_condition.name.value}" if node.type_condition else "...")

    def enter_field(self, node: FieldNode, *_: Any) -> None:
        self.stack.append(node.name.value)
        self.paths[id(node)] = list(self.stack)

    def _pop(self, *_: Any) -> None:
        self.stack.pop()

    leave_operation_definition = leave_fragment_definition = leave_inline_fragment = leave_field = _pop


def _validation_error(error: GraphQLError, paths: dict[int, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if error.nodes and id(error.nodes[-1]) in paths:
        out["path"] = paths[id(error.nodes[-1])]
    match = _UNDEFINED.search(error.message)
    if match is None:
        return {**out, **_located(error), "message": error.message}
    field, type_name = match.groups()
    return {
        **out,
        "extensions": {"code": "undefinedField", "typeName": type_name, "fieldName": field},
        **_located(error),
        "message": f"Field '{field}' doesn't exist on type '{type_name}'",
    }


def _execution_error(error: GraphQLError) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kind = (error.extensions or {}).get("type")
    if kind:
        out["type"] = kind
    if error.path:
        out["path"] = list(error.path)
    return {**out, **_located(error), "message": error.message}


def _root(graph: WriteGraph) -> dict[str, Any]:
    def repository(_info: Any, owner: str, name: str) -> dict[str, Any]:
        repo = graph.svc.forge.store.repo_by_name(owner, name)
        if repo is None or graph.svc.forge.role(repo, graph.ctx.actor) is None:
            raise not_found(f"Could not resolve to a Repository with the name '{owner}/{name}'.")
        return graph.repository(repo)

    def node(_info: Any, id: str) -> dict[str, Any]:
        found = graph.node(id)
        if found is None:
            raise not_found(f"Could not resolve to a node with the global id of '{id}'")
        return found

    def draft(value: bool) -> Any:
        def mutate(_info: Any, input: dict[str, Any]) -> dict[str, Any]:
            return graph.set_draft(str(input["pullRequestId"]), value, input.get("clientMutationId"))

        return mutate

    assert graph.ctx.actor is not None
    return {
        "repository": repository,
        "node": node,
        "nodes": lambda _info, ids: [graph.node(i) for i in ids],
        "viewer": lambda _info: graph.actor(graph.ctx.actor),
        "convertPullRequestToDraft": draft(True),
        "markPullRequestReadyForReview": draft(False),
        "addComment": lambda _info, input: graph.add_comment(
            str(input["subjectId"]), input["body"], input.get("clientMutationId")
        ),
        "addPullRequestReview": lambda _info, input: graph.add_review(input),
        **write_roots(graph),
    }


@router.post("/api/graphql")
def graphql_endpoint(
    request: Request,
    ctx: Annotated[Ctx, Depends(get_ctx)],
    body: Annotated[dict[str, Any], Depends(json_body)],
) -> JSONResponse:
    svc = services(request)
    svc.forge.signed_in(ctx)
    query, variables = body.get("query"), body.get("variables") or {}
    if not isinstance(query, str) or not query.strip() or not isinstance(variables, dict):
        message = "A query attribute must be specified and must be a string."
        return JSONResponse({"errors": [{"message": message}]})
    try:
        document = parse(query)
    except GraphQLError as exc:
        return JSONResponse({"errors": [{"message": exc.message, **_located(exc)}]})
    problems = validate(schema(), document)
    if problems:
        where = _FieldPaths()
        visit(document, where)
        return JSONResponse({"errors": [_validation_error(e, where.paths) for e in problems]})
    operation = body.get("operationName")
    result = execute(
        schema(),
        document,
        root_value=_root(WriteGraph(svc, ctx)),
        variable_values=variables,
        operation_name=operation if isinstance(operation, str) else None,
    )
    assert isinstance(result, ExecutionResult)  # every resolver is synchronous
    out: dict[str, Any] = {"data": result.data}
    if result.errors:
        out["errors"] = [_execution_error(e) for e in result.errors]
    return JSONResponse(out)
