"""REST routes for triage: repository labels, labels and assignees on issues, requested
reviewers of pull requests, editing an issue and listing issues. Thin: parse, call the
service, render.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from controller.localforge import render
from controller.localforge.assignees import logins
from controller.localforge.httpkit import (
    Json,
    Services,
    bodies,
    get_ctx,
    json_body,
    json_value,
    paginated,
    params,
    services,
    since,
)
from controller.localforge.models import Label, Pull, Repo
from controller.localforge.service import Ctx

router = APIRouter(prefix="/api/v3/repos/{owner}/{repo}")
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]
AnyBody = Annotated[Any, Depends(json_value)]


def _repo(request: Request, ctx: Ctx, owner: str, repo: str) -> tuple[Services, Repo]:
    found = services(request)
    return found, found.forge.find_repo(ctx, owner, repo)


def _labels(svc: Services, ctx: Ctx, repo: Repo, labels: list[Label]) -> list[Json]:
    return [svc.labels.json(ctx, repo, label) for label in labels]


def _issue(request: Request, svc: Services, ctx: Ctx, repo: Repo, pull: Pull) -> Json:
    return bodies(request, svc.comments.issue_json(ctx, repo, pull), body_required=False)


# -- repository labels -------------------------------------------------------------------------


@router.get("/labels")
def list_labels(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return paginated(request, _labels(svc, ctx, found, svc.labels.listing(found)))


@router.post("/labels", status_code=201)
def create_label(request: Request, ctx: CtxDep, owner: str, repo: str, body: Body) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    label = svc.labels.create(ctx, found, body)
    return JSONResponse(svc.labels.json(ctx, found, label), status_code=201)


@router.get("/labels/{name:path}")
def get_label(request: Request, ctx: CtxDep, owner: str, repo: str, name: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.labels.json(ctx, found, svc.labels.get(found, name)))


@router.patch("/labels/{name:path}")
def update_label(request: Request, ctx: CtxDep, owner: str, repo: str, name: str, body: Body) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.labels.json(ctx, found, svc.labels.update(ctx, found, name, body)))


@router.delete("/labels/{name:path}", status_code=204)
def delete_label(request: Request, ctx: CtxDep, owner: str, repo: str, name: str) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.labels.delete(ctx, found, name)
    return Response(status_code=204)


# -- labels on an issue ------------------------------------------------------------------------


@router.get("/issues/{number:int}/labels")
def issue_labels(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return paginated(request, _labels(svc, ctx, found, svc.labels.on_issue(found, number)))


@router.post("/issues/{number:int}/labels")
def add_labels(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: AnyBody
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(_labels(svc, ctx, found, svc.labels.add(ctx, found, number, body)))


@router.put("/issues/{number:int}/labels")
def set_labels(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: AnyBody
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(_labels(svc, ctx, found, svc.labels.replace(ctx, found, number, body)))


@router.delete("/issues/{number:int}/labels", status_code=204)
def remove_all_labels(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.labels.remove(ctx, found, number, None)
    return Response(status_code=204)


@router.delete("/issues/{number:int}/labels/{name:path}")
def remove_label(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, name: str
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(_labels(svc, ctx, found, svc.labels.remove(ctx, found, number, name)))


# -- assignees ---------------------------------------------------------------------------------


@router.get("/assignees")
def list_assignees(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return paginated(request, [render.user(ctx.urls, a) for a in svc.assignees.listing(found)])


@router.get("/assignees/{login}", status_code=204)
def check_assignee(request: Request, ctx: CtxDep, owner: str, repo: str, login: str) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    if not svc.assignees.check(found, login):
        return JSONResponse(
            {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, 404
        )
    return Response(status_code=204)


@router.get("/issues/{number:int}/assignees/{login}", status_code=204)
def check_issue_assignee(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, login: str
) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.pulls.get(found, number)
    return check_assignee(request, ctx, owner, repo, login)


@router.post("/issues/{number:int}/assignees", status_code=201)
def add_assignees(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.assignees.add(ctx, found, number, logins(body))
    return JSONResponse(_issue(request, svc, ctx, found, pull), status_code=201)


@router.delete("/issues/{number:int}/assignees")
def remove_assignees(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.assignees.remove(ctx, found, number, logins(body))
    return JSONResponse(_issue(request, svc, ctx, found, pull))


# -- requested reviewers -----------------------------------------------------------------------


@router.get("/pulls/{number:int}/requested_reviewers")
def requested_reviewers(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.review_requests.listing(ctx, svc.pulls.get(found, number)))


@router.post("/pulls/{number:int}/requested_reviewers", status_code=201)
def request_reviewers(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.review_requests.request(ctx, found, svc.pulls.get(found, number), body)
    shown = bodies(request, svc.pulls.to_json(ctx, pull, full=False))
    return JSONResponse(shown, status_code=201)


@router.delete("/pulls/{number:int}/requested_reviewers")
def remove_reviewers(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.review_requests.remove(ctx, found, svc.pulls.get(found, number), body)
    return JSONResponse(bodies(request, svc.pulls.to_json(ctx, pull, full=False)))


# -- issues ------------------------------------------------------------------------------------


@router.get("/issues")
def list_issues(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pulls = svc.issues.listing(found, params(request), since(request))
    return paginated(request, [_issue(request, svc, ctx, found, p) for p in pulls])


@router.patch("/issues/{number:int}")
def update_issue(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.issues.update(ctx, found, number, body)
    return JSONResponse(_issue(request, svc, ctx, found, pull))
