"""REST routes for commits and what is reported on them: the commit list, commit statuses, the
combined status and check runs. Registered before ``routes_repos``, whose ``/commits/{ref}``
would otherwise read ``abc/status`` as a ref. Thin: parse, call the service, render.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from controller.localforge import gitops, render
from controller.localforge.httpkit import Services, get_ctx, json_body, paginated, params, services
from controller.localforge.models import Repo
from controller.localforge.service import Ctx

router = APIRouter(prefix="/api/v3/repos/{owner}/{repo}")
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]


def _repo(request: Request, ctx: Ctx, owner: str, repo: str) -> tuple[Services, Repo]:
    found = services(request)
    return found, found.forge.find_repo(ctx, owner, repo)


@router.get("/commits")
def list_commits(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    """``sha`` (a branch or sha; the default branch), ``path``, ``author``, ``since``, ``until``."""
    svc, found = _repo(request, ctx, owner, repo)
    query = params(request)
    sha = svc.checks.resolve(found, query.get("sha") or found.default_branch)
    paths = (query["path"],) if query.get("path") else ()
    commits = gitops.log(
        svc.forge.repo_path(found),
        sha,
        paths=paths,
        author=query.get("author"),
        since=query.get("since"),
        until=query.get("until"),
    )
    return paginated(request, [render.commit(ctx.urls, found, c) for c in commits])


@router.get("/commits/{ref:path}/status")
def combined_status(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.checks.combined(ctx, found, ref))


@router.get("/commits/{ref:path}/statuses")
def list_statuses(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    items = [svc.checks.status_json(ctx, found, s) for s in svc.checks.statuses(found, ref)]
    return paginated(request, items)


@router.get("/statuses/{ref:path}")
def list_statuses_legacy(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> JSONResponse:
    """The older spelling of ``/commits/{ref}/statuses`` that GitHub still serves."""
    return list_statuses(request, ctx, owner, repo, ref)


@router.post("/statuses/{sha}", status_code=201)
def create_status(request: Request, ctx: CtxDep, owner: str, repo: str, sha: str, body: Body) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    status = svc.checks.create_status(ctx, found, sha, body)
    return JSONResponse(svc.checks.status_json(ctx, found, status), status_code=201)


@router.get("/commits/{ref:path}/check-runs")
def list_check_runs(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    runs = svc.checks.runs_for_ref(found, ref, params(request))
    return paginated(request, [svc.checks.run_json(ctx, found, r) for r in runs], key="check_runs")


@router.post("/check-runs", status_code=201)
def create_check_run(request: Request, ctx: CtxDep, owner: str, repo: str, body: Body) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    run = svc.checks.create_run(ctx, found, body)
    return JSONResponse(svc.checks.run_json(ctx, found, run), status_code=201)


@router.get("/check-runs/{run_id:int}")
def get_check_run(request: Request, ctx: CtxDep, owner: str, repo: str, run_id: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.checks.run_json(ctx, found, svc.checks.get_run(found, run_id)))


@router.patch("/check-runs/{run_id:int}")
def update_check_run(
    request: Request, ctx: CtxDep, owner: str, repo: str, run_id: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    run = svc.checks.update_run(ctx, found, run_id, body)
    return JSONResponse(svc.checks.run_json(ctx, found, run))
