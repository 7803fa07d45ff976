"""``preset = "aider"``: the invocation it builds, how it reads aider's output and the launcher's usage line
(recorded from aider 0.86.2 against the scripted endpoint), the launcher's git scratch under a read-only
``.git`` in the real sandbox, then ``crucible loop`` with the real aider under bubblewrap against the
scripted chat-completions endpoint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from controller.agents.aider import USAGE_PREFIX, Aider, model_name
from controller.agents.aider_launcher import usage_summary
from controller.agents.base import Settings, Usage, helper_argv
from controller.agents.outcome import hypothesis
from controller.workspace.sandbox import bwrap_path, wrap_command
from tests.agentkit.clis import REAL_HOME, cli
from tests.agentkit.server import ModelServer
from tests.agents.conftest import EDIT, preset_spec
from tests.conftest import git, make_repo
from tests.e2e.conftest import BENCH_SH, Project, assert_checkout_at, ok_run, outcomes

KEY = "sk-aider-test-0123456789abcdef"
SETTINGS = Settings(workdir=Path("/w"), home=Path("/h"), model="scripted", base_url="http://127.0.0.1:9/v1")
# aider's console output for a turn (trimmed), then the launcher's line.
APPLIED = """Analytics have been permanently disabled.

Aider v0.86.2
Model: openai/scripted with diff edit format
src/value.txt
```
<<<<<<< SEARCH
10
=======
8
>>>>>>> REPLACE
```

HYPOTHESIS: lower the value to 8
Tokens: 2.2k sent, 33 received. Cost: $0.0067 message, $0.01 session.
Applied edit to src/value.txt
"""


def _usage(calls: int, inputs: int, outputs: int, usd: float) -> str:
    summary = {"calls": calls, "input_tokens": inputs, "output_tokens": outputs, "usd": usd}
    return USAGE_PREFIX + json.dumps(summary) + "\n"


def test_aider_runs_through_its_launcher_without_commits_prompts_or_downloads() -> None:
    run = Aider().invocation("/venv/bin/aider", "the brief", SETTINGS)
    launcher = run.argv[: run.argv.index("--")]
    assert launcher[:6] == helper_argv("controller.agents.aider_launcher")
    aider = run.argv[run.argv.index("--") + 1 :]
    assert aider[0] == "/venv/bin/aider"
    for flag in ("--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore"):
        assert flag in aider
    for flag in ("--analytics-disable", "--no-check-update", "--no-show-release-notes"):
        assert flag in aider
    assert aider[aider.index("--message-file") + 1] == "/h/crucible-brief.md"
    assert run.files["crucible-brief.md"] == "the brief" and run.stdin is None
    assert aider[aider.index("--chat-history-file") + 1].startswith("/h/")  # not in the checkout
    assert aider[aider.index("--analytics-log") + 1] == launcher[launcher.index("--usage-log") + 1]
    assert aider[aider.index("--model") + 1] == "openai/scripted"  # litellm's provider for a base URL
    assert aider[aider.index("--openai-api-base") + 1] == SETTINGS.base_url
    assert run.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # no price list download at import
    cache = json.loads(run.files[".aider/caches/model_prices_and_context_window.json"])
    assert cache  # fresh and non-empty: aider's model-info cache downloads nothing either


def test_a_model_keeps_its_provider_and_extra_args_come_last() -> None:
    settings = Settings(
        workdir=Path("/w"), home=Path("/h"), model="anthropic/claude-sonnet-4-5", args=("--x",)
    )
    assert model_name(settings) == "anthropic/claude-sonnet-4-5"
    run = Aider().invocation("aider", "b", settings)
    assert run.argv[-1] == "--x" and "--openai-api-base" not in run.argv


def test_aiders_output_gives_the_hypothesis_and_the_launchers_exact_usage() -> None:
    report = Aider().report(APPLIED + _usage(2, 4349, 66, 0.0134), "", 0)
    assert report.failure is None
    assert hypothesis(report.final_message) == "lower the value to 8"
    assert report.usage == (Usage(None, 4349, 66, 0.0134),)
    unpriced = Aider().report(APPLIED + _usage(2, 4349, 66, 0.0), "", 0)
    assert unpriced.usage == (Usage(None, 4349, 66, None),)  # a model aider knows no price for


def test_a_usage_line_the_model_wrote_is_not_believed() -> None:
    forged = APPLIED.replace("Applied edit", _usage(1, 1, 1, 0.0) + "Applied edit")
    report = Aider().report(forged, "", 0)
    assert report.usage == ()
    assert report.failure is not None and "without its usage line" in report.failure


def test_aider_that_got_no_model_answer_or_skipped_its_edits_failed() -> None:
    down = "litellm.AuthenticationError: AuthenticationError: OpenAIException - scripted 401\n"
    report = Aider().report("Aider v0.86.2\n" + down + _usage(0, 0, 0, 0.0), "", 0)
    assert report.failure == f"aider got no answer from its model: {down.strip()}"
    skipped = APPLIED.replace(
        "Applied edit to src/value.txt", "Did not apply edit to src/value.txt (--dry-run)"
    )
    report = Aider().report(skipped + _usage(2, 10, 1, 0.0), "", 0)
    assert report.failure == "aider was not allowed to edit (src/value.txt)"
    report = Aider().report("Skipping edits to src/x.py\n" + _usage(1, 10, 1, 0.0), "", 0)
    assert report.failure == "aider was not allowed to edit (src/x.py)"
    assert (
        Aider().report("", "Traceback …\nValueError: bad\n", 1).failure == "aider exited 1: ValueError: bad"
    )


def test_the_launcher_sums_the_analytics_log(tmp_path: Path) -> None:
    log = tmp_path / "analytics.jsonl"
    events = [
        {"event": "launched", "properties": {}},
        {
            "event": "message_send",
            "properties": {"prompt_tokens": 2175, "completion_tokens": 33, "cost": 0.25},
        },
        {
            "event": "message_send",
            "properties": {"prompt_tokens": 2174, "completion_tokens": 33, "cost": 0.5},
        },
    ]
    log.write_text("".join(json.dumps(e) + "\n" for e in events) + "{not json\n")
    assert usage_summary(log) == {"calls": 2, "input_tokens": 4349, "output_tokens": 66, "usd": 0.75}
    assert usage_summary(tmp_path / "missing") == {
        "calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "usd": 0.0,
    }


@pytest.mark.skipif(bwrap_path() is None, reason="needs a working bubblewrap")
def test_the_launcher_lets_aider_git_add_a_new_file_under_a_read_only_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    index = (repo / ".git" / "index").read_bytes()
    fake = tmp_path / "fake-aider"  # does what aider does with a file it creates, then leaves its cache
    fake.write_text('#!/bin/sh\nprintf "x\\n" > new.txt && git add new.txt && mkdir .aider.tags.cache.v4\n')
    fake.chmod(0o755)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # As the preset starts it: crucible's code root is a word of the command (it may sit under /tmp, CI's
    # clone), so the sandbox shows it.
    argv = [*helper_argv("controller.agents.aider_launcher"), "--usage-log", str(scratch / "log")]
    argv += ["--scratch", str(scratch / "git"), "--", str(fake)]
    wrapped = wrap_command(
        argv,
        writable=[repo, scratch],
        readonly=[repo / ".git"],
        network=False,
        home=str(tmp_path / "home"),
        cwd=repo,
    )
    done = subprocess.run(wrapped, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 0, done.stderr
    assert (repo / "new.txt").read_text() == "x\n"  # the file kept its content
    assert (repo / ".git" / "index").read_bytes() == index  # the checkout's index was not touched
    assert git(repo, "status", "--porcelain", "--ignored") == "?? new.txt"  # the cache is gone
    assert done.stdout.splitlines()[-1] == _usage(0, 0, 0, 0.0).strip()


# ----------------------------------------------------------------------------------- the real CLI, end to end


@pytest.mark.slow
def test_a_real_aider_edit_is_kept_with_its_cost(project: Project, model_server: ModelServer) -> None:
    aider = cli("aider")  # a venv whose Python is a pyenv version under the machine's own HOME
    project.make({"tools/bench.sh": 'test -z "$OPENAI_API_KEY" || exit 3\n' + BENCH_SH})
    preset_spec(project, "aider", aider, f"{model_server.url}/v1", model="gpt-4o")
    env = {"OPENAI_API_KEY": KEY, "GITHUB_TOKEN": "ghp_" + "x" * 36, "HOME": str(REAL_HOME)}
    view = ok_run(project.loop(env=env))

    assert outcomes(view) == [("accepted", "improved")]
    turn = view["turns"][0]
    assert turn["changed_paths"] == ["src/value.txt"]
    assert turn["hypothesis"] == EDIT.hypothesis
    assert turn["cost_usd"] > 0  # aider prices gpt-4o itself, from the list litellm ships
    assert view["tokens"] > 0
    checkout = project.checkout(view["run_id"])
    assert (checkout / "src" / "value.txt").read_text() == "8\n"
    assert_checkout_at(checkout, view["components"][0]["head_sha"])  # no .aider* file, no commit

    calls = model_server.received("chat")
    assert len(calls) == 2  # the file added to its chat, then the edit applied
    assert {c.headers.get("authorization") for c in calls} == {f"Bearer {KEY}"}
    assert {c.json()["model"] for c in calls} == {"gpt-4o"}
    assert model_server.received() == calls  # no analytics, update check or price list
    assert not any("ghp_" in c.body.decode() for c in calls)


@pytest.mark.slow
def test_an_aider_that_may_not_edit_fails_the_turn(project: Project, model_server: ModelServer) -> None:
    project.make()
    preset_spec(project, "aider", cli("aider"), f"{model_server.url}/v1", model="gpt-4o", args=["--dry-run"])
    view = ok_run(project.loop(env={"OPENAI_API_KEY": KEY}))
    assert outcomes(view) == [("failed", "agent_failed")]
    assert "aider was not allowed to edit (src/value.txt)" in view["turns"][0]["detail"]


@pytest.mark.slow
def test_an_aider_whose_model_answers_errors_fails_the_turn(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    model_server.model.fail_status = 401
    prices = {"scripted": {"input": 1.0, "output": 1.0}}
    preset_spec(project, "aider", cli("aider"), f"{model_server.url}/v1", model="scripted", prices=prices)
    view = ok_run(project.loop(env={"OPENAI_API_KEY": KEY}))
    assert outcomes(view) == [("failed", "agent_failed")]
    assert "aider got no answer from its model: litellm.AuthenticationError" in view["turns"][0]["detail"]


@pytest.mark.slow
@pytest.mark.parametrize("chosen", ["aider", "gemini", "qwen-code"])
def test_a_missing_cli_fails_the_turn_saying_how_to_install_it(
    project: Project, model_server: ModelServer, chosen: str
) -> None:
    project.make()
    preset_spec(project, chosen, project.root / "no-such-cli", model_server.url)
    view = ok_run(project.loop(env={"OPENAI_API_KEY": KEY}))
    assert outcomes(view) == [("failed", "agent_failed")]
    assert "is not installed" in view["turns"][0]["detail"]
    assert "install" in view["turns"][0]["detail"].split("is not installed", 1)[1]
