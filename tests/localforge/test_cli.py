"""``crucible forge``: user management, serving, and the reviewer actions."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from controller.localforge.cli import forge_cli
from tests.localforge.conftest import Forge, ForgeStarter
from tests.support import wait_until


def test_user_add_prints_the_token_last(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(forge_cli, ["user", "add", "dana", "--root", str(tmp_path)])
    assert result.exit_code == 0
    assert result.output.split()[-1].startswith("ghp_")
    fixed = runner.invoke(
        forge_cli, ["user", "add", "erin", "--root", str(tmp_path), "--admin", "--token", "T0K"]
    )
    assert fixed.exit_code == 0 and fixed.output.split()[-1] == "T0K"
    bad = runner.invoke(forge_cli, ["user", "add", "bad name", "--root", str(tmp_path)])
    assert bad.exit_code == 1 and "invalid login" in bad.output
    org = runner.invoke(forge_cli, ["org", "add", "acme", "--root", str(tmp_path), "--member", "dana"])
    assert org.exit_code == 0


def test_reviewer_actions_through_the_api(forge: Forge) -> None:
    pull, _ = forge.open_pull()
    runner = CliRunner()
    common = ["--url", forge.url, "--token", forge.tokens["bob"]]
    said = runner.invoke(forge_cli, ["comment", "alice/demo", "1", "Looks good", *common])
    assert said.exit_code == 0, said.output
    assert said.output.strip().endswith("#issuecomment-" + str(pull.get_issue_comments()[0].id))
    inline = runner.invoke(
        forge_cli, ["comment", "alice/demo", "1", "why?", "--path", "app.py", "--line", "2", *common]
    )
    assert inline.exit_code == 0, inline.output
    review = runner.invoke(
        forge_cli,
        [
            "review",
            "alice/demo",
            "1",
            "--event",
            "REQUEST_CHANGES",
            "--body",
            "Fix",
            "--comment",
            "app.py:3:rename",
            "--json",
            *common,
        ],
    )
    assert review.exit_code == 0, review.output
    assert json.loads(review.output)["state"] == "CHANGES_REQUESTED"
    assert sorted((c.line, c.body) for c in pull.get_review_comments()) == [(2, "why?"), (3, "rename")]
    denied = runner.invoke(forge_cli, ["close", "alice/demo", "1", *common])
    assert denied.exit_code == 1 and "403" in denied.output
    closed = runner.invoke(
        forge_cli, ["close", "alice/demo", "1", "--url", forge.url, "--token", forge.tokens["alice"]]
    )
    assert closed.exit_code == 0
    assert forge.gh().get_repo("alice/demo").get_pull(1).state == "closed"


def test_reviewer_action_on_a_root_without_a_server(forge_factory: ForgeStarter) -> None:
    forge = forge_factory()
    pull, _ = forge.open_pull()
    root = str(forge.handle.root)
    result = CliRunner().invoke(
        forge_cli, ["comment", "alice/demo", "1", "offline", "--root", root, "--token", forge.tokens["carol"]]
    )
    assert result.exit_code == 0, result.output
    assert [c.body for c in pull.get_issue_comments()] == ["offline"]


def test_create_repo_and_collaborator_commands(forge: Forge) -> None:
    runner = CliRunner()
    common = ["--url", forge.url, "--token", forge.tokens["alice"]]
    made = runner.invoke(forge_cli, ["create-repo", "tool", "--auto-init", *common])
    assert made.exit_code == 0 and made.output.strip() == f"{forge.url}/alice/tool.git"
    added = runner.invoke(
        forge_cli, ["add-collaborator", "alice/tool", "carol", "--permission", "maintain", *common]
    )
    assert added.exit_code == 0
    assert forge.gh().get_repo("alice/tool").get_collaborator_role_name("carol") == "maintain"


@pytest.mark.slow
def test_serve_runs_the_forge_in_the_foreground(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = "from controller.localforge.cli import forge_cli; forge_cli()"
    argv = [sys.executable, "-c", code, "serve", "--root", str(tmp_path / "f"), "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        def rate_limit() -> Any:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/v3/rate_limit", timeout=1
                ) as response:
                    return json.loads(response.read())
            except OSError:
                return None  # not listening yet

        answer = wait_until(rate_limit, "the forge to answer /rate_limit", proc=proc)
        assert answer["rate"]["limit"] == 60  # anonymous
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()
