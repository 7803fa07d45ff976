"""JSON shapes of pull requests and their conversation: reviews, review comments, issue comments,
and the issue view of a pull request, as GitHub's REST API and webhooks print them."""

from __future__ import annotations

from controller.localforge.models import Account, IssueComment, Pull, Repo, Review, ReviewComment
from controller.localforge.render import Json, Urls, node_id, reactions, user


def pull_links(urls: Urls, repo: Repo, pull: Pull) -> Json:
    api = f"{urls.repo_api(repo)}/pulls/{pull.number}"
    issue = f"{urls.repo_api(repo)}/issues/{pull.number}"
    return {
        "url": api,
        "html_url": urls.pull_html(repo, pull.number),
        "diff_url": f"{urls.pull_html(repo, pull.number)}.diff",
        "patch_url": f"{urls.pull_html(repo, pull.number)}.patch",
        "issue_url": issue,
        "commits_url": f"{api}/commits",
        "review_comments_url": f"{api}/comments",
        "review_comment_url": f"{urls.repo_api(repo)}/pulls/comments{{/number}}",
        "comments_url": f"{issue}/comments",
        "statuses_url": f"{urls.repo_api(repo)}/statuses/{pull.head_sha}",
    }


def pull_request(urls: Urls, pull: Pull, parts: Json, association: str, stats: Json | None) -> Json:
    """GitHub's ``pull-request`` (``stats`` given) or ``pull-request-simple`` (``stats`` None).

    ``parts`` carries the already-rendered ``user``, ``head`` and ``base`` objects, the repo, and
    ``triage`` (labels, assignees, requested reviewers: ``triage_view.pull_fields``).
    """
    repo: Repo = parts["repo"]
    links = pull_links(urls, repo, pull)
    out: Json = {
        "url": links["url"],
        "id": pull.id,
        "node_id": node_id("PullRequest", pull.id),
        **{k: v for k, v in links.items() if k != "url"},
        "number": pull.number,
        "state": pull.state,
        "locked": False,
        "active_lock_reason": None,
        "title": pull.title,
        "user": parts["user"],
        "body": pull.body,
        "labels": parts["triage"]["labels"],
        "milestone": None,
        "assignee": parts["triage"]["assignee"],
        "assignees": parts["triage"]["assignees"],
        "requested_reviewers": parts["triage"]["requested_reviewers"],
        "requested_teams": parts["triage"]["requested_teams"],
        "created_at": pull.created_at,
        "updated_at": pull.updated_at,
        "closed_at": pull.closed_at,
        "merged_at": None,
        "merge_commit_sha": None,
        "draft": pull.draft,
        "head": parts["head"],
        "base": parts["base"],
        "_links": {
            "self": {"href": links["url"]},
            "html": {"href": links["html_url"]},
            "issue": {"href": links["issue_url"]},
            "comments": {"href": links["comments_url"]},
            "review_comments": {"href": links["review_comments_url"]},
            "review_comment": {"href": links["review_comment_url"]},
            "commits": {"href": links["commits_url"]},
            "statuses": {"href": links["statuses_url"]},
        },
        "author_association": association,
        "auto_merge": None,
    }
    if stats is not None:
        mergeable = stats.get("mergeable")
        clean = {True: "clean", False: "dirty", None: "unknown"}[mergeable]
        state = "draft" if pull.draft and mergeable is not False else clean
        out.update(merged=False, rebaseable=mergeable, mergeable_state=state, merged_by=None)
        out.update(maintainer_can_modify=False, **stats)
    return out


def pr_side(urls: Urls, repo: Repo, owner: Account, ref: str, sha: str, repo_json: Json) -> Json:
    """The ``head`` or ``base`` member of a pull request."""
    return {
        "label": f"{owner.login}:{ref}",
        "ref": ref,
        "sha": sha,
        "user": user(urls, owner),
        "repo": repo_json,
    }


def review(urls: Urls, repo: Repo, pull: Pull, item: Review, author: Account, association: str) -> Json:
    """GitHub's ``pull-request-review``."""
    html = urls.pull_html(repo, pull.number)
    pull_url = f"{urls.repo_api(repo)}/pulls/{pull.number}"
    out: Json = {
        "id": item.id,
        "node_id": node_id("PullRequestReview", item.id),
        "user": user(urls, author),
        "body": item.body,
        "state": item.state.value,
        "html_url": f"{html}#pullrequestreview-{item.id}",
        "pull_request_url": pull_url,
        "author_association": association,
        "_links": {
            "html": {"href": f"{html}#pullrequestreview-{item.id}"},
            "pull_request": {"href": pull_url},
        },
        "commit_id": item.commit_id,
    }
    if item.submitted_at is not None:
        out["submitted_at"] = item.submitted_at
    return out


def review_comment(
    urls: Urls, repo: Repo, pull: Pull, item: ReviewComment, author: Account, association: str
) -> Json:
    """GitHub's ``pull-request-review-comment``."""
    url = f"{urls.repo_api(repo)}/pulls/comments/{item.id}"
    html = f"{urls.pull_html(repo, pull.number)}#discussion_r{item.id}"
    pull_url = f"{urls.repo_api(repo)}/pulls/{pull.number}"
    out: Json = {
        "url": url,
        "pull_request_review_id": item.review_id,
        "id": item.id,
        "node_id": node_id("PullRequestReviewComment", item.id),
        "diff_hunk": item.diff_hunk,
        "path": item.path,
        "commit_id": item.commit_id,
        "original_commit_id": item.commit_id,
        "user": user(urls, author),
        "body": item.body,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": association,
        "_links": {"self": {"href": url}, "html": {"href": html}, "pull_request": {"href": pull_url}},
        "reactions": reactions(url),
        "start_line": item.start_line,
        "original_start_line": item.start_line,
        "start_side": item.start_side,
        "side": item.side,
        "subject_type": item.subject_type,
    }
    for key, value in (("position", item.position), ("line", item.line)):
        if value is not None:
            out[key] = value
            out[f"original_{key}"] = value
    if item.in_reply_to is not None:
        out["in_reply_to_id"] = item.in_reply_to
    return out


def issue_comment(urls: Urls, repo: Repo, item: IssueComment, author: Account, association: str) -> Json:
    """GitHub's ``issue-comment``."""
    url = f"{urls.repo_api(repo)}/issues/comments/{item.id}"
    return {
        "url": url,
        "html_url": f"{urls.pull_html(repo, item.number)}#issuecomment-{item.id}",
        "issue_url": f"{urls.repo_api(repo)}/issues/{item.number}",
        "id": item.id,
        "node_id": node_id("IssueComment", item.id),
        "user": user(urls, author),
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "author_association": association,
        "body": item.body,
        "reactions": reactions(url),
        "performed_via_github_app": None,
    }


def issue(
    urls: Urls,
    repo: Repo,
    pull: Pull,
    author: Account,
    association: str,
    comments: int,
    *,
    closed_by: Json | None,
    triage: Json,
) -> Json:
    """GitHub's ``issue`` for a pull request (it carries ``pull_request``, as on GitHub);
    ``triage`` has its ``labels``, ``assignee`` and ``assignees`` (``triage_view.issue_fields``).

    ``state_reason`` is null: GitHub sets it on issues closed as completed/not planned, never on
    pull requests.
    """
    links = pull_links(urls, repo, pull)
    url = links["issue_url"]
    return {
        "url": url,
        "repository_url": urls.repo_api(repo),
        "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments",
        "events_url": f"{url}/events",
        "html_url": links["html_url"],
        "timeline_url": f"{url}/timeline",
        "id": pull.id,
        "node_id": node_id("PullRequest", pull.id),
        "number": pull.number,
        "title": pull.title,
        "user": user(urls, author),
        "labels": triage["labels"],
        "state": pull.state,
        "locked": False,
        "active_lock_reason": None,
        "assignee": triage["assignee"],
        "assignees": triage["assignees"],
        "milestone": None,
        "comments": comments,
        "created_at": pull.created_at,
        "updated_at": pull.updated_at,
        "closed_at": pull.closed_at,
        "closed_by": closed_by,
        "state_reason": None,
        "author_association": association,
        "draft": pull.draft,
        "body": pull.body,
        "reactions": reactions(url),
        "performed_via_github_app": None,
        "pull_request": {
            "url": links["url"],
            "html_url": links["html_url"],
            "diff_url": links["diff_url"],
            "patch_url": links["patch_url"],
            "merged_at": None,
        },
    }
