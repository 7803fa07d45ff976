"""The run spec: a full example, defaults, every key's validation and the error naming its key."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pydantic
import pytest
import tomlkit

from controller.config.spec import (
    MAX_SPEC_BYTES,
    AgentSpec,
    ComponentSpec,
    KnobSpec,
    Spec,
    load_spec,
    parse_spec,
)
from controller.config.units import Tolerance
from controller.domain.enums import Direction
from controller.domain.errors import NotFoundError, SpecError
from controller.engine.policy import check_paths

# A spec that sets every table (the example the spec reference, docs/spec.md, grew from).
FULL_EXAMPLE = r"""
objective = "Cut p50 latency of the router"   # required; goes to the agent verbatim
turns = 10                                     # turns in round 0 (CLI --turns overrides)

[agent]
command = "my-agent --prompt-file \"$CRUCIBLE_CANDIDATE\""   # any program, run in the workspace
timeout = "20m"
env_allow = ["OPENAI_API_KEY"]   # variables the agent may see although they look like secrets
# builtin = "knobs"              # instead of command: the built-in deterministic proposer (section 4)
# seed = 7
# [[agent.knob]]
# file = "config/cache.toml"     # TOML, YAML or JSON file inside a mutable path
# key = "cache.size_mb"          # dotted path of a scalar
# values = [64, 128, 256, 512]   # or: range = [min, max, step]

[sandbox]                        # where agent, validation and metric commands run
mode = "auto"                    # auto (bubblewrap when installed) | bwrap | none
network = true                   # false: commands get no network

[metric]
command = "python bench.py"      # prints METRIC <name>=<number> lines
name = "p50_ms"
direction = "minimize"           # minimize | maximize
samples = 5                      # measured runs per side; warmups are extra and discarded
warmups = 1
min_improvement = 0.0            # absolute; the improvement must be strictly greater
confidence = 0.95                # significance required to keep (section 5); 0 disables the test
interleave = true                # re-measure the champion beside each candidate (section 5)
timeout = "10m"

[[metric.guard]]                 # secondary metrics that may not regress
name = "rss_mb"
direction = "minimize"
tolerance = "5%"                 # "N%" relative or a plain absolute number

[validation]
command = "pytest -q"
retries = 1
timeout = "15m"

[budget]
wall_clock = "4h"
cost_usd = 50                    # summed from the agent's COST lines
tokens = 2_000_000               # likewise
disk = "20GB"                    # worktrees, logs and artifacts of this run under CRUCIBLE_HOME
max_consecutive_failures = 5
target = 80.0                    # optional: stop when the champion reaches it

[[component]]
name = "router"
repo = "."                       # local path or git URL
base = "main"                    # ref resolved to the base sha at run start
mutable = ["src/**"]             # the agent may change only these (gitignore-style globs)
protected = ["bench.py", "tests/**"]   # never, even if mutable matches; the evaluator is protected implicitly
upstream = "acme/router"         # the forge repository PRs target (needed for --publish-prs)
fork = "acme-bot/router"         # optional: push branches here and open PRs from it

[publish]                        # needed for --publish-prs
forge = "https://api.github.com" # or a GitHub Enterprise / local forge API URL

[workspace]
keep_ignored = [".venv", "target", "node_modules"]   # ignored caches kept across turns; all other ignored files
                                 # a turn creates or changes are removed when it is restored

[feedback]                       # needed for --watch-feedback
poll_interval = "30s"            # the poller; without --listen it is the only feedback path
turns = 3                        # turns per refinement round
hold = "1%"                      # a refinement may not be worse than the PR's score by more than this
quiet_window = "90s"             # lone comments are batched until this much quiet
max_rounds = 5
trusted_bots = []                # bot logins allowed to steer, besides writers of the repo
on_foreign_push = "adopt"        # adopt | pause (section 7)

[broker]                         # where rounds run (section 8)
kind = "local"                   # local (embedded default) | kubernetes
image = "ghcr.io/acme/router-loop:1"   # kubernetes: crucible's image plus the project's toolchain and agent
namespace = "crucible-loops"
resources = { cpu = "2", memory = "4Gi" }
node_selector = {}
tolerations = []
agent_secret = "router-agent"    # a Secret whose keys become agent env, filtered by agent.env_allow
parallel = 1                     # hypotheses tried at once per turn, each in its own pod (section 5)
"""  # noqa: E501 - verbatim

DELETE = object()
KNOB = {"file": "config/cache.toml", "key": "cache.size_mb", "values": [64, 128]}


def minimal() -> dict[str, Any]:
    return {
        "objective": "go faster",
        "agent": {"command": "agent"},
        "metric": {"command": "python bench.py", "name": "ms"},
        "component": [{"name": "app", "repo": "."}],
    }


def knobs_agent() -> dict[str, Any]:
    return {"builtin": "knobs", "knob": [dict(KNOB)]}


def edited(doc: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    """A deep copy of ``doc`` with ``path`` set to ``value`` (removed for DELETE); creates what is missing."""
    doc = copy.deepcopy(doc)
    node: Any = doc
    for part, following in itertools.pairwise(path):
        if isinstance(node, dict):
            node = node.setdefault(part, [] if isinstance(following, int) else {})
        else:
            node = node[part]
    last = path[-1]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list) and last == len(node):
        node.append(value)
    else:
        node[last] = value
    return doc


def parse(doc: dict[str, Any], spec_dir: Path) -> Spec:
    return parse_spec(tomlkit.dumps(doc), spec_dir)


def spec_error(doc: dict[str, Any], spec_dir: Path) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse(doc, spec_dir)
    return caught.value


# ------------------------------------------------------------------------------------------- valid specs


def test_the_design_example_parses(tmp_path: Path) -> None:
    spec = parse_spec(FULL_EXAMPLE, tmp_path)
    assert spec.objective == "Cut p50 latency of the router"
    assert spec.agent.command == 'my-agent --prompt-file "$CRUCIBLE_CANDIDATE"'
    assert spec.agent.timeout == 1200.0
    assert spec.metric.timeout == 600.0
    assert spec.metric.direction is Direction.MINIMIZE
    assert spec.metric.guards[0].tolerance == Tolerance(0.05, relative=True)
    assert spec.validation is not None and spec.validation.timeout == 900.0
    assert spec.budget.wall_clock == 14400.0
    assert spec.budget.cost_usd == 50.0
    assert spec.budget.tokens == 2_000_000
    assert spec.budget.disk == 20_000_000_000
    assert spec.budget.target == 80.0
    (component,) = spec.components
    assert (component.name, component.base, component.fork) == ("router", "main", "acme-bot/router")
    assert component.mutable == ["src/**"] and component.protected == ["bench.py", "tests/**"]
    assert component.repo_path(spec.spec_dir) == tmp_path.resolve()
    assert spec.publish is not None and spec.publish.forge == "https://api.github.com"
    assert spec.feedback is not None
    assert spec.feedback.hold == Tolerance(0.01, relative=True)
    assert (spec.feedback.poll_interval, spec.feedback.quiet_window) == (30.0, 90.0)
    assert spec.spec_dir == tmp_path.resolve()
    assert (spec.broker.kind, spec.broker.image, spec.broker.parallel) == (
        "local",
        "ghcr.io/acme/router-loop:1",
        1,
    )
    assert spec.broker.resources.requests == spec.broker.resources.limits == {"cpu": "2", "memory": "4Gi"}


def test_defaults_of_a_minimal_spec(tmp_path: Path) -> None:
    spec = parse(minimal(), tmp_path)
    assert spec.turns == 10
    assert (spec.agent.builtin, spec.agent.timeout, spec.agent.env_allow, spec.agent.seed) == (
        None,
        1200.0,
        [],
        0,
    )
    assert (spec.sandbox.mode, spec.sandbox.network) == ("auto", True)
    metric = spec.metric
    assert (metric.direction, metric.samples, metric.warmups) == (Direction.MINIMIZE, 5, 1)
    assert (metric.min_improvement, metric.confidence, metric.interleave, metric.timeout) == (
        0.0,
        0.95,
        True,
        600.0,
    )
    assert metric.guards == []
    assert spec.validation is None and spec.publish is None and spec.feedback is None
    assert spec.budget.model_dump() == {
        "wall_clock": None,
        "cost_usd": None,
        "tokens": None,
        "disk": None,
        "max_consecutive_failures": 5,
        "target": None,
    }
    assert spec.components[0].base == "HEAD"
    assert spec.components[0].mutable == ["**"]
    assert spec.workspace.keep_ignored == [".venv", "target", "node_modules"]


def test_optional_tables_get_their_defaults(tmp_path: Path) -> None:
    doc = minimal() | {"validation": {"command": "pytest"}, "feedback": {}}
    doc["metric"]["guard"] = [{"name": "rss", "direction": "maximize"}]
    spec = parse(doc, tmp_path)
    assert spec.validation is not None and (spec.validation.retries, spec.validation.timeout) == (1, 900.0)
    assert spec.feedback is not None
    assert (spec.feedback.turns, spec.feedback.max_rounds, spec.feedback.on_foreign_push) == (3, 5, "adopt")
    assert spec.metric.guards[0].tolerance == Tolerance(0.0, relative=False)
    assert spec.metric.guards[0].direction is Direction.MAXIMIZE


def test_relative_repos_resolve_against_the_spec_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "spec" / "code").mkdir(parents=True)
    (tmp_path / "spec" / "crucible.toml").write_text(
        tomlkit.dumps(edited(minimal(), ("component", 0, "repo"), "code"))
    )
    monkeypatch.chdir(tmp_path)
    spec = load_spec(Path("spec/crucible.toml"))
    assert spec.spec_dir == (tmp_path / "spec").resolve()
    assert spec.components[0].repo_path(spec.spec_dir) == (tmp_path / "spec" / "code").resolve()


def test_load_spec_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "crucible.toml")
    assert caught.value.key == ""
    assert caught.value.message == f"no such spec file: {tmp_path / 'crucible.toml'}"


def test_load_spec_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "crucible.toml"
    path.write_bytes(b'objective = "\xff"\n')
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(path)


def test_toml_syntax_errors_give_the_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec('objective = "x"\n[metric\nname = "y"\n', tmp_path)
    assert caught.value.key == ""
    assert caught.value.message.startswith("line 2, ")
    assert "not valid TOML" in caught.value.message


@pytest.mark.parametrize("repo", ["https://github.com/acme/router.git", "git@github.com:acme/router.git"])
def test_remote_repos_are_not_checked_on_disk(tmp_path: Path, repo: str) -> None:
    spec = parse(edited(minimal(), ("component", 0, "repo"), repo), tmp_path)
    assert not spec.components[0].is_local()
    with pytest.raises(ValueError, match="remote"):
        spec.components[0].repo_path(tmp_path)


@pytest.mark.parametrize(
    ("repo", "local"),
    [
        (".", True),
        ("../other", True),
        ("/srv/repos/router", True),
        ("./dir:with:colons", True),
        ("https://github.com/acme/router.git", False),
        ("ssh://git@host/acme/router.git", False),
        ("file:///srv/repos/router", False),
        ("git@github.com:acme/router.git", False),
        ("host:acme/router.git", False),
    ],
)
def test_is_local_tells_paths_from_urls_as_git_does(repo: str, local: bool) -> None:
    assert ComponentSpec(name="c", repo=repo).is_local() is local


def test_component_lookup(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    doc = edited(minimal(), ("component", 1), {"name": "lib", "repo": "b"})
    spec = parse(doc, tmp_path)
    assert spec.component("lib").repo == "b"
    with pytest.raises(NotFoundError):
        spec.component("nope")


def test_models_are_frozen(tmp_path: Path) -> None:
    spec = parse(minimal(), tmp_path)
    with pytest.raises(pydantic.ValidationError):
        spec.turns = 3  # type: ignore[misc]
    assert spec.model_copy(update={"turns": 3}).turns == 3


def test_python_code_may_use_attribute_names(tmp_path: Path) -> None:
    knob = KnobSpec(file="a.json", key="k", values=[1, 2])
    agent = AgentSpec(builtin="knobs", knobs=[knob])
    assert agent.knobs == [knob]
    assert agent.model_dump(by_alias=True)["knob"][0]["file"] == "a.json"


# ------------------------------------------------------------------------------------------------- knobs


@pytest.mark.parametrize(
    ("knob", "candidates"),
    [
        ({"values": ["lru", "lfu", True, 1.5]}, ["lru", "lfu", True, 1.5]),
        ({"range": [64, 256, 64]}, [64, 128, 192, 256]),
        ({"range": [1, 10, 4]}, [1, 5, 9]),
        ({"range": [0.1, 0.3, 0.1]}, [0.1, 0.2, 0.3]),
        ({"range": [0, 1, 0.5]}, [0.0, 0.5, 1.0]),
        ({"range": [3, 3, 1]}, [3]),
    ],
)
def test_knob_candidates(tmp_path: Path, knob: dict[str, Any], candidates: list[object]) -> None:
    doc = edited(minimal(), ("agent",), {"builtin": "knobs", "knob": [{"file": "c.yaml", "key": "k"} | knob]})
    result = parse(doc, tmp_path).agent.knobs[0].candidates()
    assert result == candidates
    assert [type(v) for v in result] == [type(v) for v in candidates]


# ------------------------------------------------------------------------------------------------ errors

ERRORS: list[tuple[tuple[str | int, ...], object, str, str]] = [
    (("objective",), "", "objective", "must not be empty"),
    (("objective",), "   ", "objective", "must not be empty"),
    (("objective",), DELETE, "objective", "is required"),
    (("objective",), 3, "objective", "expected a string, got 3"),
    (("turns",), -1, "turns", "must be >= 0"),
    (("turns",), "ten", "turns", 'expected an integer, got "ten"'),
    (("turns",), 1.5, "turns", "expected an integer, got 1.5"),
    (("agent",), DELETE, "agent", "is required"),
    (("agent",), "claude", "agent", 'expected a table, got "claude"'),
    (("agent", "command"), "", "agent.command", "must not be empty"),
    (("agent", "command"), " \t", "agent.command", "must not be empty"),
    (("agent", "command"), DELETE, "agent.command", "set agent.command or agent.builtin"),
    (("agent", "builtin"), "knobs", "agent.builtin", "not both"),
    (("agent", "builtin"), "magic", "agent.builtin", 'must be "knobs", got "magic"'),
    (("agent", "preset"), "cursor", "agent.preset", 'unknown preset "cursor"; the presets are claude-code'),
    (("agent", "preset"), "codex", "agent.preset", "set agent.command or agent.preset, not both"),
    (("agent", "model"), "gpt-5", "agent.model", "is used only with agent.preset"),
    (("agent", "args"), ["--x"], "agent.args", "is used only with agent.preset"),
    (("agent", "base_url"), "api.openai.com", "agent.base_url", "must be an http:// or https:// URL"),
    (("agent", "prices"), {"m": {"input": -1, "output": 1}}, "agent.prices.m.input", "must be >= 0"),
    (("agent", "prices"), {"m": {"input": 1}}, "agent.prices.m.output", "is required"),
    (("agent", "timeout"), "20 minutes", "agent.timeout", "expected a duration"),
    (("agent", "timeout"), 0, "agent.timeout", "must be > 0"),
    (("agent", "timeout"), -5, "agent.timeout", "must not be negative"),
    (("agent", "env_allow"), "KEY", "agent.env_allow", 'expected an array, got "KEY"'),
    (("agent", "env_allow"), ["A", ""], "agent.env_allow[1]", "must not be empty"),
    (("agent", "seed"), "7", "agent.seed", 'expected an integer, got "7"'),
    (("agent", "knob"), [KNOB], "agent.knob", 'only with builtin = "knobs"'),
    (("sandbox", "mode"), "docker", "sandbox.mode", 'must be "auto", "bwrap" or "none", got "docker"'),
    (("sandbox", "network"), "yes", "sandbox.network", 'expected true or false, got "yes"'),
    (("sandbox", "network"), 1, "sandbox.network", "expected true or false, got 1"),
    (("sandbox", "readonly"), "/opt/x", "sandbox.readonly", 'expected an array, got "/opt/x"'),
    (
        ("sandbox", "readonly"),
        ["/opt", "data"],
        "sandbox.readonly[1]",
        'must be an absolute path or start with ~/, got "data"',
    ),
    (
        ("sandbox", "readonly"),
        ["~root/x"],
        "sandbox.readonly[0]",
        'must be an absolute path or start with ~/, got "~root/x"',
    ),
    (("sandbox", "readonly"), ["/opt/../root"], "sandbox.readonly[0]", "must not contain a '..' segment"),
    (("metric",), DELETE, "metric", "is required"),
    (("metric", "command"), "  ", "metric.command", "must not be empty"),
    (("metric", "command"), DELETE, "metric.command", "is required"),
    (("metric", "name"), "p50 ms", "metric.name", "without spaces"),
    (("metric", "name"), "a=b", "metric.name", "without spaces or '='"),
    (("metric", "direction"), "up", "metric.direction", 'must be "minimize" or "maximize", got "up"'),
    (("metric", "samples"), 0, "metric.samples", "must be >= 1"),
    (("metric", "samples"), "five", "metric.samples", 'expected an integer, got "five"'),
    (("metric", "warmups"), -1, "metric.warmups", "must be >= 0"),
    (("metric", "min_improvement"), -0.1, "metric.min_improvement", "must be >= 0"),
    (("metric", "min_improvement"), "1", "metric.min_improvement", 'expected a number, got "1"'),
    (("metric", "confidence"), 1.0, "metric.confidence", "must be < 1"),
    (("metric", "confidence"), -0.1, "metric.confidence", "must be >= 0"),
    (("metric", "confidence"), float("nan"), "metric.confidence", "must be a finite number"),
    (("metric", "interleave"), "no", "metric.interleave", "expected true or false"),
    (("metric", "timeout"), "soon", "metric.timeout", 'got "soon"'),
    (("metric", "guard"), {"name": "x"}, "metric.guard", "expected an array"),
    (("metric", "guard", 0), {"name": "ms", "direction": "minimize"}, "metric.guard[0].name", "own name"),
    (("metric", "guard", 0), {"name": "rss"}, "metric.guard[0].direction", "is required"),
    (
        ("metric", "guard", 0),
        {"name": "rss", "direction": "minimize", "tolerance": "-5%"},
        "metric.guard[0].tolerance",
        "must not be negative",
    ),
    (
        ("metric", "guard", 0),
        {"name": "rss", "direction": "minimize", "tolerance": "lots"},
        "metric.guard[0].tolerance",
        'expected a tolerance like "5%" or a plain number, got "lots"',
    ),
    (("validation",), {}, "validation.command", "is required"),
    (("validation", "command"), "", "validation.command", "must not be empty"),
    (("validation",), {"command": "t", "retries": -1}, "validation.retries", "must be >= 0"),
    (("validation",), {"command": "t", "timeout": "1 week"}, "validation.timeout", "expected a duration"),
    (("budget", "wall_clock"), "forever", "budget.wall_clock", "expected a duration"),
    (("budget", "wall_clock"), 0, "budget.wall_clock", "must be > 0"),
    (("budget", "cost_usd"), 0, "budget.cost_usd", "must be > 0"),
    (("budget", "cost_usd"), float("inf"), "budget.cost_usd", "must be a finite number"),
    (("budget", "tokens"), 0, "budget.tokens", "must be > 0"),
    (("budget", "tokens"), 1.5, "budget.tokens", "expected an integer, got 1.5"),
    (("budget", "disk"), "20 parsecs", "budget.disk", 'expected a size like "500MB"'),
    (("budget", "disk"), "0GB", "budget.disk", "must be > 0"),
    (("budget", "max_consecutive_failures"), 0, "budget.max_consecutive_failures", "must be >= 1"),
    (("budget", "target"), "high", "budget.target", 'expected a number, got "high"'),
    (("component",), DELETE, "component", "is required"),
    (("component",), [], "component", "must not be empty"),
    (("component", 0, "name"), "-app", "component[0].name", "letters, digits"),
    (("component", 0, "name"), "my app", "component[0].name", 'got "my app"'),
    (("component", 0, "name"), DELETE, "component[0].name", "is required"),
    (("component", 1), {"name": "app", "repo": "."}, "component[1].name", "duplicate component name 'app'"),
    (("component", 1), {"name": "APP", "repo": "."}, "component[1].name", "duplicate component name 'APP'"),
    (("component", 0, "repo"), "", "component[0].repo", "must not be empty"),
    (("component", 0, "repo"), "missing", "component[0].repo", "no such directory: "),
    (("component", 0, "base"), "", "component[0].base", "must not be empty"),
    (("component", 0, "mutable"), [], "component[0].mutable", "must not be empty"),
    (("component", 0, "mutable"), "src/**", "component[0].mutable", "expected an array"),
    (("component", 0, "mutable"), ["src/**", ""], "component[0].mutable[1]", "must not be empty"),
    (("component", 0, "mutable"), ["../x/**"], "component[0].mutable[0]", "'..' segment"),
    (("component", 0, "mutable"), ["src/../../x"], "component[0].mutable[0]", "'..' segment"),
    (("component", 0, "mutable"), ["/etc/**"], "component[0].mutable[0]", "relative to the repository root"),
    (("component", 0, "protected"), ["!../x"], "component[0].protected[0]", "'..' segment"),
    (("component", 0, "protected"), [3], "component[0].protected[0]", "expected a string, got 3"),
    (("component", 0, "upstream"), "acme", "component[0].upstream", '"owner/name"'),
    (("component", 0, "fork"), "bot/app", "component[0].fork", "needs an upstream"),
    (("publish",), {}, "publish.forge", "is required"),
    (("publish", "forge"), "ftp://example.com", "publish.forge", "http:// or https:// URL"),
    (("workspace", "keep_ignored"), ["../cache"], "workspace.keep_ignored[0]", "'..' segment"),
    (("feedback", "poll_interval"), "often", "feedback.poll_interval", "expected a duration"),
    (("feedback", "turns"), 0, "feedback.turns", "must be >= 1"),
    (("feedback", "hold"), "-1%", "feedback.hold", "must not be negative"),
    (("feedback", "quiet_window"), -1, "feedback.quiet_window", "must not be negative"),
    (("feedback", "max_rounds"), 0, "feedback.max_rounds", "must be >= 1"),
    (("feedback", "trusted_bots"), "bot", "feedback.trusted_bots", "expected an array"),
    (("feedback", "on_foreign_push"), "merge", "feedback.on_foreign_push", 'must be "adopt" or "pause"'),
]


@pytest.mark.parametrize(("path", "value", "key", "fragment"), ERRORS)
def test_errors_name_the_key(
    tmp_path: Path, path: tuple[str | int, ...], value: object, key: str, fragment: str
) -> None:
    error = spec_error(edited(minimal(), path, value), tmp_path)
    assert error.key == key
    assert fragment in error.message
    assert str(error).startswith(f"{key}: ")


def test_missing_repo_error_names_the_resolved_path(tmp_path: Path) -> None:
    error = spec_error(edited(minimal(), ("component", 0, "repo"), "nope"), tmp_path)
    assert error.message == f"no such directory: {tmp_path.resolve() / 'nope'}"


def test_duplicate_guard_names(tmp_path: Path) -> None:
    guards = [{"name": "rss", "direction": "minimize"}, {"name": "rss", "direction": "maximize"}]
    error = spec_error(edited(minimal(), ("metric", "guard"), guards), tmp_path)
    assert (error.key, error.message) == ("metric.guard[1].name", "'rss' is a duplicate guard name")


KNOB_ERRORS: list[tuple[object, str, str]] = [
    ([], "agent.knob", "needs at least one [[agent.knob]]"),
    ([{"file": "c.toml", "key": "k"}], "agent.knob[0].values", "set values or range"),
    ([KNOB | {"range": [1, 2, 1]}], "agent.knob[0].range", "not both"),
    ([KNOB | {"values": []}], "agent.knob[0].values", "must not be empty"),
    ([KNOB | {"values": [1, [2]]}], "agent.knob[0].values[1]", "expected a number, string or boolean"),
    ([KNOB | {"values": [{"a": 1}]}], "agent.knob[0].values[0]", "got a table"),
    ([{"file": "c.toml", "key": "k", "range": [1, 2]}], "agent.knob[0].range", "[min, max, step]"),
    ([{"file": "c.toml", "key": "k", "range": [1, 2, "x"]}], "agent.knob[0].range", "three numbers"),
    ([{"file": "c.toml", "key": "k", "range": [1, 5, 0]}], "agent.knob[0].range", "step must be > 0"),
    ([{"file": "c.toml", "key": "k", "range": [5, 1, 1]}], "agent.knob[0].range", "min must be <= max"),
    ([{"file": "c.toml", "key": "k", "range": [0, 1e9, 1]}], "agent.knob[0].range", "more than 10000"),
    ([KNOB | {"file": "/etc/c.toml"}], "agent.knob[0].file", "relative to the repository root"),
    ([KNOB | {"file": "../c.toml"}], "agent.knob[0].file", "'..' segment"),
    ([KNOB | {"file": "config.ini"}], "agent.knob[0].file", ".toml, .yaml, .yml, .json"),
    ([KNOB | {"key": ""}], "agent.knob[0].key", "a dotted key"),
    ([KNOB | {"key": "cache..size"}], "agent.knob[0].key", "a dotted key"),
    ([KNOB | {"key": 3}], "agent.knob[0].key", "expected a string"),
    ([KNOB, KNOB], "agent.knob[1].key", "duplicate knob config/cache.toml:cache.size_mb"),
    ([KNOB | {"valeus": [1]}], "agent.knob[0].valeus", "unknown key (did you mean 'values'?)"),
]


@pytest.mark.parametrize(("knobs", "key", "fragment"), KNOB_ERRORS)
def test_knob_errors_name_the_key(tmp_path: Path, knobs: object, key: str, fragment: str) -> None:
    doc = edited(minimal(), ("agent",), {"builtin": "knobs", "knob": knobs})
    error = spec_error(doc, tmp_path)
    assert error.key == key
    assert fragment in error.message


@pytest.mark.parametrize(
    ("path", "key", "suggestion"),
    [
        (("objectiv",), "objectiv", "objective"),
        (("spec_dir",), "spec_dir", None),
        (("components",), "components", "component"),
        (("agent", "comand"), "agent.comand", "command"),
        (("agent", "knobs"), "agent.knobs", "knob"),
        (("sandbox", "net"), "sandbox.net", None),
        (("metric", "sampels"), "metric.sampels", "samples"),
        (("metric", "guards"), "metric.guards", "guard"),
        (("validation", "retry"), "validation.retry", "retries"),
        (("budget", "wallclock"), "budget.wallclock", "wall_clock"),
        (("component", 0, "mutables"), "component[0].mutables", "mutable"),
        (("publish", "url"), "publish.url", None),
        (("workspace", "keep"), "workspace.keep", None),
        (("feedback", "pollinterval"), "feedback.pollinterval", "poll_interval"),
    ],
)
def test_unknown_keys_at_every_level(
    tmp_path: Path, path: tuple[str | int, ...], key: str, suggestion: str | None
) -> None:
    doc = edited(minimal() | {"validation": {"command": "t"}, "publish": {"forge": "https://x"}}, path, 1)
    error = spec_error(doc, tmp_path)
    assert error.key == key
    assert error.message.startswith("unknown key")
    if suggestion:
        assert f"(did you mean '{suggestion}'?)" in error.message


def test_unknown_key_in_a_guard(tmp_path: Path) -> None:
    doc = edited(minimal(), ("metric", "guard"), [{"name": "rss", "direction": "minimize", "tol": "5%"}])
    error = spec_error(doc, tmp_path)
    assert (error.key, error.message) == ("metric.guard[0].tol", "unknown key")


def test_several_errors_report_the_first_key_and_list_the_rest(tmp_path: Path) -> None:
    doc = edited(edited(minimal(), ("metric", "samples"), 0), ("metric", "warmups"), -1)
    error = spec_error(doc, tmp_path)
    assert error.key == "metric.samples"
    assert error.message == "must be >= 1 (also: metric.warmups: must be >= 0)"


# ------------------------------------------------------------------------------------------- fingerprint

# minimal(), written differently: other order, spacing, comments and unit spellings, and a different
# objective, turn count, agent timeout and budget, none of which decide outcomes.
REWRITTEN = """
turns = 99
objective = "something else entirely"

[[component]]
protected = []
repo   =   "."        # same repo
name = "app"

[metric]
name = "ms"
command = "python bench.py"
timeout = "10m"
min_improvement = 0

[agent]
timeout = "1h"
command = "agent"

[budget]
wall_clock = "4h"
"""


def fingerprint(doc: dict[str, Any], spec_dir: Path) -> str:
    return parse(doc, spec_dir).fingerprint()


def test_fingerprint_is_a_sha256_hex(tmp_path: Path) -> None:
    value = fingerprint(minimal(), tmp_path)
    assert len(value) == 64 and int(value, 16) >= 0


def test_fingerprint_ignores_key_order_whitespace_comments_and_unit_spelling(tmp_path: Path) -> None:
    assert parse_spec(REWRITTEN, tmp_path).fingerprint() == fingerprint(minimal(), tmp_path)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("agent", "command"), "other-agent"),
        (("agent", "seed"), 7),
        (("sandbox", "network"), False),
        (("sandbox", "readonly"), ["/opt/data"]),
        (("metric", "command"), "python bench2.py"),
        (("metric", "name"), "p99"),
        (("metric", "direction"), "maximize"),
        (("metric", "samples"), 9),
        (("metric", "min_improvement"), 0.5),
        (("metric", "confidence"), 0.9),
        (("metric", "interleave"), False),
        (("metric", "guard"), [{"name": "rss", "direction": "minimize", "tolerance": "5%"}]),
        (("validation",), {"command": "pytest"}),
        (("component", 0, "base"), "main"),
        (("component", 0, "mutable"), ["src/**"]),
        (("component", 0, "protected"), ["bench.py"]),
        (("component", 0, "name"), "app2"),
    ],
)
def test_fingerprint_changes_with_what_decides_outcomes(
    tmp_path: Path, path: tuple[str | int, ...], value: object
) -> None:
    assert fingerprint(edited(minimal(), path, value), tmp_path) != fingerprint(minimal(), tmp_path)


def test_fingerprint_changes_with_a_guard_tolerance(tmp_path: Path) -> None:
    guard = {"name": "rss", "direction": "minimize", "tolerance": "5%"}
    base = edited(minimal(), ("metric", "guard"), [guard])
    looser = edited(minimal(), ("metric", "guard"), [guard | {"tolerance": "6%"}])
    absolute = edited(minimal(), ("metric", "guard"), [guard | {"tolerance": 0.05}])
    assert len({fingerprint(d, tmp_path) for d in (base, looser, absolute)}) == 3


def test_fingerprint_changes_with_a_knob(tmp_path: Path) -> None:
    first = edited(minimal(), ("agent",), knobs_agent())
    second = edited(first, ("agent", "knob", 0, "values"), [64, 256])
    assert fingerprint(first, tmp_path) != fingerprint(second, tmp_path)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("objective",), "something else"),
        (("turns",), 50),
        (("agent", "timeout"), "2h"),
        (("budget",), {"wall_clock": "8h", "cost_usd": 5, "tokens": 10, "disk": "1GB", "target": 3.0}),
        (("publish",), {"forge": "https://ghe.example.com/api/v3"}),
        (("workspace", "keep_ignored"), []),
        (("feedback",), {"turns": 9, "hold": "3%"}),
        (("component", 0, "upstream"), "acme/app"),
    ],
)
def test_fingerprint_ignores_what_does_not_decide_outcomes(
    tmp_path: Path, path: tuple[str | int, ...], value: object
) -> None:
    assert fingerprint(edited(minimal(), path, value), tmp_path) == fingerprint(minimal(), tmp_path)


BOUNDS: list[tuple[tuple[str | int, ...], object, str, str]] = [
    (("metric", "samples"), 100_000_000_000, "metric.samples", "must be <= 1000"),
    (("metric", "warmups"), 101, "metric.warmups", "must be <= 100"),
    (("turns",), 100_001, "turns", "must be <= 100000"),
    (("agent", "timeout"), "99999999999999h", "agent.timeout", "must be <= 604800"),
    (("metric", "timeout"), "169h", "metric.timeout", "must be <= 604800"),
    (("agent", "seed"), -1, "agent.seed", "must be >= 0"),
    (("budget", "wall_clock"), "9000h", "budget.wall_clock", "must be <= 31622400"),
    (("budget", "tokens"), 10**13, "budget.tokens", "must be <= 1000000000000"),
    (("budget", "disk"), "2000TB", "budget.disk", "must be <= 1000000000000000"),
    (("budget", "max_consecutive_failures"), 10**6, "budget.max_consecutive_failures", "must be <= 10000"),
    (("component", 0, "mutable"), ["!src/**"], "component[0].mutable", "first pattern cannot be a negation"),
    (("component", 0, "protected"), ["!a"], "component[0].protected", "first pattern cannot be a negation"),
    (("workspace", "keep_ignored"), ["!.venv"], "workspace.keep_ignored[0]", "negation is not supported"),
]


@pytest.mark.parametrize(("path", "value", "key", "fragment"), BOUNDS)
def test_numbers_durations_and_globs_are_bounded(
    tmp_path: Path, path: tuple[str | int, ...], value: object, key: str, fragment: str
) -> None:
    # issue 11 §4: samples = 100000000000, timeout = "99999999999999h" and mutable = ["!src/**"] passed.
    error = spec_error(edited(minimal(), path, value), tmp_path)
    assert (error.key, fragment in error.message) == (key, True), error


def test_negation_after_a_pattern_is_supported(tmp_path: Path) -> None:
    spec = parse(edited(minimal(), ("component", 0, "mutable"), ["src/**", "!src/gen/**"]), tmp_path)
    verdict = check_paths(["src/a.py", "src/gen/b.py"], mutable=spec.components[0].mutable, protected=[])
    assert verdict.violations == ("src/gen/b.py: outside mutable",)


def test_a_spec_over_the_size_cap_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    text = tomlkit.dumps(minimal()) + "# padding\n" * (MAX_SPEC_BYTES // 10)
    with pytest.raises(SpecError, match="larger than 1024 KiB"):
        parse_spec(text, tmp_path)
    big = tmp_path / "crucible.toml"
    big.write_text(text)
    with pytest.raises(SpecError, match="larger than 1024 KiB"):
        load_spec(big)


def test_sandbox_readonly_expands_the_home(tmp_path: Path) -> None:
    doc = minimal()
    doc["sandbox"] = {"readonly": ["~", "~/data/set", "/opt/tools"]}
    spec = parse_spec(tomlkit.dumps(doc), tmp_path)

    home = Path("/home/dev")
    assert spec.sandbox.readonly_paths(home) == [home, home / "data" / "set", Path("/opt/tools")]
