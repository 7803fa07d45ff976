"""The ``gh`` CLI (Debian's package) through a reviewer's and an author's commands against the forge
served with ``--tls``: ``pr list``, ``view``, ``checks``, ``diff``, ``checkout``, ``comment``,
``review``, ``ready``, ``create``, ``edit``, ``close`` and ``reopen``, driven as a user on GitHub
Enterprise drives it (``GH_HOST``, ``GH_ENTERPRISE_TOKEN``, the forge's certificate trusted
through ``SSL_CERT_FILE``). Every answer it gets is checked against what the forge then holds,
through PyGithub."""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from controller.localforge.tls import ensure_certificate
from tests.conftest import git
from tests.localforge.conftest import BOT, Forge, ForgeStarter, Receiver
from tests.support.waiting import SHUTDOWN_POLL_S

GH = shutil.which("gh")
pytestmark = pytest.mark.skipif(
    GH is None and not os.environ.get("CI"), reason="the gh CLI is not installed (apt-get install gh)"
)


class GhCli:
    """Runs ``gh`` as one forge user, with a config directory of its own (never the user's)."""

    def __init__(self, forge: Forge, user: str, config: Path) -> None:
        assert forge.handle.ca_file is not None
        self.home = config.parent  # gh runs git where it is started: not in this clone
        self.forge, self.env = (
            forge,
            {
                "PATH": os.environ["PATH"],
                "HOME": os.environ.get("HOME", str(config)),
                "GH_CONFIG_DIR": str(config),
                "GH_HOST": forge.url.removeprefix("https://"),
                "GH_ENTERPRISE_TOKEN": forge.tokens[user],
                "SSL_CERT_FILE": str(forge.handle.ca_file),
                "GIT_SSL_CAINFO": str(forge.handle.ca_file),
                "GH_PROMPT_DISABLED": "1",
                "GH_NO_UPDATE_NOTIFIER": "1",
                "NO_COLOR": "1",
                "GIT_TERMINAL_PROMPT": "0",
            },
        )

    def __call__(self, *args: str, cwd: Path | None = None, check: bool = True) -> str:
        assert GH is not None
        done = subprocess.run(
            [GH, *args],
            env=self.env,
            cwd=cwd or self.home,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"gh {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done.stdout


@pytest.fixture
def tls_forge(forge_factory: ForgeStarter) -> Forge:
    return forge_factory(tls=True)


def _pull_with_triage_and_checks(forge: Forge) -> tuple[Any, Any]:
    pull, _ = forge.open_pull(draft=True)
    repo = forge.gh().get_repo("alice/demo")
    repo.add_to_collaborators("bob", "push")
    repo.add_to_collaborators("carol", "push")
    repo.add_to_collaborators(BOT, "push")
    pull.add_to_labels("performance")
    pull.add_to_assignees("alice")
    pull.create_review_request(reviewers=["carol"])
    head = repo.get_commit(pull.head.sha)
    head.create_status("success", "https://ci.example/1", "p50_ms 41.1 → 10.9", "crucible/p50_ms")
    as_app = forge.gh(BOT).get_repo("alice/demo")
    as_app.create_check_run("tests", pull.head.sha, status="completed", conclusion="success")
    pull.create_issue_comment("first measurement attached")
    return repo, pull


def test_gh_reads_a_pull_request_like_github(tls_forge: Forge, tmp_path: Path) -> None:
    forge = tls_forge
    _, pull = _pull_with_triage_and_checks(forge)
    gh = GhCli(forge, "bob", tmp_path / "gh")

    listed = json.loads(gh("pr", "list", "-R", "alice/demo", "--json", "number,title,isDraft,headRefName"))
    assert listed == [{"number": pull.number, "title": "Speed up", "isDraft": True, "headRefName": "feature"}]
    assert gh("pr", "list", "-R", "alice/demo", "--state", "closed", "--json", "number") == "[]\n"

    fields = (
        "number,state,isDraft,mergeable,labels,assignees,reviewRequests,statusCheckRollup,comments,author"
    )
    shown = json.loads(gh("pr", "view", str(pull.number), "-R", "alice/demo", "--json", fields))
    assert (shown["state"], shown["isDraft"], shown["mergeable"]) == ("OPEN", True, "MERGEABLE")
    assert [label["name"] for label in shown["labels"]] == ["performance"]
    assert [a["login"] for a in shown["assignees"]] == ["alice"]
    assert [r["login"] for r in shown["reviewRequests"]] == ["carol"]
    assert shown["author"]["login"] == "alice"
    assert [c["body"] for c in shown["comments"]] == ["first measurement attached"]
    rollup = {c.get("context") or c.get("name"): c for c in shown["statusCheckRollup"]}
    assert rollup["crucible/p50_ms"]["state"] == "SUCCESS"
    assert rollup["crucible/p50_ms"]["targetUrl"] == "https://ci.example/1"
    assert (rollup["tests"]["status"], rollup["tests"]["conclusion"]) == ("COMPLETED", "SUCCESS")

    text = gh("pr", "view", str(pull.number), "-R", "alice/demo")
    assert "title:\tSpeed up" in text and "labels:\tperformance" in text and "additions:\t3" in text

    checks = gh("pr", "checks", str(pull.number), "-R", "alice/demo")
    rows = sorted(line.split("\t")[:2] for line in checks.splitlines())
    assert rows == [["crucible/p50_ms", "pass"], ["tests", "pass"]]

    diff = gh("pr", "diff", str(pull.number), "-R", "alice/demo", "--color", "never")
    assert diff.startswith("diff --git a/app.py b/app.py") and "+one" in diff


def test_gh_reviews_comments_checks_out_and_marks_ready(tls_forge: Forge, tmp_path: Path) -> None:
    forge = tls_forge
    repo, pull = _pull_with_triage_and_checks(forge)
    gh = GhCli(forge, "bob", tmp_path / "gh")
    number = str(pull.number)

    url = gh("pr", "comment", number, "-R", "alice/demo", "-b", "Could the cache be smaller?").strip()
    comments = list(repo.get_issue(pull.number).get_comments())
    assert comments[-1].body == "Could the cache be smaller?" and comments[-1].user.login == "bob"
    assert url.endswith(f"#issuecomment-{comments[-1].id}")

    gh("pr", "review", number, "-R", "alice/demo", "--request-changes", "-b", "p95 regressed")
    gh("pr", "review", number, "-R", "alice/demo", "--comment", "-b", "see the chart")
    as_carol = GhCli(forge, "carol", tmp_path / "gh-carol")
    as_carol("pr", "review", number, "-R", "alice/demo", "--approve")
    reviews = [(r.user.login, r.state, r.body) for r in repo.get_pull(pull.number).get_reviews()]
    assert reviews == [
        ("bob", "CHANGES_REQUESTED", "p95 regressed"),
        ("bob", "COMMENTED", "see the chart"),
        ("carol", "APPROVED", ""),
    ]
    assert [u.login for u in repo.get_pull(pull.number).requested_reviewers] == []  # carol answered
    own = GhCli(forge, "alice", tmp_path / "gh-alice")
    refused = subprocess.run(
        [GH or "gh", "pr", "review", number, "-R", "alice/demo", "--approve"],
        env=own.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0 and "Can not approve your own pull request" in refused.stderr

    gh("pr", "ready", number, "-R", "alice/demo")
    assert repo.get_pull(pull.number).draft is False
    shown = json.loads(gh("pr", "view", number, "-R", "alice/demo", "--json", "isDraft,reviews"))
    assert shown["isDraft"] is False
    assert [(r["author"]["login"], r["state"]) for r in shown["reviews"]][-1] == ("carol", "APPROVED")


def _failing(gh: GhCli, *args: str) -> str:
    """``gh``'s error output for a command that must fail."""
    assert GH is not None
    done = subprocess.run(
        [GH, *args], env=gh.env, cwd=gh.home, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0, done.stdout
    return done.stderr


def test_gh_creates_a_pull_request_with_its_labels_reviewers_and_assignees(
    forge_factory: ForgeStarter, receiver: Receiver, tmp_path: Path
) -> None:
    forge = forge_factory(tls=True, webhook_url=receiver.url, webhook_secret="s")
    repo, _ = forge.repo_with_branch()
    repo.add_to_collaborators("bob", "push")
    repo.create_label("performance", "0e8a16")
    assert forge.handle.flush_webhooks()
    receiver.drain()
    gh = GhCli(forge, "alice", tmp_path / "gh")

    url = gh(
        "pr", "create", "-R", "alice/demo", "--head", "feature", "--base", "main", "--draft",
        "--title", "perf: cache the parse", "--body", "p50 41.1 → 10.9",
        "--label", "performance", "--reviewer", "bob", "--assignee", "@me",
    ).strip()  # fmt: skip
    pull = repo.get_pulls(state="open")[0]
    assert url == pull.html_url
    assert (pull.title, pull.body, pull.draft, pull.head.ref, pull.base.ref) == (
        "perf: cache the parse",
        "p50 41.1 → 10.9",
        True,
        "feature",
        "main",
    )
    assert [label.name for label in pull.labels] == ["performance"]
    assert [u.login for u in pull.requested_reviewers] == ["bob"]
    assert [u.login for u in pull.assignees] == ["alice"]
    rest = json.loads(gh("api", f"repos/alice/demo/pulls/{pull.number}"))  # gh's REST over the same TLS
    assert forge.handle.flush_webhooks()  # GraphQL's mutations fire the webhooks REST's routes fire
    fired = [(d.payload["action"], d.payload) for d in receiver.drain() if d.event == "pull_request"]
    assert [action for action, _ in fired] == ["opened", "assigned", "labeled", "review_requested"]
    assert (fired[0][1]["pull_request"]["draft"], fired[1][1]["assignee"]["login"]) == (True, "alice")
    assert (fired[2][1]["label"]["name"], fired[3][1]["requested_reviewer"]["login"]) == (
        "performance",
        "bob",
    )
    assert (rest["number"], rest["draft"], rest["mergeable"]) == (pull.number, True, True)

    again = _failing(gh, "pr", "create", "-R", "alice/demo", "--head", "feature", "-t", "x", "-b", "y")
    assert 'a pull request for branch "feature" into branch "main" already exists' in again
    assert again.strip().endswith(pull.html_url)
    nothing = _failing(gh, "pr", "create", "-R", "alice/demo", "--head", "main", "-t", "x", "-b", "y")
    assert "No commits between main and main" in nothing
    assert repo.get_pulls(state="all").totalCount == 1


def test_gh_edits_closes_and_reopens_a_pull_request(tls_forge: Forge, tmp_path: Path) -> None:
    forge = tls_forge
    repo, pull = _pull_with_triage_and_checks(forge)  # performance, alice assigned, carol requested
    repo.create_label("bot", "ededed")
    repo.create_git_ref("refs/heads/release", repo.get_branch("main").commit.sha)
    gh = GhCli(forge, "alice", tmp_path / "gh")
    number = str(pull.number)

    gh(
        "pr", "edit", number, "-R", "alice/demo", "--title", "perf: smaller cache", "--body", "edited",
        "--add-label", "bot", "--remove-label", "performance", "--add-assignee", "bob",
        "--remove-assignee", "alice", "--add-reviewer", "bob", "--remove-reviewer", "carol",
        "--base", "release",
    )  # fmt: skip
    fresh = repo.get_pull(pull.number)
    assert (fresh.title, fresh.body, fresh.base.ref) == ("perf: smaller cache", "edited", "release")
    assert [label.name for label in fresh.labels] == ["bot"]
    assert [u.login for u in fresh.assignees] == ["bob"]
    assert [u.login for u in fresh.requested_reviewers] == ["bob"]

    missing = _failing(gh, "pr", "edit", number, "-R", "alice/demo", "--add-label", "no-such-label")
    assert "'no-such-label' not found" in missing
    as_bob = GhCli(forge, "bob", tmp_path / "gh-bob")
    author = _failing(as_bob, "pr", "edit", number, "-R", "alice/demo", "--add-reviewer", "alice")
    assert "Review cannot be requested from pull request author." in author
    assert [u.login for u in repo.get_pull(pull.number).requested_reviewers] == ["bob"]

    gh("pr", "close", number, "-R", "alice/demo")
    assert repo.get_pull(pull.number).state == "closed"
    gh("pr", "reopen", number, "-R", "alice/demo")
    assert repo.get_pull(pull.number).state == "open"


def test_gh_requests_and_drops_a_team_of_the_owning_organization(tls_forge: Forge, tmp_path: Path) -> None:
    forge = tls_forge
    repo = forge.team_repo_with_feature()
    gh = GhCli(forge, "alice", tmp_path / "gh")

    gh("pr", "create", "-R", "acme/lib", "--head", "feature", "-t", "t", "-b", "b", "-r", "acme/perf-team")
    pull = repo.get_pulls(state="open")[0]
    assert [t.slug for t in pull.requested_teams] == ["perf-team"]
    gh("pr", "edit", str(pull.number), "-R", "acme/lib", "--remove-reviewer", "acme/perf-team")
    assert list(repo.get_pull(pull.number).requested_teams) == []


@contextmanager
def _tunnel(target_port: int) -> Iterator[str]:
    """An HTTP CONNECT proxy that sends every tunnel to the forge's port on 127.0.0.1.

    gh matches a checkout's git remotes against ``GH_HOST`` by host name without the port, so with
    the forge on a high port ``gh pr checkout`` finds no matching remote. Through this proxy the
    forge is ``https://forge.test`` (port 443) for gh and git alike, as a GitHub Enterprise host is.
    """

    class Handler(socketserver.StreamRequestHandler):
        rbufsize = 0  # unbuffered: nothing of the tunnelled bytes may stay behind in a buffer

        def handle(self) -> None:
            request = self.rfile.readline()
            while self.rfile.readline() not in {b"\r\n", b"\n", b""}:
                pass
            if not request.startswith(b"CONNECT "):
                self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                return
            with socket.create_connection(("127.0.0.1", target_port)) as upstream:
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                pump = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
                pump.start()
                _pipe(self.connection, upstream)
                pump.join(timeout=10)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _pipe(source: socket.socket, dest: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            dest.sendall(chunk)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            dest.shutdown(socket.SHUT_WR)


def test_gh_checks_out_a_pull_request_into_a_clone(forge_factory: ForgeStarter, tmp_path: Path) -> None:
    ensure_certificate(forge_factory.root, "forge.test")  # the forge's certificate names forge.test too
    forge = forge_factory(tls=True)
    pull, _ = forge.open_pull()
    forge.gh().get_repo("alice/demo").add_to_collaborators("bob", "push")
    port = int(forge.url.rsplit(":", 1)[1])
    with _tunnel(port) as proxy:
        gh = GhCli(forge, "bob", tmp_path / "gh")
        gh.env.update(GH_HOST="forge.test", HTTPS_PROXY=proxy, https_proxy=proxy, NO_PROXY="", no_proxy="")
        checkout = tmp_path / "bob-copy"
        git(
            tmp_path,
            "-c",
            f"http.sslCAInfo={forge.handle.ca_file}",
            "-c",
            f"http.proxy={proxy}",
            "clone",
            "-q",
            "https://forge.test/alice/demo.git",
            str(checkout),
        )
        gh("pr", "checkout", str(pull.number), cwd=checkout)
        assert git(checkout, "rev-parse", "HEAD") == pull.head.sha
        assert git(checkout, "rev-parse", "--abbrev-ref", "HEAD") == "feature"
        listed = json.loads(
            gh("pr", "list", "--json", "number", cwd=checkout)
        )  # the repository from the clone
        assert listed == [{"number": pull.number}]
