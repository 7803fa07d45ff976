"""The smaller GitHub behaviours clients meet: collaborator invitations and listing, the hook API,
single commits, conditional requests on ``Last-Modified``, GitHub's 404 for unknown methods,
``/meta`` and the Enterprise version header, read-only ``refs/pull/*``, repository names."""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

from tests.conftest import git
from tests.localforge.conftest import Forge, Receiver


def test_collaborators_invited_updated_and_listed(forge: Forge, api: Any) -> None:
    alice = api()
    assert alice.post("/user/repos", json={"name": "team"}).status_code == 201
    invited = alice.put("/repos/alice/team/collaborators/bob", json={"permission": "push"})
    assert invited.status_code == 201
    invitation = invited.json()
    assert invitation["invitee"]["login"] == "bob" and invitation["inviter"]["login"] == "alice"
    assert invitation["permissions"] == "write" and invitation["repository"]["full_name"] == "alice/team"
    again = alice.put("/repos/alice/team/collaborators/bob", json={"permission": "maintain"})
    assert again.status_code == 204 and again.content == b""
    listed = alice.get("/repos/alice/team/collaborators").json()
    assert [(c["login"], c["role_name"], c["permissions"]["push"]) for c in listed] == [
        ("alice", "admin", True),
        ("bob", "maintain", True),
    ]
    outside = alice.get("/repos/alice/team/collaborators", params={"affiliation": "outside"}).json()
    assert [c["login"] for c in outside] == ["bob"]
    assert api("carol").get("/repos/alice/team/collaborators").status_code == 403


def test_hook_read_edit_config_ping_and_deliveries(forge: Forge, api: Any, receiver: Receiver) -> None:
    alice = api()
    alice.post("/user/repos", json={"name": "hooked", "auto_init": True})
    created = alice.post("/repos/alice/hooked/hooks", json={"config": {"url": receiver.url, "secret": "s"}})
    hook = created.json()
    url = f"/repos/alice/hooked/hooks/{hook['id']}"
    assert hook["events"] == ["push"] and hook["config"]["secret"] == "********"
    assert alice.get(url).json()["id"] == hook["id"]
    assert api("bob").get(url).status_code == 403
    edited = alice.patch(url, json={"add_events": ["pull_request", "push"], "remove_events": ["push"]})
    assert edited.status_code == 200 and edited.json()["events"] == ["pull_request"]
    config = alice.patch(f"{url}/config", json={"url": receiver.url + "?v=2", "content_type": "json"})
    assert config.json() == {
        "url": receiver.url + "?v=2",
        "content_type": "json",
        "insecure_ssl": "0",
        "secret": "********",
    }
    assert alice.get(f"{url}/config").json()["url"].endswith("?v=2")
    assert alice.post(f"{url}/pings").status_code == 204
    assert forge.handle.flush_webhooks()
    assert [r.event for r in receiver.drain()] == ["ping", "ping"]
    deliveries = alice.get(f"{url}/deliveries").json()
    assert [(d["event"], d["status_code"]) for d in deliveries] == [("ping", 204), ("ping", 204)]
    newest = alice.get(f"{url}/deliveries/{deliveries[0]['id']}").json()
    assert newest["request"]["headers"]["X-GitHub-Event"] == "ping"
    assert newest["request"]["payload"]["hook_id"] == hook["id"] and newest["url"].endswith("?v=2")
    assert alice.get(url).json()["last_response"]["code"] == 204
    assert alice.get(f"{url}/deliveries/999999").status_code == 404
    assert alice.delete(url).status_code == 204 and alice.get(url).status_code == 404


def test_single_commit_with_stats_and_files(forge: Forge, api: Any) -> None:
    _, checkout = forge.repo_with_branch()
    sha = git(checkout, "rev-parse", "feature")
    shown = api().get(f"/repos/alice/demo/commits/{sha}").json()
    assert shown["sha"] == sha and shown["commit"]["message"] == "feature work"
    assert shown["stats"] == {"total": 3, "additions": 3, "deletions": 0}
    assert [(f["filename"], f["status"]) for f in shown["files"]] == [("app.py", "added")]
    assert api().get("/repos/alice/demo/commits/main").json()["files"][0]["filename"] == "README.md"
    diff = api().get(f"/repos/alice/demo/commits/{sha}", headers={"Accept": "application/vnd.github.diff"})
    assert diff.text.startswith("diff --git a/app.py b/app.py") and "+two" in diff.text
    patch = api().get("/repos/alice/demo/commits/main", headers={"Accept": "application/vnd.github.v3.patch"})
    assert patch.text.startswith("From ") and "README.md" in patch.text
    missing = api().get("/repos/alice/demo/commits/" + "0" * 40)
    assert missing.status_code == 422 and missing.json()["message"].startswith("No commit found for SHA")


def test_last_modified_unknown_methods_meta_and_enterprise_header(forge: Forge, api: Any) -> None:
    forge.repo_with_branch()
    alice = api()
    created = alice.post("/repos/alice/demo/pulls", json={"title": "t", "head": "feature", "base": "main"})
    first = alice.get("/repos/alice/demo/pulls/1")
    assert first.headers["Last-Modified"] == formatdate(forge.clock.now.timestamp(), usegmt=True)
    assert first.headers["X-GitHub-Enterprise-Version"] == "3.17.0"
    unchanged = alice.get(
        "/repos/alice/demo/pulls/1", headers={"If-Modified-Since": first.headers["Last-Modified"]}
    )
    assert unchanged.status_code == 304
    forge.clock.advance(60)
    alice.patch("/repos/alice/demo/pulls/1", json={"title": "new"})
    changed = alice.get(
        "/repos/alice/demo/pulls/1", headers={"If-Modified-Since": first.headers["Last-Modified"]}
    )
    assert changed.status_code == 200 and changed.json()["title"] == "new"
    assert created.status_code == 201
    wrong = alice.put("/repos/alice/demo/pulls/1/files")
    assert wrong.status_code == 404 and wrong.json()["message"] == "Not Found"
    meta = alice.get("/meta").json()
    assert meta["installed_version"] == "3.17.0" and meta["verifiable_password_authentication"] is False


def test_refs_api_refuses_pull_refs_and_bad_repository_names(forge: Forge, api: Any) -> None:
    _, checkout = forge.repo_with_branch()
    alice = api()
    alice.post("/repos/alice/demo/pulls", json={"title": "t", "head": "feature", "base": "main"})
    alice.put("/repos/alice/demo/collaborators/bob", json={"permission": "push"})
    main = git(checkout, "rev-parse", "main")
    forced = api("bob").patch("/repos/alice/demo/git/refs/pull/1/head", json={"sha": main, "force": True})
    assert forced.status_code == 422
    created = api("bob").post("/repos/alice/demo/git/refs", json={"ref": "refs/pull/9/head", "sha": main})
    assert created.status_code == 422
    assert alice.get("/repos/alice/demo/pulls/1").json()["head"]["sha"] == git(
        checkout, "rev-parse", "feature"
    )
    for name in (".git", "x.git", "-u", "..", "a/b"):
        refused = alice.post("/user/repos", json={"name": name})
        assert refused.status_code == 422, name
        assert refused.json()["errors"][0]["field"] == "name"
    assert alice.post("/user/repos", json={"name": "ok.gitish"}).status_code == 201
