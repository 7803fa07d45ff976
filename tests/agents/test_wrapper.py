"""The wrapper a preset's turn runs (``controller.agents.run``): its arguments, how it runs the CLI, and
that it starts light (its start-up is part of every turn; ``bench/agents.py`` measures it, ADR-0033)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controller.agents.command import WRAPPER_MODULE, bootstrap
from controller.agents.run import Price, UsageError, main, parse, remove_tree, run_cli

# What the wrapper must not import: each costs more start-up CPU than the work it would save.
HEAVY = ("argparse", "subprocess", "threading", "tempfile", "shutil", "dataclasses", "inspect", "pydantic")


def test_the_wrapper_starts_without_site_and_without_heavy_modules() -> None:
    probe = bootstrap().replace("sys.exit(main())", "print(' '.join(sorted(sys.modules)))")
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True, cwd="/"
    )
    loaded = set(done.stdout.split())
    assert WRAPPER_MODULE in loaded and "site" not in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_arguments_as_the_command_writes_them() -> None:
    given = ["--preset", "codex", "--cli", "/x/codex", "--model", "gpt-5", "--base-url", "http://h/v1"]
    given += [
        "--arg=--flag",
        "--arg=-c=x",
        "--price=gpt-5=1.25:10",
        "--sandboxed",
        "--needs",
        "/a",
        "--needs=/b",
    ]
    options = parse(given)
    assert (options.preset, options.cli, options.model, options.base_url) == (
        "codex",
        "/x/codex",
        "gpt-5",
        "http://h/v1",
    )
    assert options.args == ("--flag", "-c=x")
    assert options.prices == (("gpt-5", Price(1.25, 10.0)),)
    assert options.sandboxed and options.needs == (Path("/a"), Path("/b"))


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cli", "x"], "--preset is required once"),
        (
            ["--preset", "nope", "--cli", "x"],
            "--preset: unknown preset 'nope' (choose from aider, claude-code",
        ),
        (["--preset", "codex", "--cli", "x", "--bogus"], "unknown argument '--bogus'"),
        (["--preset", "codex", "--cli"], "--cli expects a value"),
        (["--preset", "codex", "--cli", "x", "--price=gpt-5=cheap"], "--price: expected MODEL=INPUT:OUTPUT"),
        (["--preset", "codex", "--cli", "x", "--price==1:2"], "--price: expected MODEL=INPUT:OUTPUT"),
    ],
)
def test_arguments_it_does_not_take_exit_2_saying_which(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UsageError, match="^" + re.escape(says)):
        parse(argv)
    assert main(argv) == 2
    assert f"crucible-agent: error: {says}" in capsys.readouterr().err


def test_the_cli_gets_a_long_stdin_and_its_output_is_kept_and_echoed(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """More than a pipe holds in both directions at once: the one-thread pump must not deadlock."""
    brief = "".join(f"line {i} of the brief\n" for i in range(20_000))  # ~400 KB
    script = (
        "import sys; data = sys.stdin.read(); print(data, end=''); print('said', len(data), file=sys.stderr)"
    )
    out, err, code = run_cli([sys.executable, "-c", script], dict(os.environ), brief)
    assert code == 0 and out == brief and err == f"said {len(brief)}\n"
    echoed = capfd.readouterr().err
    assert echoed.startswith("line 0 of the brief\n") and f"said {len(brief)}\n" in echoed


def test_a_cli_without_stdin_reads_nothing_and_its_exit_code_is_kept() -> None:
    out, err, code = run_cli(
        [sys.executable, "-c", "import sys; print(repr(sys.stdin.read())); sys.exit(7)"], {}, None
    )
    assert (out, err, code) == ("''\n", "", 7)


def test_the_cli_gets_the_signals_python_ignores_back_at_their_defaults() -> None:
    """As with ``subprocess``: a CLI whose reader went away dies of SIGPIPE instead of looping on EPIPE."""
    out, _, code = run_cli(["/bin/cat", "/proc/self/status"], {}, None)
    ignored = int(next(line for line in out.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    assert code == 0
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1))


def test_a_cli_that_cannot_start_raises_and_leaks_no_pipe(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError):
        run_cli([str(tmp_path / "missing")], {}, "brief")
    assert len(os.listdir("/proc/self/fd")) == before


def test_the_clis_home_is_removed_with_its_links_never_followed(tmp_path: Path) -> None:
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
