"""The forge's state survives a restart: accounts, repositories, PRs, comments, git data."""

from __future__ import annotations

import sqlite3

from controller.localforge import schema
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


def test_a_version_1_database_is_upgraded_in_place(forge_factory: ForgeStarter) -> None:
    first = forge_factory()
    pull, _ = first.open_pull()
    forge_factory.stop_all()
    with sqlite3.connect(forge_factory.root / "forge.db") as db:  # back to what version 1 wrote
        db.execute("ALTER TABLE pulls DROP COLUMN closed_by")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")

    second = forge_factory()
    with sqlite3.connect(forge_factory.root / "forge.db") as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(schema.SCHEMA_VERSION),)
    second.gh().get_repo("alice/demo").get_pull(pull.number).edit(state="closed")
    closer = second.gh().get_repo("alice/demo").get_issue(pull.number).closed_by
    assert closer is not None and closer.login == "alice"
    forge_factory.stop_all()
    assert forge_factory().gh().get_repo("alice/demo").get_pull(pull.number).state == "closed"  # idempotent
