"""The commented ``crucible.toml`` that ``crucible init`` writes for the repository it stands in.

The template is a spec ``parse_spec`` accepts as it stands, so a user can run ``crucible loop --dry-run``
straight away and then edit. Optional sections are written commented out with their defaults: lines that
start with ``#`` directly followed by TOML (``#[validation]``) are settings to enable by deleting the ``#``;
lines that start with ``# `` are prose. A test enables every such line at once and parses the result, so the
template cannot drift from the spec it documents.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

_TEMPLATE = """\
# crucible.toml: what to improve, how to measure it, and what the agent may change.
# Check it with: crucible loop --dry-run
# Bounds (anything beyond is refused as a typo): turns and feedback.turns <= 100000; metric.samples
# <= 1000 (min_samples too), warmups <= 100; validation.retries <= 10; agent, metric and validation
# timeouts <= 168h; budget.wall_clock <= 8784h, cost_usd <= 1000000, tokens <= 1000000000000, disk <= 1000TB,
# max_consecutive_failures <= 10000; feedback.poll_interval and quiet_window <= 24h, max_rounds <= 1000;
# agent.seed 0 .. 2^63-1. The file itself may be at most 1 MiB.
objective = "Describe what to improve, e.g. cut the p50 latency of the request router"
turns = 10                       # turns in round 0 (crucible loop --turns N overrides)

[agent]
# Any program, run in the workspace; it reads its brief from $CRUCIBLE_CANDIDATE.
command = "my-agent --prompt-file \\"$CRUCIBLE_CANDIDATE\\""
timeout = "20m"
env_allow = []                   # secret-looking variables the agent may see, e.g. ["OPENAI_API_KEY"]
# Instead of command, builtin = "knobs" walks declared knobs deterministically from a seed:
# builtin = "knobs"
# seed = 7
# [[agent.knob]]
# file = "config/cache.toml"     # TOML, YAML or JSON file inside a mutable path
# key = "cache.size_mb"          # dotted path of a scalar
# values = [64, 128, 256, 512]   # or: range = [min, max, step]

[sandbox]                        # where agent, validation and metric commands run
mode = "auto"                    # auto (bubblewrap when installed) | bwrap | none
network = true                   # false: commands get no network

[metric]
command = "python bench.py"      # must print METRIC <name>=<number> lines
name = "score"
direction = "minimize"           # minimize | maximize
samples = 5                      # measured runs per side (the maximum when sequential); warmups are extra
sequential = true                # decide after each interleaved pair: keep, reject, or measure another
min_samples = 3                  # sequential: the first look (pairs per side)
warmups = 1
min_improvement = 0.0            # absolute; the improvement must be strictly greater
confidence = 0.95                # significance required to keep; 0 disables the test
interleave = true                # re-measure the champion beside each candidate
timeout = "10m"

# Secondary metrics that may not regress:
#[[metric.guard]]
#name = "rss_mb"
#direction = "minimize"
#tolerance = "5%"                # "N%" relative or a plain absolute number

# A command that must pass before a candidate is measured:
#[validation]
#command = "pytest -q"
#retries = 1
#timeout = "15m"

[budget]                         # a run stops at the first limit it reaches
#wall_clock = "4h"
#cost_usd = 50                   # summed from the agent's COST lines
#tokens = 2_000_000
#disk = "20GB"                   # worktrees, logs and artifacts of this run
max_consecutive_failures = 5
#target = 80.0                   # stop when the champion reaches it

[[component]]
name = {name}
repo = "."                       # local path or git URL
# base: the ref resolved to the base sha at run start
base = {base}
mutable = ["**"]                 # the agent may change only these (gitignore-style globs)
# a later "!glob" excludes what earlier globs matched: ["src/**", "!src/generated/**"]
protected = []                   # never, even if mutable matches; the evaluator is protected implicitly
# upstream: the forge repository PRs target (needed for --publish-prs);
# fork (optional): push branches there and open PRs from it
#upstream = "owner/{bare}"
#fork = "bot/{bare}"

# Needed for --publish-prs:
#[publish]
#forge = "https://api.github.com"
# How the pull requests fit your review process (each applied when a PR is opened, kept on updates):
#labels = ["performance"]        # at most 50 characters each
#reviewers = []                  # GitHub logins without "@"; requested once
#team_reviewers = []             # team slugs without the organization
#assignees = []
#title = "crucible: {{objective}} ({{metric}} {{baseline}} → {{value}}) [{{component}}]"
#commit_message = "crucible: {{hypothesis}}"   # also {{turn}}, {{improvement}}, {{run_id}}, ...
#conventional = false            # true: "perf(<component>): ..." titles and commit headers
#signoff = false                 # true: a DCO Signed-off-by trailer for the author below
#author = {{ name = "Perf Bot", email = "perf-bot@example.com" }}   # crucible's commits' identity
#status = "auto"                 # the result as a check run (GitHub App) or commit status; "off"

[workspace]
keep_ignored = [".venv", "target", "node_modules"]   # ignored caches kept across turns
# Every other ignored file is removed before measuring; the agent may not change these (no "!" here).

# Needed for --watch-feedback:
#[feedback]
#poll_interval = "30s"
#turns = 3                       # turns per refinement round
#hold = "1%"                     # a refinement may not be worse than the PR's score by more than this
#quiet_window = "90s"            # lone comments are batched until this much quiet
#max_rounds = 5
#trusted_bots = []               # bot logins allowed to steer, besides writers of the repo
#on_foreign_push = "adopt"       # adopt (build later results on a person's push) | pause (stop writing)

# Where rounds run: local processes (the default) or one Kubernetes Job per round:
#[broker]
#kind = "kubernetes"             # local | kubernetes
#image = "ghcr.io/acme/{bare}-loop:1"   # crucible's image plus your toolchain and agent
#namespace = "crucible"           # default: the controller's own namespace
#resources = {{ requests = {{ cpu = "1", memory = "2Gi" }}, limits = {{ cpu = "2", memory = "4Gi" }} }}
#node_selector = {{}}
#tolerations = []                # e.g. [{{ key = "gpu", operator = "Exists", effect = "NoSchedule" }}]
#agent_secret = "loop-agent"     # a Secret whose keys become agent env, filtered by agent.env_allow
#parallel = 1                    # hypotheses tried at once per turn, each in its own pod
#deadline = "24h"                # the most one round's pod may run
#ttl = "1h"                      # how long a finished Job is kept
"""


def component_name(directory: Path) -> str:
    """A valid component name from a directory name: accents dropped, other characters become ``-``."""
    ascii_name = unicodedata.normalize("NFKD", directory.name).encode("ascii", "ignore").decode()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_name)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)
    return name or "repo"


def current_branch(repo: Path) -> str | None:
    """The branch ``repo`` has checked out, read from its HEAD file without running git; None if detached."""
    git = repo / ".git"
    try:
        if git.is_file():  # a linked worktree or submodule: ".git" says where the real git dir is
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (repo / pointer.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def render_template(repo: Path, agent_table: str | None = None) -> str:
    """A commented ``crucible.toml`` for ``repo``, valid as written (with placeholder commands).
    ``agent_table``: the ``[agent]`` table to write instead of the placeholder command's (``crucible init
    --agent NAME``: ``controller.agents.template``)."""
    resolved = repo.resolve()
    name = component_name(resolved)
    text = _TEMPLATE.format(
        name=_toml_string(name),
        base=_toml_string(current_branch(resolved) or "HEAD"),
        bare=name,
    )
    if agent_table is not None:
        start, end = text.index("[agent]\n"), text.index("[sandbox]")
        text = text[:start] + agent_table.rstrip("\n") + "\n\n" + text[end:]
    return text


def _toml_string(text: str) -> str:
    """A TOML basic string; JSON's escapes are a subset of TOML's."""
    return json.dumps(text, ensure_ascii=False)
