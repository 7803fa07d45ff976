"""REST routes for who may act on a repository and what it tells: collaborators (with their
permission) and webhooks (with their config, pings and deliveries). Thin: parse, call the
service, render.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from controller.localforge import render
from controller.localforge.errors import NotFound
from controller.localforge.httpkit import Json, Services, get_ctx, json_body, paginated, services
from controller.localforge.models import Account, AccountType, Repo, Role
from controller.localforge.service import Ctx, permission_name

router = APIRouter(prefix="/api/v3/repos/{owner}/{repo}")
CtxDep = Annotated[Ctx, Depends(get_ctx)]
Body = Annotated[dict[str, Any], Depends(json_body)]


def _repo(request: Request, ctx: Ctx, owner: str, repo: str) -> tuple[Services, Repo]:
    svc = services(request)
    return svc, svc.forge.find_repo(ctx, owner, repo)


def _role_name(role: Role | None) -> str:
    return {Role.PULL: "read", Role.PUSH: "write"}.get(role, role.value) if role else "none"


def _collaborator(ctx: Ctx, account: Account, role: Role | None) -> Json:
    """GitHub's ``collaborator``: a user with ``permissions`` flags and ``role_name``."""
    shown = render.user(ctx.urls, account)
    rank = {"none": 0, "read": 1, "write": 3, "admin": 5}[permission_name(role)]
    shown["permissions"] = {
        "admin": rank >= 5,
        "maintain": role in {Role.MAINTAIN, Role.ADMIN},
        "push": rank >= 3,
        "triage": rank >= 3 or role is Role.TRIAGE,
        "pull": rank >= 1,
    }
    shown["role_name"] = _role_name(role)
    return shown


# -- collaborators -----------------------------------------------------------------------------


@router.put("/collaborators/{login}")
def put_collaborator(
    request: Request, ctx: CtxDep, owner: str, repo: str, login: str, body: Body
) -> Response:
    """201 with the invitation for a new collaborator, 204 for one already there (GitHub's answers).

    The forge accepts the invitation at once: the user is a collaborator when this returns.
    """
    svc, found = _repo(request, ctx, owner, repo)
    role = str(body.get("permission", "push"))
    if not svc.forge.add_collaborator(ctx, found, login, role):
        return Response(status_code=204)
    invitee = svc.forge.store.account_by_login(login)
    assert invitee is not None and ctx.actor is not None
    ident = svc.forge.store.allocate_id("invitation")
    invitation = {
        "id": ident,
        "node_id": render.node_id("RepositoryInvitation", ident),
        "repository": svc.forge.repo_json(ctx, found),
        "invitee": render.user(ctx.urls, invitee),
        "inviter": render.user(ctx.urls, ctx.actor),
        "permissions": _role_name(svc.forge.store.collaborator_role(found.id, invitee.id)),
        "created_at": svc.forge.store.now(),
        "expired": False,
        "url": f"{ctx.urls.api}/user/repository_invitations/{ident}",
        "html_url": f"{ctx.urls.web}/{found.full_name}/invitations",
    }
    return JSONResponse(invitation, status_code=201)


@router.get("/collaborators")
def list_collaborators(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    """The owner (or the organization's members) and the collaborators, as ``affiliation=all``."""
    svc, found = _repo(request, ctx, owner, repo)
    svc.forge.require(ctx, found, Role.PUSH)
    store = svc.forge.store
    owner_account = svc.forge.account(found.owner_id)
    ids = [owner_account.id] if owner_account.type is not AccountType.ORGANIZATION else []
    if owner_account.type is AccountType.ORGANIZATION:
        ids += store.org_members(owner_account.id)
    ids += [user_id for user_id, _ in store.collaborators(found.id) if user_id not in ids]
    affiliation = request.query_params.get("affiliation", "all")
    if affiliation == "outside":
        ids = [user_id for user_id, _ in store.collaborators(found.id)]
    items = []
    for user_id in ids:
        account = svc.forge.account(user_id)
        items.append(_collaborator(ctx, account, svc.forge.role(found, account)))
    return paginated(request, items)


@router.get("/collaborators/{login}/permission")
def collaborator_permission(request: Request, ctx: CtxDep, owner: str, repo: str, login: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    account, role = svc.forge.permission_of(ctx, found, login)
    user = _collaborator(ctx, account, role)
    return JSONResponse({"permission": permission_name(role), "role_name": user["role_name"], "user": user})


@router.get("/collaborators/{login}")
def is_collaborator(request: Request, ctx: CtxDep, owner: str, repo: str, login: str) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    account = svc.forge.store.account_by_login(login)
    if account is None or svc.forge.association(found, account) not in {"OWNER", "MEMBER", "COLLABORATOR"}:
        raise NotFound()
    return Response(status_code=204)


# -- hooks -------------------------------------------------------------------------------------


@router.post("/hooks", status_code=201)
def create_hook(request: Request, ctx: CtxDep, owner: str, repo: str, body: Body) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    hook = svc.hooks.create(ctx, found, body)
    return JSONResponse(svc.hooks.to_json(ctx, found, hook), status_code=201)


@router.get("/hooks")
def list_hooks(request: Request, ctx: CtxDep, owner: str, repo: str) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    svc.forge.require(ctx, found, Role.ADMIN)
    return paginated(request, [svc.hooks.to_json(ctx, found, h) for h in svc.forge.store.hooks(found.id)])


@router.get("/hooks/{hook_id:int}")
def get_hook(request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.hooks.to_json(ctx, found, svc.hooks.get(ctx, found, hook_id)))


@router.patch("/hooks/{hook_id:int}")
def update_hook(
    request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.hooks.to_json(ctx, found, svc.hooks.update(ctx, found, hook_id, body)))


@router.delete("/hooks/{hook_id:int}", status_code=204)
def delete_hook(request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.hooks.delete(ctx, found, hook_id)
    return Response(status_code=204)


@router.get("/hooks/{hook_id:int}/config")
def get_hook_config(request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.hooks.config_json(svc.hooks.get(ctx, found, hook_id)))


@router.patch("/hooks/{hook_id:int}/config")
def update_hook_config(
    request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int, body: Body
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    return JSONResponse(svc.hooks.config_json(svc.hooks.update_config(ctx, found, hook_id, body)))


@router.post("/hooks/{hook_id:int}/pings", status_code=204)
def ping_hook(request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int) -> Response:
    svc, found = _repo(request, ctx, owner, repo)
    svc.hooks.ping(ctx, found, svc.hooks.get(ctx, found, hook_id))
    return Response(status_code=204)


@router.get("/hooks/{hook_id:int}/deliveries")
def hook_deliveries(request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    items = [svc.hooks.delivery_json(d) for d in svc.hooks.deliveries(ctx, found, hook_id)]
    return paginated(request, items)


@router.get("/hooks/{hook_id:int}/deliveries/{delivery_id:int}")
def hook_delivery(
    request: Request, ctx: CtxDep, owner: str, repo: str, hook_id: int, delivery_id: int
) -> JSONResponse:
    svc, found = _repo(request, ctx, owner, repo)
    item = svc.hooks.delivery(ctx, found, hook_id, delivery_id)
    return JSONResponse(svc.hooks.delivery_json(item, full=True))
