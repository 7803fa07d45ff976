"""``crucible runs … --server``, ``feedback --server``, ``patch --server`` and ``cancel --server`` print what
the local commands print, from the API; HTTP errors become the usual exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from controller.config.settings import Settings
from controller.services.views.reads import feedback_view, run_view, runs_list
from controller.services.views.schemas import dump
from tests.api.conftest import ADMIN, READER, Api, new_run
from tests.api.sqlite_only import SQLITE_ONLY


def crucible(api: Api, *args: str, token: str | None = ADMIN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CRUCIBLE_API_TOKEN"}
    if token:
        env["CRUCIBLE_API_TOKEN"] = token
    argv = [sys.executable, "-m", "controller.cli.main", *args, "--server", api.url]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_reads_print_the_same_json_as_the_local_views(api: Api, tmp_path: Path) -> None:
    new_run(api.store, "r1", objective="first")
    new_run(api.store, "r2", objective="second")
    listed = crucible(api, "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == dump(runs_list(api.store))
    shown = crucible(api, "runs", "show", "r1", "--json")
    settings = Settings(home=tmp_path / "crucible-home", database_url="unused")
    assert json.loads(shown.stdout) == dump(run_view(settings, api.store, "r1"))
    human = crucible(api, "runs", "list")
    assert "first" in human.stdout and "second" in human.stdout
    feedback = crucible(api, "feedback", "r1", "--json")
    assert json.loads(feedback.stdout) == dump(feedback_view(api.store, "r1"))
    assert crucible(api, "patch", "r1").stdout == ""
    assert crucible(api, "runs", "show", "r1", "--tsv").stdout.startswith("turn\tround\toutcome")


@SQLITE_ONLY  # the CLI's mapping of HTTP answers to exit codes; the reads above run on both databases
def test_errors_become_exit_codes(api: Api) -> None:
    new_run(api.store, "r1")
    missing = crucible(api, "runs", "show", "nope")
    assert missing.returncode == 2 and "nope" in missing.stderr
    refused = crucible(api, "cancel", "r1", token=READER)
    assert refused.returncode == 1 and "403" in refused.stderr
    anonymous = crucible(api, "runs", "list", token=None)
    assert anonymous.returncode == 1 and "401" in anonymous.stderr
    done = crucible(api, "cancel", "r1")
    assert done.returncode == 0 and done.stdout.strip() == "cancelling"
    assert api.control.calls == [("cancel", "r1")]
