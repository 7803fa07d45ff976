"""The forge's state survives a restart: accounts, repositories, PRs, comments, git data."""

from __future__ import annotations

from tests.conftest import git
from tests.localforge.conftest import ForgeStarter


def test_state_survives_a_restart(forge_factory: ForgeStarter) -> None:
    first = forge_factory()
    pull, checkout = first.open_pull(draft=True)
    comment = pull.create_issue_comment("before restart")
    first.gh().get_repo("alice/demo").add_to_collaborators("bob", "push")
    head = git(checkout, "rev-parse", "HEAD")
    forge_factory.stop_all()

    second = forge_factory()
    repo = second.gh().get_repo("alice/demo")
    again = repo.get_pull(pull.number)
    assert (again.title, again.draft, again.head.sha) == ("Speed up", True, head)
    assert [c.body for c in again.get_issue_comments()] == ["before restart"]
    assert repo.get_collaborator_permission("bob") == "write"
    newer = again.create_issue_comment("after restart")
    assert newer.id > comment.id
    assert again.html_url.startswith(second.url)
    git(checkout, "remote", "set-url", "origin", f"{second.url}/alice/demo.git")
    after = second.commit(checkout, {"app.py": "changed\n"})
    second.push(checkout, "feature", user="bob")
    assert repo.get_pull(pull.number).head.sha == after
