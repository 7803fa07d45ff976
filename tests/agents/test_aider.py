"""``preset = "aider"``: the invocation it builds, how it reads aider's output and analytics log (recorded
from aider 0.86.2 against the scripted endpoint), the controller's git scratch and litter removal around a
stand-in aider under a read-only ``.git`` in the real sandbox, then ``crucible loop`` with the real aider
under bubblewrap against the scripted chat-completions endpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from controller.agents.aider import USAGE_LOG, Aider, model_name, usage_summary
from controller.agents.base import Settings, Usage
from controller.agents.outcome import hypothesis
from controller.agents.turn import clean, finish, prepare
from controller.config.agent import AgentSpec
from controller.workspace.process import run_command
from controller.workspace.sandbox import Sandbox, bwrap_path
from tests.agentkit.clis import REAL_HOME, cli
from tests.agentkit.server import ModelServer
from tests.agents.conftest import EDIT, preset_spec
from tests.conftest import git, make_repo
from tests.e2e.conftest import BENCH_SH, Project, assert_checkout_at, ok_run, outcomes

KEY = "sk-aider-test-0123456789abcdef"
SETTINGS = Settings(
    workdir=Path("/w"),
    home=Path("/h"),
    model="scripted",
    base_url="http://127.0.0.1:9/v1",
    folder=Path("/turn"),
)
# aider's console output for a turn (trimmed).
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


def _log(*calls: tuple[int, int, float]) -> dict[str, str]:
    """The turn's folder's analytics log with one ``message_send`` event per call, as aider writes it."""
    events: list[dict[str, object]] = [{"event": "launched", "properties": {}}]
    for inputs, outputs, usd in calls:
        properties = {"prompt_tokens": inputs, "completion_tokens": outputs, "cost": usd}
        events.append({"event": "message_send", "properties": properties})
    return {USAGE_LOG: "".join(json.dumps(event) + "\n" for event in events)}


def test_aider_is_the_command_without_commits_prompts_or_downloads() -> None:
    run = Aider().invocation("/venv/bin/aider", "the brief", SETTINGS)
    aider = run.argv
    assert aider[0] == "/venv/bin/aider"  # no process of crucible's around it (ADR-0039)
    for flag in ("--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-gitignore"):
        assert flag in aider
    for flag in ("--analytics-disable", "--no-check-update", "--no-show-release-notes"):
        assert flag in aider
    assert aider[aider.index("--message-file") + 1] == "/h/crucible-brief.md"
    assert run.files["crucible-brief.md"] == "the brief" and run.stdin is None
    assert aider[aider.index("--chat-history-file") + 1].startswith("/h/")  # not in the checkout
    assert aider[aider.index("--analytics-log") + 1] == f"/turn/{USAGE_LOG}"  # read after the exit
    assert Aider.outputs == (USAGE_LOG,) and Aider.git_scratch
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


def test_aiders_output_gives_the_hypothesis_and_its_logs_exact_usage() -> None:
    report = Aider().report(APPLIED, "", 0, _log((2175, 33, 0.0067), (2174, 33, 0.0067)))
    assert report.failure is None
    assert hypothesis(report.final_message) == "lower the value to 8"
    assert report.usage == (Usage(None, 4349, 66, 0.0134),)  # not the console's rounded "2.2k sent"
    unpriced = Aider().report(APPLIED, "", 0, _log((2175, 33, 0.0), (2174, 33, 0.0)))
    assert unpriced.usage == (Usage(None, 4349, 66, None),)  # a model aider knows no price for


def test_aider_that_got_no_model_answer_or_skipped_its_edits_failed() -> None:
    down = "litellm.AuthenticationError: AuthenticationError: OpenAIException - scripted 401\n"
    report = Aider().report("Aider v0.86.2\n" + down, "", 0, _log())
    assert report.failure == f"aider got no answer from its model: {down.strip()}"
    report = Aider().report(APPLIED, "", 0)  # no analytics log at all: no model call is known
    assert report.failure is not None and "got no answer from its model" in report.failure
    skipped = APPLIED.replace(
        "Applied edit to src/value.txt", "Did not apply edit to src/value.txt (--dry-run)"
    )
    report = Aider().report(skipped, "", 0, _log((10, 1, 0.0)))
    assert report.failure == "aider was not allowed to edit (src/value.txt)"
    report = Aider().report("Skipping edits to src/x.py\n", "", 0, _log((10, 1, 0.0)))
    assert report.failure == "aider was not allowed to edit (src/x.py)"
    assert (
        Aider().report("", "Traceback …\nValueError: bad\n", 1).failure == "aider exited 1: ValueError: bad"
    )


def test_the_analytics_log_is_summed_over_its_model_calls() -> None:
    text = _log((2175, 33, 0.25), (2174, 33, 0.5))[USAGE_LOG] + "{not json\n" + '{"event": "message_send"}\n'
    assert usage_summary(text) == {"calls": 3, "input_tokens": 4349, "output_tokens": 66, "usd": 0.75}
    assert usage_summary("") == {"calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": 0.0}


@pytest.mark.skipif(bwrap_path() is None, reason="needs a working bubblewrap")
def test_aider_may_git_add_a_new_file_under_a_read_only_git_and_its_cache_is_removed(
    tmp_path: Path, listening: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (repo / ".aider.tags.cache.v3").mkdir()  # one the turn did not make stays
    (repo / ".aider.tags.cache.v3" / "cache.db").write_text("")
    event = json.dumps({"event": "message_send", "properties": {"prompt_tokens": 5, "completion_tokens": 2}})
    index = (repo / ".git" / "index").read_bytes()
    fake = tmp_path / "fake-aider"  # does what aider does with a file it creates, leaves its cache, logs
    fake.write_text(
        "#!/bin/sh\n"
        'printf "x\\n" > new.txt && git add new.txt || exit 1\n'
        "mkdir .aider.tags.cache.v4 && : > .aider.tags.cache.v4/db\n"
        'while [ "$1" != --analytics-log ]; do shift; done\n'
        f"echo '{event}' > \"$2\"\n"
        "echo 'HYPOTHESIS: new file'\n"
    )
    fake.chmod(0o755)
    agent = AgentSpec.model_validate({"preset": "aider", "cli": str(fake), "base_url": listening})
    folder = tmp_path / "turn"
    environ = {"PATH": os.environ["PATH"]}
    turn = prepare(
        agent,
        None,
        folder=folder,
        workdir=repo,
        brief="",
        boundary="bwrap",
        network=True,
        sandbox_home="/tmp/crucible-home",
        environ=environ,
    )
    assert turn.failure is None and turn.env["GIT_INDEX_FILE"].startswith(str(folder))
    box = Sandbox(network=False, home="/tmp/crucible-home")
    argv = box.wrap(
        ["/bin/sh", "-c", turn.command],
        writable=[repo, folder],
        readonly=[repo / ".git"],
        search_path=environ["PATH"],
        home_tree=turn.home_tree,
    )
    result = run_command(argv, cwd=repo, env={**environ, **turn.env}, timeout=60)
    done = finish(agent, turn, result.returncode or 0)
    clean(turn)

    assert result.returncode == 0, (result.stderr, done.stderr)
    assert done.failure is None and done.lines == ("HYPOTHESIS: new file", "COST tokens=7")
    assert (repo / "new.txt").read_text() == "x\n"  # the file kept its content
    assert (repo / ".git" / "index").read_bytes() == index  # the checkout's index was not touched
    assert git(repo, "status", "--porcelain", "--ignored") == "?? .aider.tags.cache.v3/\n?? new.txt"
    assert not folder.exists()


def test_litter_is_removed_without_following_a_link(tmp_path: Path, listening: str) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    agent = AgentSpec.model_validate({"preset": "aider", "cli": "/bin/true", "base_url": listening})
    turn = prepare(
        agent,
        None,
        folder=tmp_path / "turn",
        workdir=repo,
        brief="",
        boundary="pod",
        network=True,
        sandbox_home="/nonexistent",
        environ={"PATH": os.environ["PATH"]},
    )
    (repo / ".aider.tags.cache.v4").symlink_to(outside)  # what a hostile agent may leave instead
    (repo / ".aider.tags.cache.v5").write_text("a file")
    clean(turn)
    assert sorted(p.name for p in repo.iterdir()) == [".git", "a.txt"]
    assert (outside / "keep.txt").read_text() == "kept"


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
