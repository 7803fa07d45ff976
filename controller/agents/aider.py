"""aider (PyPI ``aider-chat``), run with ``--message-file`` and ``--yes-always`` as the turn's command.

Measured with the real aider (0.86) against a scripted endpoint: it speaks OpenAI chat completions
(``POST …/chat/completions``, streamed) through litellm, **without tools**: the model writes edit blocks
(SEARCH/REPLACE in the ``diff`` format) that aider parses and applies. A block on a file that is not yet
in its chat makes aider add the file and ask again; the second answer is applied. Left alone it would:

- commit each edit, and commit a dirty tree first (``--no-auto-commits --no-dirty-commits``);
- add ``.aider*`` to the repository's ``.gitignore`` (``--no-gitignore``) and write its chat and input
  histories into the checkout (both go to its private ``HOME``);
- fetch litellm's model price list from GitHub, twice: litellm itself at import
  (``LITELLM_LOCAL_MODEL_COST_MAP=True`` keeps the copy it ships) and aider's model-info cache when it is
  empty or a day old (a fresh, non-empty cache file under ``HOME`` stops that; models litellm ships
  still get their context sizes and prices);
- check for updates and send analytics (``--no-check-update --analytics-disable``);
- write a placeholder git identity into the checkout's ``.git/config`` when git has none (read-only in
  the sandbox: aider crashes); its private ``HOME`` has one in ``.gitconfig``.

It never runs a shell command it suggests (``--yes-always`` does not cover those), so the sandbox changes
nothing in what it may do. Three things no flag of aider's does are the controller's (``turn``, ADR-0039,
which replaced the launcher of crucible's that ran around aider): its ``git add`` of a new file goes to a
scratch index (``git_scratch``); the ``.aider.tags.cache.v4`` folder it keeps in the repository root,
with no option to put it elsewhere, is removed after it (``litter``: no part of any change, and outside
every ``mutable`` glob); and its usage is read from its analytics log in the turn's folder (``outputs``):
``--analytics-log`` works with analytics disabled and logs each model call's exact tokens and cost, where
the console shows rounded figures (``2.5k sent``) among what the model wrote. What it reports: tokens
and, for a model whose price it knows, dollars, summed over its calls. It **exits 0 when every model call
failed** (after about two minutes of retries for a refused connection): a turn with no model answer
fails here, as does an edit it skipped ("Skipping edits to …": a file it was not allowed to create or
change, ``--dry-run``).

With ``agent.base_url`` it talks to that OpenAI-compatible endpoint (``--openai-api-base``), and a
model named without a provider gets litellm's ``openai/`` one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from controller.agents.base import (
    NOTHING,
    Invocation,
    Preset,
    Report,
    Settings,
    Usage,
    exit_failure,
    telling_line,
)

PROMPT_FILE = "crucible-brief.md"
USAGE_LOG = "aider-analytics.jsonl"  # in the turn's folder: the controller reads it after the exit
TAGS_CACHE_GLOB = ".aider.tags.cache.v*"
# Aider's model-info cache: fresh and non-empty, it is used instead of a download.
MODEL_INFO_CACHE = ".aider/caches/model_prices_and_context_window.json"
# Without a git identity aider writes a placeholder one into the checkout's .git/config (read-only in the
# sandbox: it crashes); one in its private HOME's global config is read instead.
GIT_IDENTITY = "[user]\n\tname = crucible agent\n\temail = agent@crucible.invalid\n"
MODEL_INFO_PLACEHOLDER: dict[str, dict[str, object]] = {"crucible-offline-placeholder": {}}
QUIET_FLAGS = (
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-gitignore",
    "--analytics-disable",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-show-model-warnings",
    "--no-detect-urls",
    "--disable-playwright",
    "--no-suggest-shell-commands",
    "--no-pretty",
    "--no-fancy-input",
    "--encoding",
    "utf-8",
)
SKIPPED = (
    re.compile(r"^Skipping edits to (.+?)(?: that matches gitignore spec)?\.?$"),
    re.compile(r"^Did not apply edit to (.+?) \(--dry-run\)$"),
    re.compile(r"^Unable to create (.+?), skipping edits\.?$"),
)
PLACEHOLDER_HYPOTHESIS = "<what this change tries"


def usage_summary(log: str) -> dict[str, float]:
    """Model calls, tokens and dollars summed over the ``message_send`` events of aider's analytics log."""
    calls = input_tokens = output_tokens = 0
    usd = 0.0
    for line in log.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict) or event.get("event") != "message_send":
            continue
        properties = event.get("properties")
        if not isinstance(properties, dict):
            properties = {}
        calls += 1
        input_tokens += int(_number(properties.get("prompt_tokens")))
        output_tokens += int(_number(properties.get("completion_tokens")))
        usd += _number(properties.get("cost"))
    return {"calls": calls, "input_tokens": input_tokens, "output_tokens": output_tokens, "usd": usd}


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def hypothesis_line(stdout: str) -> str | None:
    """The last ``HYPOTHESIS:`` line the model wrote (aider prints its answers on stdout)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("HYPOTHESIS:") and PLACEHOLDER_HYPOTHESIS not in line:
            return line
    return None


def skipped_edits(stdout: str) -> list[str]:
    """The files aider said it would not edit."""
    found = []
    for line in stdout.splitlines():
        for pattern in SKIPPED:
            match = pattern.match(line.strip())
            if match:
                found.append(match.group(1))
    return found


def model_name(settings: Settings) -> str | None:
    """``agent.model``, with litellm's ``openai/`` provider when a base URL is set and it names none."""
    if settings.model and settings.base_url and "/" not in settings.model:
        return f"openai/{settings.model}"
    return settings.model


class Aider(Preset):
    name = "aider"
    title = "aider"
    program = "aider"
    install = "pipx install aider-chat  (or: python -m pip install aider-chat)"
    keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY")
    wire = (
        "OpenAI chat completions (POST /chat/completions, streamed) or the model provider's, through litellm"
    )
    example_model = "gpt-4o"  # for ``crucible init --agent``
    example_base_url = "http://127.0.0.1:8000/v1"
    outputs = (USAGE_LOG,)
    git_scratch = True
    litter = (TAGS_CACHE_GLOB,)

    def invocation(self, cli: str, prompt: str, settings: Settings) -> Invocation:
        home = settings.home
        usage_log = (settings.folder or home) / USAGE_LOG
        argv = [cli, "--message-file", str(home / PROMPT_FILE)]
        argv += [*QUIET_FLAGS, "--analytics-log", str(usage_log)]
        argv += ["--input-history-file", str(home / ".aider.input.history")]
        argv += ["--chat-history-file", str(home / ".aider.chat.history.md")]
        model = model_name(settings)
        if model:
            argv += ["--model", model]
        if settings.base_url:
            argv += ["--openai-api-base", settings.base_url]
        argv += list(settings.args)
        files = {
            PROMPT_FILE: prompt,
            MODEL_INFO_CACHE: json.dumps(MODEL_INFO_PLACEHOLDER) + "\n",
            ".gitconfig": GIT_IDENTITY,
        }
        return Invocation(argv=argv, env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"}, files=files)

    def report(self, stdout: str, stderr: str, returncode: int, files: Mapping[str, str] = NOTHING) -> Report:
        said = hypothesis_line(stdout)
        sums = usage_summary(files.get(USAGE_LOG, ""))
        usage: tuple[Usage, ...] = ()
        if sums["input_tokens"] or sums["output_tokens"]:
            usd = sums["usd"] or None  # 0: aider knows no price for the model
            usage = (Usage(None, int(sums["input_tokens"]), int(sums["output_tokens"]), usd),)
        if returncode != 0:
            return Report(said, usage, exit_failure(self.title, returncode, stderr, stdout))
        if not sums["calls"]:
            problem = telling_line(stdout) or telling_line(stderr) or "no answer"
            return Report(said, usage, f"{self.title} got no answer from its model: {problem}")
        skipped = skipped_edits(stdout)
        if skipped:
            listed = ", ".join(skipped[:5]) + (" …" if len(skipped) > 5 else "")
            return Report(said, usage, f"{self.title} was not allowed to edit ({listed})")
        return Report(said, usage, None)
