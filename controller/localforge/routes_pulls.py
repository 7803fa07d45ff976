"""REST routes for pull requests, reviews, review comments, the PR's issue and issue comments.
Thin: parse, call the service, render.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from controller.localforge import render
from controller.localforge.httpkit import Services, get_ctx, json_body, paginated, params, services, since
from controller.localforge.models import Repo
from controller.localforge.service import Ctx

router = APIRouter(prefix="/api/v3/repos/{owner}/{repo}")
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]
DIFF_TYPES = ("application/vnd.github.diff", "application/vnd.github.v3.diff")


def _repo(request: Request, ctx: Ctx, owner: str, repo: str) -> tuple[Services, Repo]:
    found = services(request)
    return found, found.forge.find_repo(ctx, owner, repo)


# -- pulls -------------------------------------------------------------------------------------


@router.post("/pulls", status_code=201)
def create_pull(request: Request, ctx: CtxDep, owner: str, repo: str, body: Body) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.create(ctx, found, body)
    return JSONResponse(svc.pulls.to_json(ctx, pull), status_code=201)


@router.get("/pulls")
def list_pulls(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pulls = svc.pulls.listing(found, params(request))
    return paginated(request, [svc.pulls.to_json(ctx, p, full=False) for p in pulls])


@router.get("/pulls/{number:int}")
def get_pull(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    if request.headers.get("accept", "").startswith(DIFF_TYPES):
        return PlainTextResponse(svc.pulls.diff(found, pull), media_type="application/vnd.github.diff")
    return JSONResponse(svc.pulls.to_json(ctx, pull))


@router.patch("/pulls/{number:int}")
def update_pull(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.update(ctx, found, svc.pulls.get(found, number), body)
    return JSONResponse(svc.pulls.to_json(ctx, pull))


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


# -- reviews -----------------------------------------------------------------------------------


@router.post("/pulls/{number:int}/reviews")
def create_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    review = svc.reviews.create(ctx, found, pull, body)
    return JSONResponse(svc.reviews.review_json(ctx, found, pull, review))


@router.get("/pulls/{number:int}/reviews")
def list_reviews(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    items = [svc.reviews.review_json(ctx, found, pull, r) for r in svc.reviews.visible_reviews(ctx, pull)]
    return paginated(request, items)


@router.get("/pulls/{number:int}/reviews/{review_id:int}")
def get_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, review_id: int
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    return JSONResponse(svc.reviews.review_json(ctx, found, pull, svc.reviews.get(ctx, pull, review_id)))


# -- review comments ---------------------------------------------------------------------------


@router.get("/pulls/comments")
def repo_review_comments(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comments = svc.reviews.listing(ctx, found, None, params(request), since(request))
    return paginated(request, [svc.reviews.comment_json(ctx, found, c) for c in comments])


@router.get("/pulls/comments/{comment_id:int}")
def get_review_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.reviews.comment_json(ctx, found, svc.reviews.get_comment(ctx, found, comment_id)))


@router.patch("/pulls/comments/{comment_id:int}")
def edit_review_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comment = svc.reviews.edit_comment(ctx, found, comment_id, body.get("body"))
    return JSONResponse(svc.reviews.comment_json(ctx, found, comment))


@router.delete("/pulls/comments/{comment_id:int}", status_code=204)
def delete_review_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.reviews.delete_comment(ctx, found, comment_id)
    return Response(status_code=204)


@router.get("/pulls/{number:int}/comments")
def pull_review_comments(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    pull = svc.pulls.get(found, number)
    comments = svc.reviews.listing(ctx, found, pull, params(request), since(request))
    return paginated(request, [svc.reviews.comment_json(ctx, found, c) for c in comments])


@router.post("/pulls/{number:int}/comments", status_code=201)
def create_review_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comment = svc.reviews.create_comment(ctx, found, svc.pulls.get(found, number), body)
    return JSONResponse(svc.reviews.comment_json(ctx, found, comment), status_code=201)


@router.post("/pulls/{number:int}/comments/{comment_id:int}/replies", status_code=201)
def reply_review_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, comment_id: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    text = body.get("body")
    pull = svc.pulls.get(found, number)
    comment = svc.reviews.create_comment(ctx, found, pull, {"body": text, "in_reply_to": comment_id})
    return JSONResponse(svc.reviews.comment_json(ctx, found, comment), status_code=201)


# -- the PR's issue and issue comments ---------------------------------------------------------


@router.get("/issues/comments")
def repo_issue_comments(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comments = svc.comments.listing(found, None, params(request), since(request))
    return paginated(request, [svc.comments.comment_json(ctx, found, c) for c in comments])


@router.get("/issues/comments/{comment_id:int}")
def get_issue_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.comments.comment_json(ctx, found, svc.comments.get(found, comment_id)))


@router.patch("/issues/comments/{comment_id:int}")
def edit_issue_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(
        svc.comments.comment_json(ctx, found, svc.comments.edit(ctx, found, comment_id, body))
    )


@router.delete("/issues/comments/{comment_id:int}", status_code=204)
def delete_issue_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.comments.delete(ctx, found, comment_id)
    return Response(status_code=204)


@router.get("/issues/{number:int}")
def get_issue(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.comments.issue_json(ctx, found, svc.pulls.get(found, number)))


@router.get("/issues/{number:int}/comments")
def issue_comments(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comments = svc.comments.listing(found, number, params(request), since(request))
    return paginated(request, [svc.comments.comment_json(ctx, found, c) for c in comments])


@router.post("/issues/{number:int}/comments", status_code=201)
def create_issue_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    comment = svc.comments.create(ctx, found, number, body)
    return JSONResponse(svc.comments.comment_json(ctx, found, comment), status_code=201)
