"""Runs aider for the ``aider`` preset so that it leaves the checkout as it found it, apart from its edits.

``python -I -S -c '… from controller.agents.aider_launcher import main …' ROOT --usage-log F --scratch D
-- AIDER ARGS…`` (the argv the preset builds with ``base.helper_argv``: the turn's agent command) starts
aider in the workspace with three things done around it, each measured with the real aider (0.86) under
crucible's sandbox:

- **Its git writes go to a scratch index.** Aider ``git add``\\ s every file it creates, and the sandbox
  shows ``.git`` read-only: the ``add`` fails after the file was created empty, and the edit is lost.
  ``GIT_INDEX_FILE`` (a copy of the checkout's index) and ``GIT_OBJECT_DIRECTORY`` (an empty folder, the
  checkout's objects as its alternate) under ``D`` take those writes, so the new file gets its content
  and the checkout's ``.git`` stays untouched, with or without the sandbox.
- **Its repository-map cache is removed.** Aider keeps a ``.aider.tags.cache.v4`` folder in the
  repository root, with no option to put it elsewhere; one it created is deleted when it exits (it is
  no part of any change, and outside every ``mutable`` glob).
- **Its usage is printed last.** Aider logs each model call's tokens and cost, exactly, to the analytics
  log ``F`` (``--analytics-log`` works with analytics disabled); its console shows rounded figures
  (``2.5k sent``). After aider exited, the sums are printed as the last line of stdout, where nothing
  the model wrote can stand.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from controller.agents.aider import USAGE_PREFIX

TAGS_CACHE_GLOB = ".aider.tags.cache.v*"
GIT_TIMEOUT_S = 30.0


def git_scratch(workdir: Path, scratch: Path, environ: dict[str, str]) -> dict[str, str]:
    """The variables that send git's writes in ``workdir`` (index and new objects) into ``scratch``;
    {} when ``workdir`` is no git checkout (a composite workspace's root)."""
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--git-path", "index", "--git-path", "objects"],
            cwd=workdir,
            env=environ,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = found.stdout.splitlines()
    if found.returncode != 0 or len(lines) != 2:
        return {}
    index, objects = (workdir / line for line in lines)
    (scratch / "objects").mkdir(parents=True, exist_ok=True)
    if index.is_file():
        shutil.copyfile(index, scratch / "index")
    return {
        "GIT_INDEX_FILE": str(scratch / "index"),
        "GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects.resolve()),
    }


def usage_summary(log: Path) -> dict[str, float | int]:
    """Model calls, tokens and dollars summed over the ``message_send`` events of aider's analytics log."""
    calls = input_tokens = output_tokens = 0
    usd = 0.0
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict) or event.get("event") != "message_send":
            continue
        properties = event.get("properties") if isinstance(event.get("properties"), dict) else {}
        assert isinstance(properties, dict)
        calls += 1
        input_tokens += int(_number(properties.get("prompt_tokens")))
        output_tokens += int(_number(properties.get("completion_tokens")))
        usd += _number(properties.get("cost"))
    return {"calls": calls, "input_tokens": input_tokens, "output_tokens": output_tokens, "usd": usd}


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crucible-aider", description=__doc__.split("\n\n")[0])
    parser.add_argument("--usage-log", required=True, type=Path, help="aider's --analytics-log")
    parser.add_argument("--scratch", required=True, type=Path, help="a private folder for git's writes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- AIDER ARGS…")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("crucible-aider: no aider command given", file=sys.stderr)
        return 2
    workdir = Path.cwd()
    caches_before = set(workdir.glob(TAGS_CACHE_GLOB))
    environ = dict(os.environ)
    env = {**environ, **git_scratch(workdir, args.scratch, environ)}
    try:
        returncode = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, check=False).returncode
    except OSError as error:
        print(f"aider could not start ({command[0]}): {error.strerror or error}", file=sys.stderr)
        return 127
    finally:
        for cache in set(workdir.glob(TAGS_CACHE_GLOB)) - caches_before:
            shutil.rmtree(cache, ignore_errors=True)
    sys.stdout.flush()
    print(USAGE_PREFIX + json.dumps(usage_summary(args.usage_log)), flush=True)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
