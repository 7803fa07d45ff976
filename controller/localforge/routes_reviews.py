"""REST routes for reviews (with the pending-review life cycle) and review (inline) comments.
Thin: parse, call the service, render with the bodies the ``Accept`` header asks for.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

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
from controller.localforge.models import Pull, Repo, Review, ReviewComment
from controller.localforge.service import Ctx

router = APIRouter(prefix="/api/v3/repos/{owner}/{repo}")
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]


def _pull(request: Request, ctx: Ctx, owner: str, repo: str, number: int) -> tuple[Services, Repo, Pull]:
    svc = services(request)
    found = svc.forge.find_repo(ctx, owner, repo)
    return svc, found, svc.pulls.get(found, number)


def _review(request: Request, ctx: Ctx, repo: Repo, pull: Pull, review: Review) -> Json:
    return bodies(request, services(request).reviews.review_json(ctx, repo, pull, review))


def _comment(request: Request, ctx: Ctx, repo: Repo, comment: ReviewComment) -> Json:
    return bodies(request, services(request).reviews.comment_json(ctx, repo, comment))


# -- reviews -----------------------------------------------------------------------------------


@router.post("/pulls/{number:int}/reviews")
def create_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    return JSONResponse(_review(request, ctx, found, pull, svc.reviews.create(ctx, found, pull, body)))


@router.get("/pulls/{number:int}/reviews")
def list_reviews(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    items = [_review(request, ctx, found, pull, r) for r in svc.reviews.visible_reviews(ctx, pull)]
    return paginated(request, items)


@router.get("/pulls/{number:int}/reviews/{review_id:int}")
def get_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, review_id: int
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    return JSONResponse(_review(request, ctx, found, pull, svc.reviews.get(ctx, pull, review_id)))


@router.put("/pulls/{number:int}/reviews/{review_id:int}")
def update_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, review_id: int, body: Body
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    review = svc.reviews.update(ctx, found, pull, review_id, body)
    return JSONResponse(_review(request, ctx, found, pull, review))


@router.delete("/pulls/{number:int}/reviews/{review_id:int}")
def delete_pending_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, review_id: int
) -> JSONResponse:
    """GitHub answers 200 with the deleted review."""
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    review = svc.reviews.delete_pending(ctx, found, pull, review_id)
    return JSONResponse(_review(request, ctx, found, pull, review))


@router.post("/pulls/{number:int}/reviews/{review_id:int}/events")
def submit_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, review_id: int, body: Body
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    review = svc.reviews.submit(ctx, found, pull, review_id, body)
    return JSONResponse(_review(request, ctx, found, pull, review))


@router.put("/pulls/{number:int}/reviews/{review_id:int}/dismissals")
def dismiss_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, review_id: int, body: Body
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    review = svc.reviews.dismiss(ctx, found, pull, review_id, body)
    return JSONResponse(_review(request, ctx, found, pull, review))


@router.get("/pulls/{number:int}/reviews/{review_id:int}/comments")
def review_comments_of_review(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, review_id: int
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    comments = svc.reviews.review_comments(ctx, pull, review_id)
    return paginated(request, [_comment(request, ctx, found, c) for c in comments])


# -- review comments ---------------------------------------------------------------------------


@router.get("/pulls/comments")
def repo_review_comments(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc = services(request)
    found = svc.forge.find_repo(ctx, owner, repo)
    comments = svc.reviews.listing(ctx, found, None, params(request), since(request))
    return paginated(request, [_comment(request, ctx, found, c) for c in comments])


@router.get("/pulls/comments/{comment_id:int}")
def get_review_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> JSONResponse:
    svc = services(request)
    found = svc.forge.find_repo(ctx, owner, repo)
    return JSONResponse(_comment(request, ctx, found, svc.reviews.get_comment(ctx, found, comment_id)))


@router.patch("/pulls/comments/{comment_id:int}")
def edit_review_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int, body: Body
) -> JSONResponse:
    svc = services(request)
    found = svc.forge.find_repo(ctx, owner, repo)
    comment = svc.reviews.edit_comment(ctx, found, comment_id, body.get("body"))
    return JSONResponse(_comment(request, ctx, found, comment))


@router.delete("/pulls/comments/{comment_id:int}", status_code=204)
def delete_review_comment(request: Request, ctx: CtxDep, owner: str, repo: str, comment_id: int) -> Response:
    svc = services(request)
    svc.reviews.delete_comment(ctx, svc.forge.find_repo(ctx, owner, repo), comment_id)
    return Response(status_code=204)


@router.get("/pulls/{number:int}/comments")
def pull_review_comments(request: Request, ctx: CtxDep, owner: str, repo: str, number: int) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    comments = svc.reviews.listing(ctx, found, pull, params(request), since(request))
    return paginated(request, [_comment(request, ctx, found, c) for c in comments])


@router.post("/pulls/{number:int}/comments", status_code=201)
def create_review_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, body: Body
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    comment = svc.reviews.create_comment(ctx, found, pull, body)
    return JSONResponse(_comment(request, ctx, found, comment), status_code=201)


@router.post("/pulls/{number:int}/comments/{comment_id:int}/replies", status_code=201)
def reply_review_comment(
    request: Request, ctx: CtxDep, owner: str, repo: str, number: int, comment_id: int, body: Body
) -> JSONResponse:
    svc, found, pull = _pull(request, ctx, owner, repo, number)
    payload = {"body": body.get("body"), "in_reply_to": comment_id}
    comment = svc.reviews.create_comment(ctx, found, pull, payload)
    return JSONResponse(_comment(request, ctx, found, comment), status_code=201)
