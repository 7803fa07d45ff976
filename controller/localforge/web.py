"""A minimal read-only web view, so the ``html_url`` the forge prints leads somewhere useful:
a repository's open pull requests, one pull request with its files and conversation, and the
``.diff`` and ``.patch`` of a pull request (GitHub's ``diff_url`` and ``patch_url``)."""

from __future__ import annotations

from html import escape

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse

from controller.localforge.httpkit import base_url, credentials, services
from controller.localforge.models import Pull, Repo
from controller.localforge.render import Urls
from controller.localforge.service import Ctx

router = APIRouter()

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "pre{background:#f6f8fa;padding:.75rem;overflow-x:auto}.meta{color:#57606a}"
    ".comment{border:1px solid #d0d7de;border-radius:6px;padding:.5rem .75rem;margin:.5rem 0}"
)


def _page(title: str, body: str) -> HTMLResponse:
    head = f"<meta charset='utf-8'><title>{escape(title)}</title><style>{_STYLE}</style>"
    return HTMLResponse(f"<!doctype html><html><head>{head}</head><body>{body}</body></html>")


def _ctx(request: Request) -> Ctx:
    actor = services(request).forge.authenticate(credentials(request.headers.get("authorization")))
    return Ctx(actor, Urls(base_url(request)))


def _pull(request: Request, owner: str, repo: str, number: int) -> tuple[Ctx, Repo, Pull]:
    ctx = _ctx(request)
    svc = services(request)
    found = svc.forge.find_repo(ctx, owner, repo)
    return ctx, found, svc.pulls.get(found, number)


@router.get("/{owner}/{repo}/pull/{number:int}.diff")
def pull_diff(request: Request, owner: str, repo: str, number: int) -> PlainTextResponse:
    _, found, pull = _pull(request, owner, repo, number)
    return PlainTextResponse(services(request).pulls.diff(found, pull))


@router.get("/{owner}/{repo}/pull/{number:int}.patch")
def pull_patch(request: Request, owner: str, repo: str, number: int) -> PlainTextResponse:
    _, found, pull = _pull(request, owner, repo, number)
    return PlainTextResponse(services(request).pulls.patch(found, pull))


@router.get("/{owner}/{repo}/pull/{number:int}")
def pull_page(request: Request, owner: str, repo: str, number: int) -> HTMLResponse:
    ctx, found, pull = _pull(request, owner, repo, number)
    svc = services(request)
    author = svc.forge.account(pull.user_id).login
    state = "draft" if pull.draft and pull.state == "open" else pull.state
    parts = [
        f"<h1>{escape(pull.title)} <span class='meta'>#{pull.number}</span></h1>",
        f"<p class='meta'>{state} · {escape(author)} wants to merge <code>{escape(pull.head_ref)}</code>"
        f" into <code>{escape(pull.base_ref)}</code> · head <code>{pull.head_sha[:12]}</code></p>",
        f"<pre>{escape(pull.body or '')}</pre>",
        "<h2>Files changed</h2>",
    ]
    for change in svc.pulls.files(found, pull):
        parts.append(f"<h3>{escape(change.filename)} <span class='meta'>{change.status}</span></h3>")
        parts.append(f"<pre>{escape(change.patch or '(no textual diff)')}</pre>")
    parts.append("<h2>Conversation</h2>")
    for comment in svc.comments.listing(found, pull.number, {}, None):
        who = svc.forge.account(comment.user_id).login
        parts.append(f"<div class='comment'><b>{escape(who)}</b><pre>{escape(comment.body)}</pre></div>")
    for review in svc.reviews.visible_reviews(ctx, pull):
        who = svc.forge.account(review.user_id).login
        parts.append(f"<div class='comment'><b>{escape(who)}</b> {review.state.value.lower()}")
        parts.append(f"<pre>{escape(review.body)}</pre></div>")
    for inline in svc.reviews.listing(ctx, found, pull, {}, None):
        who = svc.forge.account(inline.user_id).login
        where = f"{inline.path}:{inline.line}" if inline.line else inline.path
        parts.append(f"<div class='comment'><b>{escape(who)}</b> on <code>{escape(where)}</code>")
        parts.append(f"<pre>{escape(inline.body)}</pre></div>")
    return _page(f"{pull.title} · {found.full_name}#{pull.number}", "".join(parts))


@router.get("/{owner}/{repo}")
def repo_page(request: Request, owner: str, repo: str) -> HTMLResponse:
    ctx = _ctx(request)
    svc = services(request)
    found = svc.forge.find_repo(ctx, owner, repo)
    items = "".join(
        f"<li><a href='{ctx.urls.pull_html(found, p.number)}'>#{p.number} {escape(p.title)}</a></li>"
        for p in svc.pulls.listing(found, {"state": "open"})
    )
    clone = f"{ctx.urls.web}/{found.full_name}.git"
    body = f"<h1>{escape(found.full_name)}</h1><p class='meta'>git clone {escape(clone)}</p>"
    return _page(found.full_name, f"{body}<h2>Open pull requests</h2><ul>{items or '<li>none</li>'}</ul>")
