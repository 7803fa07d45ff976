"""JSON shapes of what is reported on commits: commit statuses, the combined status and check
runs, as GitHub's REST API and its ``status``/``check_run`` webhooks print them."""

from __future__ import annotations

import json

from controller.localforge.models import Account, CheckRun, CommitStatus, Pull, Repo
from controller.localforge.render import Json, Urls, node_id, user


def status(urls: Urls, repo: Repo, item: CommitStatus, creator: Account | None) -> Json:
    """GitHub's ``status`` (``simple-commit-status`` is the same without ``creator``)."""
    return {
        "url": f"{urls.repo_api(repo)}/statuses/{item.sha}",
        "avatar_url": f"{urls.web}/avatars/{creator.login}" if creator else None,
        "id": item.id,
        "node_id": node_id("StatusContext", item.id),
        "state": item.state.value,
        "description": item.description,
        "target_url": item.target_url,
        "context": item.context,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "creator": user(urls, creator) if creator else None,
    }


def combined_state(statuses: list[CommitStatus]) -> str:
    """GitHub's rule: ``failure`` if any context errs or fails, ``pending`` if none reported or
    any is pending, else ``success``."""
    states = {s.state.value for s in statuses}
    if states & {"error", "failure"}:
        return "failure"
    if not states or "pending" in states:
        return "pending"
    return "success"


def combined(urls: Urls, repo: Repo, sha: str, latest: list[Json], repository: Json, state: str) -> Json:
    """GitHub's ``combined-commit-status`` over the latest status of each context."""
    api = urls.repo_api(repo)
    return {
        "state": state,
        "statuses": latest,
        "sha": sha,
        "total_count": len(latest),
        "repository": repository,
        "commit_url": f"{api}/commits/{sha}",
        "url": f"{api}/commits/{sha}/status",
    }


def pull_minimal(urls: Urls, repo: Repo, head_repo: Repo, pull: Pull) -> Json:
    """GitHub's ``pull-request-minimal`` (the ``pull_requests`` of a check run)."""

    def side(ref: str, sha: str, where: Repo) -> Json:
        return {
            "ref": ref,
            "sha": sha,
            "repo": {"id": where.id, "url": urls.repo_api(where), "name": where.name},
        }

    return {
        "id": pull.id,
        "number": pull.number,
        "url": f"{urls.repo_api(repo)}/pulls/{pull.number}",
        "head": side(pull.head_ref, pull.head_sha, head_repo),
        "base": side(pull.base_ref, pull.base_sha, repo),
    }


def check_run(urls: Urls, repo: Repo, item: CheckRun, app: Json, pulls: list[Json]) -> Json:
    """GitHub's ``check-run``; ``output`` keeps what the app sent (title, summary, text)."""
    url = f"{urls.repo_api(repo)}/check-runs/{item.id}"
    output = json.loads(item.output)
    return {
        "id": item.id,
        "head_sha": item.head_sha,
        "node_id": node_id("CheckRun", item.id),
        "external_id": item.external_id or "",
        "url": url,
        "html_url": f"{urls.web}/{repo.full_name}/runs/{item.id}",
        # GitHub: "if the integrator does not provide this, the homepage of the GitHub App is used"
        "details_url": item.details_url or app.get("html_url"),
        "status": item.status.value,
        "conclusion": item.conclusion.value if item.conclusion else None,
        "started_at": item.started_at,
        "completed_at": item.completed_at,
        "output": {
            "title": output.get("title"),
            "summary": output.get("summary"),
            "text": output.get("text"),
            "annotations_count": int(output.get("annotations_count", 0)),
            "annotations_url": f"{url}/annotations",
        },
        "name": item.name,
        "check_suite": {"id": item.suite_id},
        "app": app,
        "pull_requests": pulls,
    }
