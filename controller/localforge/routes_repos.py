"""REST routes for the API root, ``/meta``, users, organizations, repositories, branches, commits,
git refs and the rate limit (collaborators and hooks: ``routes_access``). Thin: parse, call the
service, render.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from controller.localforge import gitops, render
from controller.localforge.errors import NotFound
from controller.localforge.httpkit import (
    ENTERPRISE_VERSION,
    caller_key,
    get_ctx,
    json_body,
    paginated,
    params,
    services,
)
from controller.localforge.media import DIFF_TYPES, PATCH_TYPES, text_answer
from controller.localforge.models import AccountType, Repo
from controller.localforge.refs import Refs
from controller.localforge.service import Ctx

router = APIRouter(prefix="/api/v3")
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]


@router.get("/")
def root(ctx: CtxDep) -> JSONResponse:
    api = ctx.urls.api
    names = {
        "current_user_url": "/user",
        "current_user_authorizations_html_url": "/settings/connections{/client_id}",
        "authorizations_url": "/authorizations",
        "code_search_url": "/search/code?q={query}",
        "commit_search_url": "/search/commits?q={query}",
        "emails_url": "/user/emails",
        "emojis_url": "/emojis",
        "events_url": "/events",
        "feeds_url": "/feeds",
        "followers_url": "/user/followers",
        "following_url": "/user/following{/target}",
        "gists_url": "/gists{/gist_id}",
        "hub_url": "/hub",
        "issue_search_url": "/search/issues?q={query}",
        "issues_url": "/issues",
        "keys_url": "/user/keys",
        "label_search_url": "/search/labels?q={query}&repository_id={repository_id}",
        "notifications_url": "/notifications",
        "organization_url": "/orgs/{org}",
        "organization_repositories_url": "/orgs/{org}/repos{?type,page,per_page,sort}",
        "organization_teams_url": "/orgs/{org}/teams",
        "public_gists_url": "/gists/public",
        "rate_limit_url": "/rate_limit",
        "repository_url": "/repos/{owner}/{repo}",
        "repository_search_url": "/search/repositories?q={query}",
        "current_user_repositories_url": "/user/repos{?type,page,per_page,sort}",
        "starred_url": "/user/starred{/owner}{/repo}",
        "starred_gists_url": "/gists/starred",
        "topic_search_url": "/search/topics?q={query}",
        "user_url": "/users/{user}",
        "user_organizations_url": "/user/orgs",
        "user_repositories_url": "/users/{user}/repos{?type,page,per_page,sort}",
        "user_search_url": "/search/users?q={query}",
    }
    return JSONResponse({key: api + path for key, path in names.items()})


@router.get("/meta")
def meta() -> JSONResponse:
    """GitHub Enterprise's ``/meta``: the installed version, and no published address ranges."""
    names = ("hooks", "web", "api", "git", "packages", "pages", "importer", "actions")
    ranges: dict[str, list[str]] = {name: [] for name in names}
    return JSONResponse(
        {"verifiable_password_authentication": False, "installed_version": ENTERPRISE_VERSION, **ranges}
    )


@router.get("/rate_limit")
def rate_limit(request: Request, ctx: CtxDep) -> JSONResponse:
    auth = request.headers.get("authorization")
    limiter = services(request).limiter
    key = caller_key(auth, request.client.host if request.client else None)
    resources = {}
    for name in ("core", "search", "graphql", "integration_manifest", "code_search"):
        quota = limiter.peek(key, name, authenticated=bool(auth))
        resources[name] = {
            "limit": quota.limit,
            "remaining": quota.remaining,
            "reset": quota.reset,
            "used": quota.used,
        }
    return JSONResponse({"resources": resources, "rate": resources["core"]})


@router.get("/user")
def current_user(request: Request, ctx: CtxDep) -> JSONResponse:
    forge = services(request).forge
    actor = forge.signed_in(ctx)
    repos = forge.store.repos_of(actor.id)
    private = sum(r.private for r in repos)
    return JSONResponse(render.private_user(ctx.urls, actor, len(repos) - private, private))


@router.get("/users/{login}")
def get_user(request: Request, ctx: CtxDep, login: str) -> JSONResponse:
    store = services(request).forge.store
    account = store.account_by_login(login)
    if account is None:
        raise NotFound()
    public = sum(not r.private for r in store.repos_of(account.id))
    return JSONResponse(render.public_user(ctx.urls, account, public))


@router.get("/orgs/{org}")
def get_org(request: Request, ctx: CtxDep, org: str) -> JSONResponse:
    store = services(request).forge.store
    account = store.account_by_login(org)
    if account is None or account.type is not AccountType.ORGANIZATION:
        raise NotFound()
    public = sum(not r.private for r in store.repos_of(account.id))
    return JSONResponse(render.organization_full(ctx.urls, account, public))


_REPO_SORTS = {
    "created": "created_at",
    "updated": "updated_at",
    "pushed": "pushed_at",
    "full_name": "full_name",
}
_TYPES = {
    "owner": {"owner"},
    "member": {"collaborator", "organization_member"},
    "all": {"owner", "collaborator", "organization_member"},
}


@router.get("/user/repos")
def list_user_repos(request: Request, ctx: CtxDep) -> JSONResponse:
    """``affiliation``, ``visibility`` or ``type``, ``sort`` and ``direction``, as GitHub takes them."""
    forge = services(request).forge
    actor = forge.signed_in(ctx)
    query = params(request)
    kind = query.get("type")
    wanted = _TYPES.get(
        kind or "", set(query.get("affiliation", "owner,collaborator,organization_member").split(","))
    )
    visibility = query.get("visibility") or (kind if kind in {"public", "private"} else "all")
    seen: dict[int, Repo] = {}
    for repo, affiliation in forge.store.repos_for(actor.id):
        if affiliation in wanted and visibility in {"all", "private" if repo.private else "public"}:
            seen.setdefault(repo.id, repo)
    sort = query.get("sort", "full_name")
    default = "asc" if sort == "full_name" else "desc"
    reverse = query.get("direction", default) == "desc"

    def key(repo: Repo) -> str:
        column = _REPO_SORTS.get(sort, "full_name")
        return repo.full_name.lower() if column == "full_name" else str(getattr(repo, column) or "")

    repos = sorted(seen.values(), key=key, reverse=reverse)
    return paginated(request, [forge.repo_json(ctx, r) for r in repos])


@router.post("/user/repos", status_code=201)
def create_user_repo(request: Request, ctx: CtxDep, body: Body) -> JSONResponse:
    forge = services(request).forge
    repo = forge.create_repo(ctx, None, body)
    return JSONResponse(forge.repo_json(ctx, repo), status_code=201)


@router.post("/orgs/{org}/repos", status_code=201)
def create_org_repo(request: Request, ctx: CtxDep, org: str, body: Body) -> JSONResponse:
    forge = services(request).forge
    repo = forge.create_repo(ctx, org, body)
    return JSONResponse(forge.repo_json(ctx, repo), status_code=201)


@router.get("/repos/{owner}/{repo}")
def get_repo(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    forge = services(request).forge
    return JSONResponse(forge.repo_json(ctx, forge.find_repo(ctx, owner, repo)))


@router.get("/repos/{owner}/{repo}/branches")
def list_branches(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    forge = services(request).forge
    found = forge.find_repo(ctx, owner, repo)
    items = [render.branch_short(ctx.urls, found, name, sha) for name, sha in forge.branches(found)]
    return paginated(request, items)


@router.get("/repos/{owner}/{repo}/branches/{branch:path}")
def get_branch(request: Request, ctx: CtxDep, owner: str, repo: str, branch: str) -> JSONResponse:
    forge = services(request).forge
    found = forge.find_repo(ctx, owner, repo)
    return JSONResponse(render.branch_full(ctx.urls, found, branch, forge.branch(found, branch)))


@router.get("/repos/{owner}/{repo}/commits/{ref:path}")
def get_commit(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> Response:
    """GitHub's ``commit`` with ``stats`` and ``files`` (against the first parent), or its diff or patch."""
    forge = services(request).forge
    found = forge.find_repo(ctx, owner, repo)
    info, files = forge.commit(found, ref)
    accept = request.headers.get("accept", "")
    if accept.startswith(DIFF_TYPES):
        parent = info.parents[0] if info.parents else gitops.EMPTY_TREE
        text = gitops.diff_text(forge.repo_path(found), parent, info.sha)
        return text_answer(text, "application/vnd.github.diff")
    if accept.startswith(PATCH_TYPES):
        text = gitops.commit_patch(forge.repo_path(found), info.sha)
        return text_answer(text, "application/vnd.github.patch")
    shown = render.commit(ctx.urls, found, info)
    additions, deletions = sum(f.additions for f in files), sum(f.deletions for f in files)
    shown["stats"] = {"total": additions + deletions, "additions": additions, "deletions": deletions}
    shown["files"] = [render.file_entry(ctx.urls, found, f, info.sha) for f in files]
    return JSONResponse(shown)


# -- git refs ----------------------------------------------------------------------------------


def _refs(request: Request, ctx: Ctx, owner: str, repo: str) -> tuple[Refs, Repo]:
    found = services(request)
    return found.refs, found.forge.find_repo(ctx, owner, repo)


@router.get("/repos/{owner}/{repo}/git/ref/{ref:path}")
def get_ref(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> JSONResponse:
    refs, found = _refs(request, ctx, owner, repo)
    return JSONResponse(render.git_ref(ctx.urls, found, *refs.get_ref(found, ref)))


@router.get("/repos/{owner}/{repo}/git/refs/{ref:path}")
def get_ref_legacy(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> JSONResponse:
    """The older ``GET /git/refs/{ref}`` (an exact ref, as PyGithub's ``GitRef`` completes itself)."""
    return get_ref(request, ctx, owner, repo, ref)


@router.get("/repos/{owner}/{repo}/git/refs")
def list_refs(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    refs, found = _refs(request, ctx, owner, repo)
    listed = [r for r in refs.matching_refs(found, "") if not r[0].startswith("refs/pull/")]
    return paginated(request, [render.git_ref(ctx.urls, found, *r) for r in listed])


@router.get("/repos/{owner}/{repo}/git/matching-refs/{ref:path}")
def matching_refs(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> JSONResponse:
    refs, found = _refs(request, ctx, owner, repo)
    return JSONResponse([render.git_ref(ctx.urls, found, *r) for r in refs.matching_refs(found, ref)])


@router.post("/repos/{owner}/{repo}/git/refs", status_code=201)
def create_ref(request: Request, ctx: CtxDep, owner: str, repo: str, body: Body) -> JSONResponse:
    refs, found = _refs(request, ctx, owner, repo)
    created = refs.create_ref(ctx, found, body.get("ref"), body.get("sha"))
    return JSONResponse(render.git_ref(ctx.urls, found, *created), status_code=201)


@router.patch("/repos/{owner}/{repo}/git/refs/{ref:path}")
def update_ref(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str, body: Body) -> JSONResponse:
    refs, found = _refs(request, ctx, owner, repo)
    updated = refs.update_ref(ctx, found, ref, body.get("sha"), bool(body.get("force", False)))
    return JSONResponse(render.git_ref(ctx.urls, found, *updated))


@router.delete("/repos/{owner}/{repo}/git/refs/{ref:path}", status_code=204)
def delete_ref(request: Request, ctx: CtxDep, owner: str, repo: str, ref: str) -> Response:
    refs, found = _refs(request, ctx, owner, repo)
    refs.delete_ref(ctx, found, ref)
    return Response(status_code=204)


@router.post("/repos/{owner}/{repo}/forks", status_code=202)
def create_fork(request: Request, ctx: CtxDep, owner: str, repo: str, body: Body) -> JSONResponse:
    forge = services(request).forge
    fork = forge.fork(ctx, forge.find_repo(ctx, owner, repo), body)
    return JSONResponse(forge.repo_json(ctx, fork), status_code=202)
