"""The two GraphQL mutations PyGithub uses for draft state: ``convertPullRequestToDraft`` and
``markPullRequestReadyForReview`` (REST cannot change a PR's draft state after creation).

Not a GraphQL engine: the mutation is recognised by name and its ``input`` read from the
variables, which is exactly how PyGithub sends it (``POST /api/graphql`` under GitHub Enterprise's
layout). Anything else gets a GraphQL error.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from controller.localforge.errors import ForgeError, NotFound
from controller.localforge.httpkit import Services, get_ctx, json_body, services
from controller.localforge.render import parse_node_id
from controller.localforge.service import Ctx

router = APIRouter()
_MUTATIONS = {"convertPullRequestToDraft": True, "markPullRequestReadyForReview": False}
_NAME = re.compile(r"\b(" + "|".join(_MUTATIONS) + r")\s*\(")


def _errors(kind: str, message: str, path: list[str] | None = None) -> JSONResponse:
    error: dict[str, Any] = {"type": kind, "message": message}
    if path:
        error["path"] = path
    return JSONResponse({"data": None, "errors": [error]})


@router.post("/api/graphql")
def graphql(
    request: Request,
    ctx: Annotated[Ctx, Depends(get_ctx)],
    body: Annotated[dict[str, Any], Depends(json_body)],
) -> JSONResponse:
    svc = services(request)
    svc.forge.signed_in(ctx)
    match = _NAME.search(str(body.get("query", "")))
    if match is None:
        return _errors("NOT_SUPPORTED", "The local forge supports only the draft-state mutations.")
    name = match.group(1)
    variables = body.get("variables") or {}
    given = variables.get("input") if isinstance(variables, dict) else None
    given = given if isinstance(given, dict) else {}
    node = str(given.get("pullRequestId", ""))
    pull_id = parse_node_id(node, "PullRequest")
    pull = svc.forge.store.pull_by_id(pull_id) if pull_id is not None else None
    try:
        if pull is None:
            raise NotFound()
        svc.forge.find_repo(ctx, *_owner_repo(svc, pull.repo_id))
        pull = svc.pulls.set_draft(ctx, pull, _MUTATIONS[name])
    except NotFound:
        return _errors("NOT_FOUND", f"Could not resolve to a node with the global id of '{node}'.", [name])
    except ForgeError as exc:
        return _errors("FORBIDDEN", exc.message, [name])
    result = {
        "clientMutationId": given.get("clientMutationId"),
        "pullRequest": {"id": node, "number": pull.number, "isDraft": pull.draft},
    }
    return JSONResponse({"data": {name: result}})


def _owner_repo(svc: Services, repo_id: int) -> tuple[str, str]:
    repo = svc.forge.store.repo_by_id(repo_id)
    if repo is None:
        raise NotFound()
    return repo.owner_login, repo.name
