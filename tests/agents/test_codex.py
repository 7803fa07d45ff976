"""``preset = "codex"`` end to end: ``crucible loop`` runs the real Codex CLI under bubblewrap against the
scripted Responses endpoint, which makes one edit; the turn keeps it with its tokens (and dollars through
``agent.prices``), and each way the CLI can fail to do its turn is a failed turn that says why (the endpoint
that is down and the CLI that is missing, shared by every preset: ``test_failures.py``)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.agentkit.clis import REAL_HOME, cli
from tests.agentkit.script import Edit
from tests.agentkit.server import ModelServer
from tests.agents.conftest import EDIT, preset_spec
from tests.e2e.conftest import BENCH_SH, Project, assert_checkout_at, ok_run, outcomes

pytestmark = pytest.mark.slow

KEY = "sk-proj-test-0123456789abcdef"
NO_RETRIES = [
    "-c",
    "model_providers.crucible.request_max_retries=0",
    "-c",
    "model_providers.crucible.stream_max_retries=0",
]


@pytest.mark.parametrize("home", ["temporary", "the machine's own"])
def test_a_real_codex_edit_is_kept_with_its_tokens_priced(
    project: Project, model_server: ModelServer, home: str
) -> None:
    # The key is the agent's alone: the metric command fails if it sees it.
    project.make({"tools/bench.sh": 'test -z "$OPENAI_API_KEY" || exit 3\n' + BENCH_SH})
    prices = {"gpt-5": {"input": 1.25, "output": 10.0}}
    preset_spec(project, "codex", cli("codex"), model_server.url + "/v1", model="gpt-5", prices=prices)
    env = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": "sk-ant-not-for-codex-123456"}
    if home != "temporary":
        env["HOME"] = str(REAL_HOME)
    view = ok_run(project.loop(env=env))

    assert outcomes(view) == [("accepted", "improved")]
    turn = view["turns"][0]
    assert turn["changed_paths"] == ["src/value.txt"]
    assert turn["hypothesis"] == EDIT.hypothesis
    calls = model_server.received("responses")
    assert calls, "the CLI never called the model"
    tokens = len(calls) * (model_server.model.input_tokens + model_server.model.output_tokens)
    assert view["tokens"] == tokens
    usd = (
        len(calls) * (model_server.model.input_tokens * 1.25 + model_server.model.output_tokens * 10.0) / 1e6
    )
    assert turn["cost_usd"] == pytest.approx(usd, abs=1e-6)
    checkout = project.checkout(view["run_id"])
    assert (checkout / "src" / "value.txt").read_text() == "8\n"
    assert_checkout_at(checkout, view["components"][0]["head_sha"])

    assert {c.headers.get("authorization") for c in calls} == {f"Bearer {KEY}"}
    assert {c.json()["model"] for c in calls} == {"gpt-5"}
    assert model_server.received() == calls  # nothing but model calls
    assert not any("sk-ant-not-for-codex" in c.body.decode() for c in calls)
    metadata = calls[0].headers.get("x-codex-turn-metadata", "")
    assert '"analytics_enabled":false' in metadata
    tools = {t.get("type") for t in calls[0].json()["tools"]}
    assert "web_search" not in tools


def test_a_model_endpoint_that_answers_errors_fails_the_turn(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    model_server.model.fail_status = 500
    preset_spec(project, "codex", cli("codex"), model_server.url + "/v1", args=NO_RETRIES)
    view = ok_run(project.loop(env={"OPENAI_API_KEY": KEY}))
    assert outcomes(view) == [("failed", "agent_failed")]
    assert "Codex failed: " in view["turns"][0]["detail"]


def test_without_crucibles_sandbox_codex_edits_in_its_own(
    project: Project, model_server: ModelServer
) -> None:
    project.make()
    project.write_spec(
        agent={
            "preset": "codex",
            "cli": str(cli("codex")),
            "model": "gpt-5",
            "base_url": model_server.url + "/v1",
            "command": None,
        },
        sandbox={"mode": "none"},
    )
    # Codex's sandbox refuses a home under /tmp (where the tests' HOME is): the machine's own HOME. The
    # CLI's home goes under a cache folder of this test's own there, so the check below sees this run's
    # homes alone: another worker's agent test may have one under ~/.cache/crucible/agent-homes right now
    # (the default beside HOME: tests/agents/test_turn.py; the [none] case below runs codex in it).
    (REAL_HOME / ".cache").mkdir(exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="crucible-test-cache-", dir=REAL_HOME / ".cache"))
    try:
        env = {"OPENAI_API_KEY": KEY, "HOME": str(REAL_HOME), "XDG_CACHE_HOME": str(cache)}
        view = ok_run(project.loop(env=env))
        assert outcomes(view) == [("accepted", "improved")], view["turns"][0].get("detail")
        homes = cache / "crucible" / "agent-homes"
        assert homes.is_dir()  # the run made the CLI's home here...
        assert list(homes.iterdir()) == []  # ...and removed it
    finally:
        shutil.rmtree(cache)


# A file of every checkout that no agent may write: crucible keeps each checkout's .git read-only in its
# sandbox, and Codex's own sandbox keeps .git out of its writable roots. Crucible clones without git's
# template (ADR-0041), so the file is the one every clone writes itself, and the line its first.
GIT_CONFIG_LINE = "[core]"


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_an_edit_codex_may_not_make_fails_the_turn_saying_why(
    project: Project, model_server: ModelServer, sandbox: str
) -> None:
    """Codex says "Done" and exits 0 either way; what the user sees is the failed turn's detail. Under
    bubblewrap the write fails on the read-only bind; without crucible's sandbox Codex's own refuses the
    patch before writing, and no JSON event says so (before, that turn was a quiet ``no_change``)."""
    project.make()
    model_server.model.edit = Edit(".git/config", GIT_CONFIG_LINE, "[renamed]", hypothesis="rename it")
    preset_spec(project, "codex", cli("codex"), model_server.url + "/v1", model="gpt-5")
    env = {"OPENAI_API_KEY": KEY}
    if sandbox == "none":
        project.write_spec(
            agent={
                "preset": "codex",
                "cli": str(cli("codex")),
                "model": "gpt-5",
                "base_url": model_server.url + "/v1",
                "command": None,
            },
            sandbox={"mode": "none"},
        )
        env["HOME"] = str(REAL_HOME)  # Codex's sandbox refuses a home under /tmp
    view = ok_run(project.loop(env=env))
    assert outcomes(view) == [("failed", "agent_failed")], view["turns"][0].get("detail")
    detail = view["turns"][0]["detail"]
    if sandbox == "bwrap":  # a failed file_change event; the reason is on stderr only
        assert detail.startswith("the agent exited 3: Codex could not apply its edit to "), detail
        assert "/.git/config: Failed to write file " in detail
    else:  # no event at all: the log line is the only signal
        assert detail == (
            "the agent exited 3: Codex was not allowed to edit: patch rejected: writing outside of the "
            "project; rejected by user approval settings"
        )
    checkout = project.checkout(view["run_id"])
    assert (checkout / ".git" / "config").read_text().splitlines()[0] == GIT_CONFIG_LINE
