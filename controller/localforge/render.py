"""JSON shapes of the forge's objects, as GitHub's REST API and webhooks print them.

Every URL is built from the base URL of the request being answered (or of the request that
triggered a webhook), so a client that follows ``url`` fields stays on the same host and port.
The shapes validate against GitHub's OpenAPI description (``tests/testdata/github-openapi``).
"""

from __future__ import annotations

import base64
import re
import zlib
from typing import Any
from urllib.parse import quote, urlsplit

from controller.localforge.gitops import CommitInfo, FileChange
from controller.localforge.models import Account, Repo

Json = dict[str, Any]


def node_id(kind: str, ident: int) -> str:
    """A GitHub legacy global node id, e.g. ``MDQ6VXNlcjE=`` for ``04:User1``."""
    return base64.b64encode(f"0{len(kind)}:{kind}{ident}".encode()).decode()


def parse_node_id(value: str, kind: str) -> int | None:
    """The numeric id inside a node id of ``kind``; None when it is not one."""
    try:
        text = base64.b64decode(value.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    match = re.fullmatch(rf"\d+:{kind}(\d+)", text)
    return int(match.group(1)) if match else None


def reactions(url: str) -> Json:
    counts = dict.fromkeys(("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"), 0)
    return {"url": f"{url}/reactions", "total_count": 0, **counts}


class Urls:
    """The forge's two URL roots: the web root (git, html) and the REST root (``/api/v3``)."""

    def __init__(self, base_url: str) -> None:
        self.web = base_url.rstrip("/")
        self.api = f"{self.web}/api/v3"
        self.host = urlsplit(self.web).netloc

    def repo_api(self, repo: Repo) -> str:
        return f"{self.api}/repos/{repo.full_name}"

    def pull_html(self, repo: Repo, number: int) -> str:
        return f"{self.web}/{repo.full_name}/pull/{number}"


def user(urls: Urls, account: Account) -> Json:
    """GitHub's ``simple-user``."""
    api = f"{urls.api}/users/{account.login}"
    return {
        "login": account.login,
        "id": account.id,
        "node_id": node_id(account.type.value, account.id),
        "avatar_url": f"{urls.web}/avatars/{account.login}",
        "gravatar_id": "",
        "url": api,
        "html_url": f"{urls.web}/{account.login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": account.type.value,
        "user_view_type": "public",
        "site_admin": account.site_admin,
    }


def public_user(urls: Urls, account: Account, public_repos: int) -> Json:
    """GitHub's ``public-user`` (``GET /users/{username}``)."""
    extra = dict.fromkeys(
        ("name", "company", "blog", "location", "email", "hireable", "bio", "twitter_username")
    )
    counts = {"public_repos": public_repos, "public_gists": 0, "followers": 0, "following": 0}
    dates = {"created_at": account.created_at, "updated_at": account.created_at}
    return {**user(urls, account), **extra, **counts, **dates, "user_view_type": "public"}


def private_user(urls: Urls, account: Account, public_repos: int, private_repos: int) -> Json:
    """GitHub's ``private-user`` (``GET /user``)."""
    private = {"private_gists": 0, "total_private_repos": private_repos, "owned_private_repos": private_repos}
    plan = {"name": "free", "space": 976562499, "collaborators": 0, "private_repos": 10000}
    return {
        **public_user(urls, account, public_repos),
        **private,
        "disk_usage": 0,
        "collaborators": 0,
        "two_factor_authentication": False,
        "plan": plan,
        "user_view_type": "private",
    }


def organization(urls: Urls, org: Account) -> Json:
    """The ``organization`` object of webhooks and ``GET /orgs/{org}``."""
    api = f"{urls.api}/orgs/{org.login}"
    return {
        "login": org.login,
        "id": org.id,
        "node_id": node_id("Organization", org.id),
        "url": api,
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events",
        "hooks_url": f"{api}/hooks",
        "issues_url": f"{api}/issues",
        "members_url": f"{api}/members{{/member}}",
        "public_members_url": f"{api}/public_members{{/member}}",
        "avatar_url": f"{urls.web}/avatars/{org.login}",
        "description": "",
        "html_url": f"{urls.web}/{org.login}",
        "type": "Organization",
        "created_at": org.created_at,
        "updated_at": org.created_at,
    }


_REPO_TEMPLATES = {
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}


# The merge settings of every repository (the forge never merges, so they are GitHub's defaults).
MERGE_SETTINGS: Json = {
    "allow_merge_commit": True,
    "allow_squash_merge": True,
    "allow_rebase_merge": True,
    "allow_auto_merge": False,
    "allow_update_branch": False,
    "delete_branch_on_merge": False,
    "use_squash_pr_title_as_default": False,
    "squash_merge_commit_title": "COMMIT_OR_PR_TITLE",
    "squash_merge_commit_message": "COMMIT_MESSAGES",
    "merge_commit_title": "MERGE_MESSAGE",
    "merge_commit_message": "PR_TITLE",
}


def organization_full(urls: Urls, org: Account, public_repos: int) -> Json:
    """GitHub's ``organization-full`` (``GET /orgs/{org}``)."""
    counts = {"public_repos": public_repos, "public_gists": 0, "followers": 0, "following": 0}
    return {
        **organization(urls, org),
        **counts,
        "has_organization_projects": False,
        "has_repository_projects": False,
        "is_verified": False,
        "archived_at": None,
    }


def repository(
    urls: Urls,
    repo: Repo,
    owner: Account,
    *,
    open_issues: int,
    permissions: Json | None,
    source: Json | None = None,
) -> Json:
    """GitHub's ``repository`` (also ``full-repository`` with the extra counts, which are harmless)."""
    api = urls.repo_api(repo)
    flags = dict.fromkeys(
        ("fork", "has_projects", "has_wiki", "has_pages", "has_downloads", "archived"), False
    )
    flags.update(
        has_discussions=False, disabled=False, is_template=False, has_issues=True, allow_forking=True
    )
    counts = dict.fromkeys(
        ("forks", "forks_count", "stargazers_count", "watchers", "watchers_count", "size"), 0
    )
    counts.update(
        network_count=0, subscribers_count=0, open_issues=open_issues, open_issues_count=open_issues
    )
    out: Json = {
        "id": repo.id,
        "node_id": node_id("Repository", repo.id),
        "name": repo.name,
        "full_name": repo.full_name,
        "private": repo.private,
        "visibility": "private" if repo.private else "public",
        "owner": user(urls, owner),
        "html_url": f"{urls.web}/{repo.full_name}",
        "description": repo.description,
        "url": api,
        **{key: api + suffix for key, suffix in _REPO_TEMPLATES.items()},
        "git_url": f"git://{urls.host}/{repo.full_name}.git",
        "ssh_url": f"git@{urls.host}:{repo.full_name}.git",
        "clone_url": f"{urls.web}/{repo.full_name}.git",
        "svn_url": f"{urls.web}/{repo.full_name}",
        "mirror_url": None,
        "homepage": None,
        "language": None,
        "license": None,
        "topics": [],
        "default_branch": repo.default_branch,
        "created_at": repo.created_at,
        "updated_at": repo.updated_at,
        "pushed_at": repo.pushed_at or repo.created_at,
        "web_commit_signoff_required": False,
        **MERGE_SETTINGS,
        **flags,
        **counts,
    }
    out["fork"] = repo.parent_id is not None
    if source is not None:  # a fork names where it came from (parent = source: forks are one level deep)
        out.update(parent=source, source=source)
    if permissions is not None:
        out["permissions"] = permissions
    return out


def git_ref(urls: Urls, repo: Repo, name: str, sha: str, kind: str) -> Json:
    """GitHub's ``git-ref``; ``name`` is the full ref (``refs/heads/main``)."""
    api = urls.repo_api(repo)
    folder = "tags" if kind == "tag" else f"{kind}s"
    return {
        "ref": name,
        "node_id": node_id("Ref", zlib.crc32(f"{repo.id}:{name}".encode())),
        "url": f"{api}/git/{quote(name)}",
        "object": {"sha": sha, "type": kind, "url": f"{api}/git/{folder}/{sha}"},
    }


def commit(urls: Urls, repo: Repo, info: CommitInfo) -> Json:
    """GitHub's ``commit`` (authors are not mapped to forge users: ``{}`` as GitHub does for unknowns)."""
    api = urls.repo_api(repo)
    unsigned = {
        "verified": False,
        "reason": "unsigned",
        "signature": None,
        "payload": None,
        "verified_at": None,
    }
    return {
        "sha": info.sha,
        "node_id": node_id("Commit", int(info.sha[:12], 16)),
        "commit": {
            "author": {"name": info.author_name, "email": info.author_email, "date": info.author_date},
            "committer": {
                "name": info.committer_name,
                "email": info.committer_email,
                "date": info.committer_date,
            },
            "message": info.message,
            "tree": {"sha": info.tree, "url": f"{api}/git/trees/{info.tree}"},
            "url": f"{api}/git/commits/{info.sha}",
            "comment_count": 0,
            "verification": unsigned,
        },
        "url": f"{api}/commits/{info.sha}",
        "html_url": f"{urls.web}/{repo.full_name}/commit/{info.sha}",
        "comments_url": f"{api}/commits/{info.sha}/comments",
        "author": {},
        "committer": {},
        "parents": [
            {"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{urls.web}/{repo.full_name}/commit/{p}"}
            for p in info.parents
        ],
    }


def branch_short(urls: Urls, repo: Repo, name: str, sha: str) -> Json:
    """An item of ``GET /branches``."""
    return {
        "name": name,
        "commit": {"sha": sha, "url": f"{urls.repo_api(repo)}/commits/{sha}"},
        "protected": False,
    }


def branch_full(urls: Urls, repo: Repo, name: str, info: CommitInfo) -> Json:
    """GitHub's ``branch-with-protection`` for an unprotected branch."""
    api = f"{urls.repo_api(repo)}/branches/{quote(name)}"
    checks = {"enforcement_level": "off", "contexts": [], "checks": []}
    return {
        "name": name,
        "commit": commit(urls, repo, info),
        "_links": {"self": api, "html": f"{urls.web}/{repo.full_name}/tree/{quote(name)}"},
        "protected": False,
        "protection": {"enabled": False, "required_status_checks": checks},
        "protection_url": f"{api}/protection",
    }


def file_entry(urls: Urls, repo: Repo, change: FileChange, head_sha: str) -> Json:
    """GitHub's ``diff-entry`` (one item of ``GET /pulls/{n}/files``)."""
    path = quote(change.filename)
    out: Json = {
        "sha": change.sha,
        "filename": change.filename,
        "status": change.status,
        "additions": change.additions,
        "deletions": change.deletions,
        "changes": change.additions + change.deletions,
        "blob_url": f"{urls.web}/{repo.full_name}/blob/{head_sha}/{path}",
        "raw_url": f"{urls.web}/{repo.full_name}/raw/{head_sha}/{path}",
        "contents_url": f"{urls.repo_api(repo)}/contents/{path}?ref={head_sha}",
    }
    if change.patch is not None:
        out["patch"] = change.patch
    if change.previous_filename is not None:
        out["previous_filename"] = change.previous_filename
    return out
