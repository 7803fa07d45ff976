"""REST routes of the contents API and ``compare``, and the raw file view their ``download_url``
points at. Thin: parse, call ``contents.Contents``, render."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from controller.localforge import gitops, render
from controller.localforge.contents import Contents, file_commit, item
from controller.localforge.httpkit import get_ctx, json_body, params, services
from controller.localforge.media import DIFF_TYPES, PATCH_TYPES, text_answer
from controller.localforge.service import Ctx

router = APIRouter()
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]

RAW_TYPES = ("application/vnd.github.raw", "application/vnd.github.v3.raw")


def _contents(request: Request) -> Contents:
    return Contents(services(request).forge)


@router.get("/api/v3/repos/{owner}/{repo}/contents")
@router.get("/api/v3/repos/{owner}/{repo}/contents/{path:path}")
def get_contents(request: Request, ctx: CtxDep, owner: str, repo: str, path: str = "") -> Response:
    """A file (base64 ``content``, or its bytes with the ``raw`` media type) or a directory listing."""
    contents = _contents(request)
    found = contents.read(contents.forge.find_repo(ctx, owner, repo), path, params(request).get("ref"))
    ref = params(request).get("ref") or found.repo.default_branch
    accept = request.headers.get("accept", "")
    if found.entry.kind == "tree":
        return JSONResponse([item(ctx.urls, found.repo, ref, e) for e in found.children])
    data = contents.raw(found) if found.entry.kind == "blob" else b""
    if accept.startswith(RAW_TYPES) and found.entry.kind == "blob":
        return Response(data, media_type="application/vnd.github.raw; charset=utf-8")
    return JSONResponse(item(ctx.urls, found.repo, ref, found.entry, data))


@router.put("/api/v3/repos/{owner}/{repo}/contents/{path:path}")
def put_contents(request: Request, ctx: CtxDep, owner: str, repo: str, path: str, body: Body) -> JSONResponse:
    """Create (201) or update (200) one file with a commit on ``branch``."""
    contents = _contents(request)
    found = contents.forge.find_repo(ctx, owner, repo)
    created, sha, entry = contents.write(ctx, found, path, body)
    branch = body.get("branch") or found.default_branch
    info = gitops.commit_info(contents.forge.repo_path(found), sha)
    return JSONResponse(
        file_commit(ctx.urls, found, branch, info, entry), status_code=201 if created else 200
    )


@router.get("/api/v3/repos/{owner}/{repo}/compare/{basehead:path}")
def compare(request: Request, ctx: CtxDep, owner: str, repo: str, basehead: str) -> Response:
    """GitHub's ``commit-comparison`` of ``BASE...HEAD``, or its diff or patch."""
    contents = _contents(request)
    found = contents.forge.find_repo(ctx, owner, repo)
    base, head, merge_base = contents.compare(found, basehead)
    path = contents.forge.repo_path(found)
    accept = request.headers.get("accept", "")
    if accept.startswith(DIFF_TYPES):
        return text_answer(gitops.diff_text(path, merge_base, head), "application/vnd.github.diff")
    if accept.startswith(PATCH_TYPES):
        return text_answer(gitops.format_patch(path, merge_base, head), "application/vnd.github.patch")
    ahead, behind = gitops.count_commits(path, merge_base, head), gitops.count_commits(path, merge_base, base)
    status = "identical" if base == head else "ahead" if not behind else "behind" if not ahead else "diverged"
    commits = gitops.commits_between(path, merge_base, head)[-250:]  # GitHub lists at most 250
    api, web = ctx.urls.repo_api(found), f"{ctx.urls.web}/{found.full_name}"
    return JSONResponse(
        {
            "url": f"{api}/compare/{basehead}",
            "html_url": f"{web}/compare/{basehead}",
            "permalink_url": f"{web}/compare/{base}...{head}",
            "diff_url": f"{web}/compare/{basehead}.diff",
            "patch_url": f"{web}/compare/{basehead}.patch",
            "base_commit": render.commit(ctx.urls, found, gitops.commit_info(path, base)),
            "merge_base_commit": render.commit(ctx.urls, found, gitops.commit_info(path, merge_base)),
            "status": status,
            "ahead_by": ahead,
            "behind_by": behind,
            "total_commits": ahead,
            "commits": [render.commit(ctx.urls, found, c) for c in commits],
            "files": [
                render.file_entry(ctx.urls, found, f, head) for f in gitops.diff_files(path, merge_base, head)
            ],
        }
    )


@router.get("/{owner}/{repo}/raw/{ref}/{path:path}")
def raw_file(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str, path: str) -> Response:
    """The ``download_url`` of a file: its bytes, as ``raw.githubusercontent.com`` serves them."""
    contents = _contents(request)
    found = contents.read(contents.forge.find_repo(ctx, owner, repo), path, ref)
    if found.entry.kind != "blob":
        return text_answer("404: Not Found", "text/plain", status_code=404)
    return Response(contents.raw(found), media_type="text/plain; charset=utf-8")
