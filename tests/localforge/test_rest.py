"""The forge's REST subset, driven through unmodified PyGithub over real HTTP."""

from __future__ import annotations

import json

import pytest
from github import BadCredentialsException, GithubException, UnknownObjectException

from controller.localforge.users import add_org
from tests.conftest import git
from tests.localforge.conftest import Forge


def test_authenticated_user_and_bad_credentials(forge: Forge) -> None:
    me = forge.gh("alice").get_user()
    assert (me.login, me.type) == ("alice", "User")
    assert forge.gh().get_user("bob").login == "bob"
    status, _, body = forge.gh().requester.requestJson("GET", "/")
    assert status == 200 and json.loads(body)["rate_limit_url"].endswith("/api/v3/rate_limit")
    forge.tokens["mallory"] = "not-a-token"
    with pytest.raises(BadCredentialsException) as caught:
        forge.gh("mallory").get_user().login  # noqa: B018
    assert caught.value.status == 401
    assert caught.value.data["message"] == "Bad credentials"


def test_create_repositories_for_user_and_org(forge: Forge) -> None:
    repo = forge.gh().get_user().create_repo("svc", description="d", private=True)
    assert (repo.full_name, repo.private, repo.default_branch) == ("alice/svc", True, "main")
    assert repo.clone_url == f"{forge.url}/alice/svc.git"
    add_org(forge.handle.root, "acme", ["alice"])
    org_repo = forge.gh().get_organization("acme").create_repo("lib", auto_init=True)
    assert org_repo.owner.login == "acme" and org_repo.owner.type == "Organization"
    assert forge.gh().get_organization("acme").login == "acme"
    assert org_repo.get_branch("main").commit.commit.message == "Initial commit"
    with pytest.raises(GithubException) as dup:
        forge.gh().get_user().create_repo("svc")
    assert dup.value.status == 422 and dup.value.data["errors"][0]["field"] == "name"
    with pytest.raises(GithubException) as outsider:
        forge.gh("bob").get_organization("acme").create_repo("other")
    assert outsider.value.status == 403
    with pytest.raises(UnknownObjectException):
        forge.gh("bob").get_repo("alice/svc")  # private: bob cannot even see it


def test_branches_and_git_refs(forge: Forge) -> None:
    repo, checkout = forge.repo_with_branch()
    feature_sha = git(checkout, "rev-parse", "HEAD")
    main_sha = git(checkout, "rev-parse", "origin/main")
    assert {b.name for b in repo.get_branches()} == {"main", "feature"}
    branch = repo.get_branch("feature")
    assert branch.commit.sha == feature_sha and branch.protected is False
    assert repo.get_git_ref("heads/feature").object.sha == feature_sha
    status, _, body = forge.gh().requester.requestJson("GET", f"{repo.url}/git/ref/heads%2Ffeature")
    assert status == 200 and json.loads(body)["ref"] == "refs/heads/feature"
    assert [r.ref for r in repo.get_git_matching_refs("heads/f")] == ["refs/heads/feature"]
    assert [r.ref for r in repo.get_git_refs()] == ["refs/heads/feature", "refs/heads/main"]
    status, _, body = forge.gh().requester.requestJson("GET", f"{repo.url}/git/refs/heads/main")
    assert status == 200 and json.loads(body)["object"]["sha"] == main_sha

    created = repo.create_git_ref("refs/heads/topic", main_sha)
    with pytest.raises(GithubException) as again:
        repo.create_git_ref("refs/heads/topic", main_sha)
    assert again.value.status == 422
    created.edit(feature_sha)  # a fast-forward
    assert repo.get_git_ref("heads/topic").object.sha == feature_sha
    with pytest.raises(GithubException) as non_ff:
        created.edit(main_sha)
    assert non_ff.value.status == 422 and non_ff.value.data["message"] == "Update is not a fast forward"
    created.edit(main_sha, force=True)
    assert repo.get_git_ref("heads/topic").object.sha == main_sha
    created.delete()
    with pytest.raises(UnknownObjectException):
        repo.get_git_ref("heads/topic")
    with pytest.raises(GithubException) as denied:
        forge.gh("bob").get_repo("alice/demo").create_git_ref("refs/heads/bobs", main_sha)
    assert denied.value.status == 403


def test_empty_repository_refs_conflict(forge: Forge) -> None:
    repo = forge.gh().get_user().create_repo("empty")
    with pytest.raises(GithubException) as caught:
        repo.get_git_ref("heads/main")
    assert caught.value.status == 409 and caught.value.data["message"] == "Git Repository is empty."


def test_pull_request_lifecycle_and_git_views(forge: Forge) -> None:
    pull, checkout = forge.open_pull(draft=True)
    head = git(checkout, "rev-parse", "HEAD")
    base = git(checkout, "rev-parse", "origin/main")
    assert (pull.number, pull.draft, pull.state, pull.merged) == (1, True, "open", False)
    assert (pull.head.sha, pull.head.ref, pull.head.label) == (head, "feature", "alice:feature")
    assert (pull.base.sha, pull.base.ref) == (base, "main")
    assert (pull.additions, pull.deletions, pull.changed_files, pull.commits) == (3, 0, 1, 1)
    files = list(pull.get_files())
    assert [(f.filename, f.status, f.additions) for f in files] == [("app.py", "added", 3)]
    assert files[0].patch == "@@ -0,0 +1,3 @@\n+one\n+two\n+three"
    assert [c.sha for c in pull.get_commits()] == [head]
    diff = git(checkout, "diff", f"{base}...{head}")
    status, _, text = forge.gh().requester.requestJson(
        "GET", pull.url, headers={"Accept": "application/vnd.github.diff"}
    )
    assert status == 200 and text.strip() == diff

    pull.edit(title="Faster", body="New body")
    again = forge.gh().get_repo("alice/demo").get_pull(1)
    assert (again.title, again.body) == ("Faster", "New body")
    pull.edit(state="closed")
    closed = forge.gh().get_repo("alice/demo").get_pull(1)
    assert closed.state == "closed" and closed.closed_at is not None and closed.merged is False
    pull.edit(state="open")
    assert forge.gh().get_repo("alice/demo").get_pull(1).closed_at is None


def test_duplicate_pull_request_answers_githubs_422(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    status, _, body = forge.gh().requester.requestJson(
        "POST", f"{pull.base.repo.url}/pulls", input={"title": "again", "head": "feature", "base": "main"}
    )
    answer = json.loads(body)
    assert status == 422
    assert answer["message"] == "Validation Failed"
    assert answer["errors"] == [
        {
            "resource": "PullRequest",
            "code": "custom",
            "message": "A pull request already exists for alice:feature.",
        }
    ]
    assert answer["documentation_url"].startswith("https://docs.github.com/")


def test_pull_request_validation(forge: Forge) -> None:
    repo, _ = forge.repo_with_branch()
    for head, base, field in (("nope", "main", "head"), ("feature", "nope", "base")):
        with pytest.raises(GithubException) as caught:
            repo.create_pull(title="t", body="", head=head, base=base)
        assert caught.value.status == 422 and caught.value.data["errors"][0]["field"] == field
    with pytest.raises(GithubException) as same:
        repo.create_pull(title="t", body="", head="main", base="main")
    assert "No commits between" in same.value.data["errors"][0]["message"]


def test_pull_listing_filters(forge: Forge) -> None:
    repo, checkout = forge.repo_with_branch()
    git(checkout, "checkout", "-q", "-b", "second", "origin/main")
    forge.commit(checkout, {"b.txt": "b\n"})
    forge.push(checkout, "second")
    first = repo.create_pull(title="one", body="", head="feature", base="main")
    forge.clock.advance(60)
    second = repo.create_pull(title="two", body="", head="alice:second", base="main")
    assert [p.number for p in repo.get_pulls()] == [second.number, first.number]
    assert [p.number for p in repo.get_pulls(direction="asc")] == [first.number, second.number]
    assert [p.number for p in repo.get_pulls(head="alice:feature")] == [first.number]
    assert len(list(repo.get_pulls(head="feature"))) == 2  # a bare branch is ignored, as on GitHub
    assert list(repo.get_pulls(head="alice:missing")) == []
    assert list(repo.get_pulls(base="other")) == []
    first.edit(state="closed")
    assert [p.number for p in repo.get_pulls(state="closed")] == [first.number]
    assert len(list(repo.get_pulls(state="all"))) == 2


def test_reviews_with_inline_comments_and_associations(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    as_bob = forge.gh("bob").get_repo("alice/demo").get_pull(pull.number)
    review = as_bob.create_review(
        body="Please rename",
        event="REQUEST_CHANGES",
        comments=[{"path": "app.py", "line": 2, "body": "why two?"}],
    )
    assert review.state == "CHANGES_REQUESTED" and review.user.login == "bob"
    assert [r.id for r in pull.get_reviews()] == [review.id]
    assert pull.get_review(review.id).body == "Please rename"
    (comment,) = list(pull.get_review_comments())
    assert (comment.path, comment.line, comment.position, comment.side) == ("app.py", 2, 2, "RIGHT")
    assert comment.diff_hunk == "@@ -0,0 +1,3 @@\n+one\n+two"
    assert comment.pull_request_review_id == review.id and comment.commit_id == pull.head.sha
    assert comment.raw_data["author_association"] == "NONE"
    forge.gh().get_repo("alice/demo").add_to_collaborators("bob", "push")
    assert pull.get_review_comment(comment.id).raw_data["author_association"] == "COLLABORATOR"

    approve = as_bob.create_review(event="APPROVE")
    assert approve.state == "APPROVED"
    with pytest.raises(GithubException) as own:
        pull.create_review(event="APPROVE")
    assert own.value.status == 422
    with pytest.raises(GithubException) as outside:
        as_bob.create_review_comment("x", pull.head.sha, "app.py", line=40)
    assert outside.value.status == 422


def test_review_comments_replies_edits_and_repo_wide_listing(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    commit = pull.head.sha
    as_bob = forge.gh("bob").get_repo("alice/demo").get_pull(pull.number)
    first = as_bob.create_review_comment("line one", commit, "app.py", line=1, side="RIGHT")
    forge.clock.advance(10)
    reply = pull.create_review_comment_reply(first.id, "done")
    assert reply.in_reply_to_id == first.id and reply.path == "app.py" and reply.line == 1
    assert reply.raw_data["author_association"] == "OWNER"
    forge.clock.advance(10)
    first.edit("line one, edited")
    repo = forge.gh().get_repo("alice/demo")
    assert [c.id for c in repo.get_pulls_review_comments()] == [first.id, reply.id]
    by_update = repo.get_pulls_review_comments(sort="updated", direction="desc")
    assert [c.id for c in by_update] == [first.id, reply.id]
    since = forge.clock.now
    assert [c.id for c in repo.get_pulls_review_comments(since=since)] == [first.id]
    assert repo.get_pull(pull.number).review_comments == 2
    reply.delete()
    assert [c.id for c in pull.get_review_comments()] == [first.id]


def test_issue_comments_crud_and_issue_view(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    mine = pull.create_issue_comment("first")
    forge.clock.advance(5)
    theirs = forge.gh("bob").get_repo("alice/demo").get_pull(pull.number).create_issue_comment("second")
    assert mine.raw_data["author_association"] == "OWNER" and theirs.user.login == "bob"
    assert [c.body for c in pull.get_issue_comments()] == ["first", "second"]
    forge.clock.advance(5)
    mine.edit("first, edited")
    repo = forge.gh().get_repo("alice/demo")
    assert [c.id for c in repo.get_issues_comments(sort="updated", direction="desc")] == [mine.id, theirs.id]
    assert [c.id for c in repo.get_issues_comments(since=forge.clock.now)] == [mine.id]
    assert repo.get_pull(pull.number).get_issue_comment(mine.id).body == "first, edited"
    with pytest.raises(GithubException) as foreign:
        forge.gh("bob").get_repo("alice/demo").get_pull(1).get_issue_comment(mine.id).edit("hijack")
    assert foreign.value.status == 403
    theirs_as_owner = repo.get_pull(1).get_issue_comment(theirs.id)
    theirs_as_owner.delete()  # write access may delete others' comments
    assert [c.id for c in pull.get_issue_comments()] == [mine.id]
    issue = repo.get_issue(pull.number)
    assert issue.pull_request is not None and issue.pull_request.html_url == pull.html_url
    assert issue.comments == 1


def test_collaborator_permission_api(forge: Forge) -> None:
    repo = forge.gh().get_user().create_repo("perm")
    assert repo.get_collaborator_permission("alice") == "admin"
    assert repo.get_collaborator_permission("bob") == "read"  # public repository
    for role, permission in (
        ("push", "write"),
        ("maintain", "write"),
        ("triage", "read"),
        ("admin", "admin"),
    ):
        repo.add_to_collaborators("bob", role)
        assert repo.get_collaborator_permission("bob") == permission
        assert repo.get_collaborator_role_name("bob") == {"push": "write"}.get(role, role)
    assert repo.has_in_collaborators("bob") and not repo.has_in_collaborators("carol")
    private = forge.gh().get_user().create_repo("secret", private=True)
    assert private.get_collaborator_permission("carol") == "none"
    with pytest.raises(GithubException) as not_admin:
        forge.gh("carol").get_repo("alice/perm").add_to_collaborators("carol", "admin")
    assert not_admin.value.status == 403
    with pytest.raises(GithubException) as unknown:
        repo.get_collaborator_permission("nobody")
    assert unknown.value.status == 404


def test_graphql_draft_mutations(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    assert pull.draft is False
    pull.convert_to_draft()
    assert forge.gh().get_repo("alice/demo").get_pull(pull.number).draft is True
    pull.mark_ready_for_review()
    assert forge.gh().get_repo("alice/demo").get_pull(pull.number).draft is False
    with pytest.raises(GithubException) as denied:
        forge.gh("carol").get_repo("alice/demo").get_pull(pull.number).convert_to_draft()
    assert denied.value.status == 400  # GraphQL errors come back as data.errors
    status, _, body = forge.gh().requester.requestJson(
        "POST", f"{forge.url}/api/graphql", input={"query": "mutation { x }", "variables": {}}
    )
    assert status == 200 and json.loads(body)["errors"][0]["extensions"]["code"] == "undefinedField"


def test_html_and_diff_urls_lead_somewhere(forge: Forge) -> None:
    pull, checkout = forge.open_pull()
    pull.create_issue_comment("<b>escaped</b>")
    status, _, page = forge.gh().requester.requestJson("GET", pull.html_url)
    assert status == 200 and "Speed up" in page and "&lt;b&gt;escaped&lt;/b&gt;" in page
    status, _, diff = forge.gh().requester.requestJson("GET", pull.diff_url)
    assert status == 200 and diff.strip() == git(checkout, "diff", f"{pull.base.sha}...{pull.head.sha}")
    status, _, listing = forge.gh().requester.requestJson("GET", pull.base.repo.html_url)
    assert status == 200 and pull.html_url in listing
