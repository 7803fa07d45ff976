"""A preset's turn as the controller runs it (``controller.agents.turn``, ADR-0038): the folder and settings
made before the spawn, the command (the CLI itself, its output going to files), and the reading after the
exit. The real CLIs run end to end in the per-preset files; here a small script stands in for one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from controller.agents.outcome import NO_NETWORK, remove_tree
from controller.agents.turn import PresetTurn, clean, finish, prepare, read_output
from controller.config.agent import AgentSpec
from controller.workspace.process import run_command
from controller.workspace.sandbox import Sandbox
from tests.agentkit.clis import refused_url

SANDBOX_HOME = "/tmp/crucible-home"
# What `codex exec --json` prints for a turn that made its edit (the fields the preset reads).
CODEX_EVENTS = [
    {"type": "item.completed", "item": {"type": "file_change", "status": "completed", "changes": []}},
    {"type": "item.completed", "item": {"type": "agent_message", "text": "Done.\nHYPOTHESIS: lower it"}},
    {"type": "turn.completed", "usage": {"input_tokens": 1000, "output_tokens": 200}},
]


def fake_codex(where: Path, events: list[dict[str, object]], code: int = 0) -> Path:
    """A script that records its argv, environment and stdin, prints ``events`` as Codex's JSONL, and
    checks that ``CODEX_HOME`` exists, as the real CLI needs."""
    cli = where / "codex"
    lines = "\n".join(json.dumps(event) for event in events)
    cli.write_text(
        "#!/bin/sh\n"
        'test -d "$CODEX_HOME" || { echo "no CODEX_HOME" >&2; exit 9; }\n'
        'printf "%s\\n" "$@" > "$RECORD.argv"\n'
        'cat > "$RECORD.stdin"\n'
        'echo "$HOME" > "$RECORD.home"\n'
        f"cat <<'EOF'\n{lines}\nEOF\n"
        "echo 'a log line' >&2\n"
        f"exit {code}\n"
    )
    cli.chmod(0o755)
    return cli


def spec(cli: Path, base_url: str, **more: object) -> AgentSpec:
    return AgentSpec.model_validate(
        {"preset": "codex", "cli": str(cli), "base_url": base_url, "model": "gpt-5", **more}
    )


def run(turn: PresetTurn, workdir: Path, environ: dict[str, str]) -> int:
    done = subprocess.run(
        ["/bin/sh", "-c", turn.command], cwd=workdir, env={**environ, **turn.env}, check=False
    )
    return done.returncode


def test_the_cli_runs_as_the_command_and_its_output_is_read_from_files(
    tmp_path: Path, listening: str
) -> None:
    cli = fake_codex(tmp_path, CODEX_EVENTS)
    folder, workdir = tmp_path / "run" / "preset-turn", tmp_path / "work"
    workdir.mkdir()
    environ = {"PATH": os.environ["PATH"], "RECORD": str(tmp_path / "record"), "HOME": str(tmp_path)}
    agent = spec(cli, listening, prices={"gpt-5": {"input": 1.0, "output": 10.0}})

    turn = prepare(
        agent,
        None,
        folder=folder,
        workdir=workdir,
        brief="# Objective\nLower it.\n",
        boundary="pod",
        network=True,
        sandbox_home=SANDBOX_HOME,
        environ=environ,
    )
    assert turn.failure is None
    assert turn.command.startswith(f"exec {cli} exec --json ")
    assert turn.command.endswith(f" </dev/null >{folder}/stdout 2>{folder}/stderr")
    assert turn.env["HOME"] == str(folder / "home") and turn.env["CODEX_HOME"] == str(
        folder / "home" / ".codex"
    )
    code = run(turn, workdir, environ)
    done = finish(agent, turn, code)
    clean(turn)

    assert (code, done.failure) == (0, None)
    assert done.lines == ("HYPOTHESIS: lower it", "COST usd=0.003000 tokens=1200")
    assert done.stderr == "a log line\n"
    argv = (tmp_path / "record.argv").read_text().splitlines()
    assert "Working directory: " + str(workdir) in argv and "Lower it." in argv
    assert (tmp_path / "record.stdin").read_text() == ""  # stdin closed
    assert not folder.exists()


def test_a_long_prompt_goes_through_a_file_on_stdin(tmp_path: Path, listening: str) -> None:
    cli = fake_codex(tmp_path, CODEX_EVENTS)
    folder = tmp_path / "preset-turn"
    environ = {"PATH": os.environ["PATH"], "RECORD": str(tmp_path / "record")}
    brief = "x" * 200_000
    turn = prepare(
        spec(cli, listening),
        None,
        folder=folder,
        workdir=tmp_path,
        brief=brief,
        boundary="pod",
        network=True,
        sandbox_home=SANDBOX_HOME,
        environ=environ,
    )
    assert f" <{folder}/prompt >" in turn.command
    assert run(turn, tmp_path, environ) == 0
    assert (tmp_path / "record.stdin").read_text().endswith(brief)
    assert (tmp_path / "record.argv").read_text().splitlines()[-1] == "-"


def test_an_edit_the_cli_could_not_make_fails_with_the_status_and_reason_the_wrapper_gave(
    tmp_path: Path, listening: str
) -> None:
    failed = {"type": "item.completed", "item": {"type": "file_change", "status": "failed", "changes": []}}
    events = [failed, *CODEX_EVENTS[1:]]
    cli = fake_codex(tmp_path, events)
    environ = {"PATH": os.environ["PATH"], "RECORD": str(tmp_path / "record")}
    agent = spec(cli, listening)
    turn = prepare(
        agent,
        None,
        folder=tmp_path / "t",
        workdir=tmp_path,
        brief="",
        boundary="pod",
        network=True,
        sandbox_home=SANDBOX_HOME,
        environ=environ,
    )
    done = finish(agent, turn, run(turn, tmp_path, environ))
    assert done.returncode == 3
    assert done.failure == "Codex could not apply its edit to a file (see the agent log for why)"
    assert done.lines[0] == "HYPOTHESIS: lower it"


@pytest.mark.parametrize(
    ("cli", "url", "boundary", "network", "says"),
    [
        ("missing", "listening", "pod", True, "Codex is not installed ("),
        ("missing", "refused", "pod", True, "Codex is not installed ("),  # the missing CLI is named first
        ("fake", "refused", "pod", True, "Codex: cannot reach the model endpoint http://127.0.0.1:"),
        ("fake", "listening", "bwrap", False, f"/v1: {NO_NETWORK}"),
    ],
)
def test_a_turn_that_cannot_do_its_work_fails_before_the_spawn(
    tmp_path: Path, listening: str, cli: str, url: str, boundary: str, network: bool, says: str
) -> None:
    program = fake_codex(tmp_path, CODEX_EVENTS) if cli == "fake" else tmp_path / "no-such-codex"
    base = listening if url == "listening" else refused_url() + "/v1"
    turn = prepare(
        spec(program, base),
        None,
        folder=tmp_path / "t",
        workdir=tmp_path,
        brief="",
        boundary=boundary,  # type: ignore[arg-type]
        network=network,
        sandbox_home=SANDBOX_HOME,
        environ={"PATH": os.environ["PATH"]},
    )
    assert turn.failure is not None and says in turn.failure, turn.failure
    assert not (tmp_path / "t").exists()
    if cli == "missing":
        assert turn.failure.endswith("install it: npm install -g @openai/codex")


def prepare_without_a_sandbox(tmp_path: Path, listening: str, environ: dict[str, str]) -> PresetTurn:
    """A fake codex turn with no sandbox: where its CLI's home goes depends only on ``environ``."""
    return prepare(
        spec(fake_codex(tmp_path, CODEX_EVENTS), listening),
        None,
        folder=tmp_path / "t",
        workdir=tmp_path,
        brief="",
        boundary="none",
        network=True,
        sandbox_home=SANDBOX_HOME,
        environ=environ,
    )


def test_without_a_sandbox_the_clis_home_is_under_the_cache_and_removed(
    tmp_path: Path, listening: str
) -> None:
    environ = {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    turn = prepare_without_a_sandbox(tmp_path, listening, environ)
    assert turn.home is not None and turn.home.parent == tmp_path / "cache" / "crucible" / "agent-homes"
    assert (turn.home / ".codex").is_dir() and turn.env["HOME"] == str(turn.home)
    assert "--sandbox workspace-write" in turn.command
    clean(turn)
    assert not turn.home.exists() and not (tmp_path / "t").exists()


def test_without_a_sandbox_or_xdg_cache_home_the_clis_home_is_under_homes_own_cache(
    tmp_path: Path, listening: str
) -> None:
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    turn = prepare_without_a_sandbox(tmp_path, listening, environ)
    assert turn.home is not None
    assert turn.home.parent == tmp_path / "home" / ".cache" / "crucible" / "agent-homes"
    clean(turn)
    assert not turn.home.exists()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_inside_bubblewrap_the_settings_are_shown_in_the_sandboxs_own_home(
    tmp_path: Path, listening: str
) -> None:
    """The CLI's HOME is the sandbox's tmpfs (where its own state is fastest to write), with the files and
    folders the preset prepared bound into it read-only; the output files are in the writable folder."""
    agent = AgentSpec.model_validate({"preset": "gemini", "cli": "/bin/true", "base_url": listening})
    folder = tmp_path / "t"
    turn = prepare(
        agent,
        None,
        folder=folder,
        workdir=tmp_path,
        brief="",
        boundary="bwrap",
        network=True,
        sandbox_home=SANDBOX_HOME,
        environ={"PATH": os.environ["PATH"]},
    )
    assert turn.home_tree == folder / "home" and turn.env["HOME"] == SANDBOX_HOME
    script = (
        'cat "$HOME/.gemini/settings.json" | head -c 1; echo;'
        ' echo x > "$HOME/.gemini/settings.json" 2>/dev/null || echo settings-read-only;'
        ' echo state > "$HOME/.gemini/state" && echo state-written;'
        f" echo out > {folder}/stdout && echo output-written"
    )
    box = Sandbox(network=False, home=SANDBOX_HOME)
    argv = box.wrap(["/bin/sh", "-c", script], writable=[folder], home_tree=turn.home_tree)
    result = run_command(argv, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, timeout=60)
    clean(turn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["{", "settings-read-only", "state-written", "output-written"]
    assert not folder.exists()


def test_output_is_read_from_regular_files_only_never_through_a_link(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not for the controller to read on the agent's behalf")
    (tmp_path / "link").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("x" * 100)
    assert read_output(tmp_path / "link") == ""
    assert read_output(tmp_path / "fifo") == ""  # and it does not block
    assert read_output(tmp_path / "missing") == ""
    assert read_output(tmp_path / "file", limit=10) == "x" * 10


def test_the_folder_is_removed_with_its_links_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    home = tmp_path / "home"
    (home / ".codex" / "skills" / "a").mkdir(parents=True)
    (home / ".codex" / "skills" / "a" / "skill.txt").write_text("x")  # a file deep in the tree
    (home / "link-to-dir").symlink_to(outside)
    (home / "link-to-file").symlink_to(outside / "keep.txt")
    remove_tree(home)
    assert not home.exists() and (outside / "keep.txt").read_text() == "kept"
