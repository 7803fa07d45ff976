"""Git smart HTTP (fetch and push) through ``git http-backend`` as a CGI subprocess.

Fetching needs read access (anonymous for public repositories); pushing needs a token with write
access, sent as HTTP basic auth (token as password) or as an ``Authorization: Bearer/token``
header (``http.extraHeader``). The bare repositories refuse non-fast-forward updates and branch
deletions by push (``receive.denyNonFastForwards``/``denyDeletes``). After a push the refs are
compared with a snapshot taken before it, and the moved branches are announced to the forge,
which moves PR heads and fires ``synchronize`` webhooks.
"""

from __future__ import annotations

import subprocess

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from controller.localforge import gitops
from controller.localforge.errors import ForgeError
from controller.localforge.httpkit import base_url, credentials, services
from controller.localforge.models import ROLE_RANK, Account, Repo, Role
from controller.localforge.render import Urls
from controller.localforge.service import Ctx, Forge

router = APIRouter()
_SERVICES = {"git-upload-pack", "git-receive-pack"}


def _text(status: int, message: str, *, challenge: bool = False) -> Response:
    headers = {"WWW-Authenticate": 'Basic realm="localforge"'} if challenge else None
    return Response(message + "\n", status_code=status, media_type="text/plain", headers=headers)


def _authorize(
    forge: Forge, request: Request, owner: str, name: str, writing: bool
) -> Response | tuple[Repo, Account | None]:
    """The repository and caller, or the error response git should see."""
    try:
        actor = forge.authenticate(credentials(request.headers.get("authorization")))
    except ForgeError:
        return _text(401, "Invalid username or token.", challenge=True)
    repo = forge.store.repo_by_name(owner, name)
    role = forge.role(repo, actor) if repo is not None else None
    if repo is None or role is None:
        if actor is None:
            return _text(401, "Authentication required.", challenge=True)
        return _text(404, "Repository not found.")
    if writing and actor is None:
        return _text(401, "Authentication required to push.", challenge=True)
    if writing and ROLE_RANK[role] < ROLE_RANK[Role.PUSH]:
        return _text(
            403, f"Permission to {repo.full_name}.git denied to {actor.login if actor else 'anonymous'}."
        )
    return repo, actor


@router.api_route("/{owner}/{name}.git/{rest:path}", methods=["GET", "POST"])
async def git_http(request: Request, owner: str, name: str, rest: str) -> Response:
    return await _serve(request, owner, name, rest)


@router.get("/{owner}/{name}/info/refs")
async def git_refs_bare_url(request: Request, owner: str, name: str) -> Response:
    """``git clone http://HOST/OWNER/REPO`` (no ``.git``) works on GitHub, so here too."""
    return await _serve(request, owner, name, "info/refs")


@router.post("/{owner}/{name}/{service}")
async def git_rpc_bare_url(request: Request, owner: str, name: str, service: str) -> Response:
    if service not in _SERVICES:
        return _text(404, "Not Found")
    return await _serve(request, owner, name, service)


async def _serve(request: Request, owner: str, name: str, rest: str) -> Response:
    service = request.query_params.get("service") if rest == "info/refs" else rest
    if service not in _SERVICES:
        return _text(403, "Only the smart HTTP protocol is supported.")
    forge = services(request).forge
    writing = service == "git-receive-pack"
    allowed = _authorize(forge, request, owner, name, writing)
    if isinstance(allowed, Response):
        return allowed
    repo, actor = allowed
    body = await request.body()
    ctx = Ctx(actor, Urls(base_url(request)))
    env = {
        "GIT_PROJECT_ROOT": str(forge.git_root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": f"/{repo.owner_login}/{repo.name}.git/{rest}",
        "REQUEST_METHOD": request.method,
        "QUERY_STRING": request.url.query,
        "CONTENT_TYPE": request.headers.get("content-type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_USER": actor.login if actor else "",
        "REMOTE_ADDR": request.client.host if request.client else "127.0.0.1",
        "GATEWAY_INTERFACE": "CGI/1.1",
        "SERVER_PROTOCOL": "HTTP/1.1",
    }
    for header, variable in (
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "HTTP_GIT_PROTOCOL"),
    ):
        if header in request.headers:
            env[variable] = request.headers[header]
    pushing = writing and request.method == "POST"
    output = await run_in_threadpool(_run_backend, forge, ctx, repo, env, body, pushing)
    return _cgi_response(output)


def _run_backend(
    forge: Forge, ctx: Ctx, repo: Repo, env: dict[str, str], body: bytes, pushing: bool
) -> bytes:
    argv = ["git", "http-backend"]
    if not pushing:
        return subprocess.run(argv, input=body, capture_output=True, env=gitops.git_env(env)).stdout
    path = forge.repo_path(repo)
    with forge.repo_lock(repo):
        before = gitops.snapshot(path)
        output = subprocess.run(argv, input=body, capture_output=True, env=gitops.git_env(env)).stdout
        forge.refs_changed(ctx, repo, before, gitops.snapshot(path))
    return output


def _cgi_response(output: bytes) -> Response:
    head, sep, body = output.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = output.partition(b"\n\n")
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        key, _, value = line.partition(":")
        if key.lower() == "status":
            status = int(value.strip().split(" ")[0])
        elif key:
            headers[key.strip()] = value.strip()
    if not sep:
        return _text(500, "git http-backend failed.")
    return Response(body, status_code=status, headers=headers)
