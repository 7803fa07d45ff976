"""``crucible forge``: run the local forge, manage its accounts, and act as a reviewer.

The reviewer commands (``comment``, ``review``, ``close``, ``reopen``) talk to a running forge over
its REST API (``--url``), exactly as a person's client would; with ``--root`` instead, they start
the forge in-process for the one call. The lead wires ``forge_cli`` into the ``crucible`` CLI.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from controller.domain.errors import CrucibleError
from controller.localforge.server import running_forge, serve
from controller.localforge.users import add_org, add_team, add_user

RootOption = click.Path(file_okay=False, path_type=Path)


@click.group("forge")
def forge_cli() -> None:
    """The GitHub-compatible local forge (REST under /api/v3, git at /OWNER/REPO.git)."""


@forge_cli.command("serve")
@click.option("--root", type=RootOption, required=True, help="Directory holding forge.db and git/.")
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--webhook-url", help="Receives every event of every repository.")
@click.option("--webhook-secret", help="Signs deliveries to --webhook-url (X-Hub-Signature-256).")
@click.option("--public-url", help="URL root printed in answers (default: from each request's Host).")
@click.option(
    "--tls",
    is_flag=True,
    help="Serve https with a self-signed certificate kept in ROOT/tls (printed: how to trust it).",
)
def serve_command(
    root: Path,
    port: int,
    host: str,
    webhook_url: str | None,
    webhook_secret: str | None,
    public_url: str | None,
    tls: bool,
) -> None:
    """Serve the forge in the foreground."""
    if webhook_secret and not webhook_url:
        raise click.UsageError("--webhook-secret needs --webhook-url")
    serve(
        root,
        host,
        port,
        webhook_url=webhook_url,
        webhook_secret=webhook_secret,
        public_url=public_url,
        tls=tls,
        announce=lambda text: click.echo(text, err=True),
    )


@forge_cli.group("user")
def user_group() -> None:
    """Forge accounts."""


@user_group.command("add")
@click.argument("name")
@click.option("--root", type=RootOption, required=True)
@click.option("--admin", is_flag=True, help="Site administrator: admin rights on every repository.")
@click.option("--token", help="Use this token instead of a random one.")
def user_add(name: str, root: Path, admin: bool, token: str | None) -> None:
    """Create a user (or add a token to one); prints the token as the last word."""
    try:
        created = add_user(root, name, admin=admin, token=token)
    except CrucibleError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"user {name}{' (site admin)' if admin else ''} token: {created}")


@forge_cli.group("org")
def org_group() -> None:
    """Forge organizations."""


@org_group.command("add")
@click.argument("name")
@click.option("--root", type=RootOption, required=True)
@click.option(
    "--member", "members", multiple=True, help="A user who may create and administer its repositories."
)
def org_add(name: str, root: Path, members: tuple[str, ...]) -> None:
    """Create an organization (members get admin rights on its repositories)."""
    try:
        add_org(root, name, list(members))
    except CrucibleError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"organization {name}")


@forge_cli.group("team")
def team_group() -> None:
    """Teams of forge organizations (for review requests)."""


@team_group.command("add")
@click.argument("org")
@click.argument("slug")
@click.option("--root", type=RootOption, required=True)
@click.option("--name", help="Display name (default: the slug).")
@click.option("--member", "members", multiple=True, help="A user in the team.")
def team_add(org: str, slug: str, root: Path, name: str | None, members: tuple[str, ...]) -> None:
    """Create a team of ORG (reviews can then be requested from ORG/SLUG)."""
    try:
        add_team(root, org, slug, list(members), name=name)
    except CrucibleError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"team {org}/{slug}")


# -- acting through the REST API ---------------------------------------------------------------


def _target(func: Any) -> Any:
    func = click.option(
        "--token", envvar="CRUCIBLE_FORGE_TOKEN", required=True, help="The acting user's token."
    )(func)
    func = click.option("--root", type=RootOption, help="Start the forge in-process on this root instead.")(
        func
    )
    func = click.option("--url", envvar="CRUCIBLE_FORGE_URL", help="Base URL of a running forge.")(func)
    return click.option("--json", "as_json", is_flag=True, help="Print the forge's JSON answer.")(func)


@contextmanager
def _base(url: str | None, root: Path | None) -> Iterator[str]:
    if url:
        yield url.rstrip("/")
    elif root is not None:
        with running_forge(root) as handle:
            yield handle.url
            handle.flush_webhooks()
    else:
        raise click.UsageError("give --url of a running forge or --root")


def _call(base: str, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{base}/api/v3{path}",
        data=data,
        method=method,
        headers={
            "Authorization": f"token {token}",
            "Accept": "application/vnd.github+json",
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        raise click.ClickException(f"{method} {path} answered {exc.code}: {detail}") from exc
    except OSError as exc:
        raise click.ClickException(f"cannot reach the forge at {base}: {exc}") from exc
    return json.loads(raw) if raw else None


def _act(
    url: str | None,
    root: Path | None,
    token: str,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    as_json: bool,
) -> None:
    with _base(url, root) as base:
        answer = _call(base, token, method, path, body)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
    elif isinstance(answer, dict):
        click.echo(answer.get("html_url") or answer.get("url") or "ok")


@forge_cli.command("comment")
@click.argument("repo")
@click.argument("number", type=int)
@click.argument("body")
@click.option("--path", help="Comment on this file of the diff (an inline review comment).")
@click.option("--line", type=int, help="Line of --path (new side unless --side LEFT).")
@click.option("--side", type=click.Choice(["LEFT", "RIGHT"]), default="RIGHT", show_default=True)
@_target
def comment(
    repo: str,
    number: int,
    body: str,
    path: str | None,
    line: int | None,
    side: str,
    url: str | None,
    root: Path | None,
    token: str,
    as_json: bool,
) -> None:
    """Comment on pull request NUMBER of OWNER/REPO (conversation, or inline with --path/--line)."""
    if path is None:
        _act(url, root, token, "POST", f"/repos/{repo}/issues/{number}/comments", {"body": body}, as_json)
        return
    if line is None:
        raise click.UsageError("--path needs --line")
    payload = {"body": body, "path": path, "line": line, "side": side}
    _act(url, root, token, "POST", f"/repos/{repo}/pulls/{number}/comments", payload, as_json)


@forge_cli.command("review")
@click.argument("repo")
@click.argument("number", type=int)
@click.option(
    "--event",
    type=click.Choice(["COMMENT", "APPROVE", "REQUEST_CHANGES"]),
    default="COMMENT",
    show_default=True,
)
@click.option("--body", default="", help="The review's summary text.")
@click.option(
    "--comment", "comments", multiple=True, metavar="PATH:LINE:TEXT", help="An inline comment (repeatable)."
)
@_target
def review(
    repo: str,
    number: int,
    event: str,
    body: str,
    comments: tuple[str, ...],
    url: str | None,
    root: Path | None,
    token: str,
    as_json: bool,
) -> None:
    """Submit a review of pull request NUMBER of OWNER/REPO, with inline comments."""
    inline = []
    for spec in comments:
        path, _, rest = spec.partition(":")
        line, _, text = rest.partition(":")
        if not path or not line.isdigit() or not text:
            raise click.UsageError(f"--comment {spec!r}: expected PATH:LINE:TEXT")
        inline.append({"path": path, "line": int(line), "side": "RIGHT", "body": text})
    payload = {"event": event, "body": body, "comments": inline}
    _act(url, root, token, "POST", f"/repos/{repo}/pulls/{number}/reviews", payload, as_json)


@forge_cli.command("close")
@click.argument("repo")
@click.argument("number", type=int)
@_target
def close(repo: str, number: int, url: str | None, root: Path | None, token: str, as_json: bool) -> None:
    """Close pull request NUMBER of OWNER/REPO."""
    _act(url, root, token, "PATCH", f"/repos/{repo}/pulls/{number}", {"state": "closed"}, as_json)


@forge_cli.command("reopen")
@click.argument("repo")
@click.argument("number", type=int)
@_target
def reopen(repo: str, number: int, url: str | None, root: Path | None, token: str, as_json: bool) -> None:
    """Reopen pull request NUMBER of OWNER/REPO."""
    _act(url, root, token, "PATCH", f"/repos/{repo}/pulls/{number}", {"state": "open"}, as_json)


@forge_cli.command("create-repo")
@click.argument("name")
@click.option("--org", help="Create it in this organization (created on first use).")
@click.option("--private", is_flag=True)
@click.option("--auto-init", is_flag=True, help="Start with a README commit on main.")
@_target
def create_repo(
    name: str,
    org: str | None,
    private: bool,
    auto_init: bool,
    url: str | None,
    root: Path | None,
    token: str,
    as_json: bool,
) -> None:
    """Create a repository through the API (prints its clone URL)."""
    path = f"/orgs/{org}/repos" if org else "/user/repos"
    with _base(url, root) as base:
        answer = _call(base, token, "POST", path, {"name": name, "private": private, "auto_init": auto_init})
    click.echo(json.dumps(answer, indent=2) if as_json else answer["clone_url"])


@forge_cli.command("add-collaborator")
@click.argument("repo")
@click.argument("user")
@click.option(
    "--permission",
    type=click.Choice(["pull", "triage", "push", "maintain", "admin"]),
    default="push",
    show_default=True,
)
@_target
def add_collaborator(
    repo: str, user: str, permission: str, url: str | None, root: Path | None, token: str, as_json: bool
) -> None:
    """Give USER a role on OWNER/REPO (the token must have admin rights)."""
    _act(url, root, token, "PUT", f"/repos/{repo}/collaborators/{user}", {"permission": permission}, as_json)
    if not as_json:
        click.echo(f"{user}: {permission} on {repo}")
