"""REST routes for pull requests, the PR's issue and issue comments (reviews: ``routes_reviews``).
Thin: parse, call the service, render with the bodies the ``Accept`` header asks for.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from controller.localforge import render
from controller.localforge.httpkit import (
    Json,
    Services,
    bodies,
    get_ctx,
    json_body,
    paginated,
    params,
    services,
    since,
)
from controller.localforge.media import DIFF_TYPES, PATCH_TYPES, text_answer
from controller.localforge.models import IssueComment, Pull, Repo
from controller.localforge.service import Ctx

router = APIRouter(prefix="/api/v3/repos/{owner}/{repo}")
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]


def _repo(request: Request, ctx: Ctx, owner: str, repo: str) -> tuple[Services, Repo]:
    found = services(request)
    return found, found.forge.find_repo(ctx, owner, repo)


def _pull(request: Request, ctx: Ctx, pull: Pull, *, full: bool = True) -> Json:
    return bodies(request, services(request).pulls.to_json(ctx, pull, full=full))


def _comment(request: Request, ctx: Ctx, repo: Repo, comment: IssueComment) -> Json:
    item = services(request).comments.comment_json(ctx, repo, comment)
    return bodies(request, item, body_required=False)


# -- pulls -------------------------------------------------------------------------------------


@router.post("/pulls", status_code=201)
def create_pull(request: Request, ctx: CtxDep, owner: str, repo: str, body: Body) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.create(ctx, found, body)
    return JSONResponse(_pull(request, ctx, pull), status_code=201)


@router.get("/pulls")
def list_pulls(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pulls = svc.pulls.listing(found, params(request))
    return paginated(request, [_pull(request, ctx, p, full=False) for p in pulls])


@router.get("/pulls/{number:int}")
def get_pull(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    accept = request.headers.get("accept", "")
    if accept.startswith(DIFF_TYPES):
        return text_answer(svc.pulls.diff(found, pull), "application/vnd.github.diff")
    if accept.startswith(PATCH_TYPES):
        return text_answer(svc.pulls.patch(found, pull), "application/vnd.github.patch")
    return JSONResponse(_pull(request, ctx, pull))


@router.patch("/pulls/{number:int}")
def update_pull(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.update(ctx, found, svc.pulls.get(found, number), body)
    return JSONResponse(_pull(request, ctx, pull))


@router.get("/pulls/{number:int}/files")
def pull_files(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    items = [render.file_entry(ctx.urls, found, f, pull.head_sha) for f in svc.pulls.files(found, pull)]
    return paginated(request, items)


@router.get("/pulls/{number:int}/commits")
def pull_commits(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    return paginated(request, [render.commit(ctx.urls, found, c) for c in svc.pulls.commits(found, pull)])


# -- the PR's issue and issue comments ---------------------------------------------------------


@router.get("/issues/comments")
def repo_issue_comments(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comments = svc.comments.listing(found, None, params(request), since(request))
    return paginated(request, [_comment(request, ctx, found, c) for c in comments])


@router.get("/issues/comments/{comment_id:int}")
def get_issue_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(_comment(request, ctx, found, svc.comments.get(found, comment_id)))


@router.patch("/issues/comments/{comment_id:int}")
def edit_issue_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(_comment(request, ctx, found, svc.comments.edit(ctx, found, comment_id, body)))


@router.delete("/issues/comments/{comment_id:int}", status_code=204)
def delete_issue_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.comments.delete(ctx, found, comment_id)
    return Response(status_code=204)


@router.get("/issues/{number:int}")
def get_issue(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    issue = svc.comments.issue_json(ctx, found, svc.pulls.get(found, number))
    return JSONResponse(bodies(request, issue, body_required=False))


@router.get("/issues/{number:int}/comments")
def issue_comments(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comments = svc.comments.listing(found, number, params(request), since(request))
    return paginated(request, [_comment(request, ctx, found, c) for c in comments])


@router.post("/issues/{number:int}/comments", status_code=201)
def create_issue_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comment = svc.comments.create(ctx, found, number, body)
    return JSONResponse(_comment(request, ctx, found, comment), status_code=201)
