"""The run spec, ``crucible.toml`` (docs/spec.md), as frozen, validated pydantic models.

A spec is read once, at the edge (CLI, API), and everything downstream gets typed values: seconds instead
of ``"20m"``, bytes instead of ``"20GB"``, a Tolerance instead of ``"5%"``. Nothing starts on a bad spec, so
every problem becomes one ``SpecError`` whose key is the dotted TOML path of the first offending value
(``metric.samples``, ``component[1].name``) and whose message a person can act on.

Python attribute names differ from TOML keys only where TOML arrays of tables read better in the singular:
``[[component]]`` is ``Spec.components``, ``[[agent.knob]]`` is ``AgentSpec.knobs`` and ``[[metric.guard]]``
is ``MetricSpec.guards``. TOML must use the singular; Python code may construct models with either.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    JsonValue,
    ValidationError,
    model_validator,
)

from controller.config.agent import AgentSpec, KnobSpec, PriceSpec
from controller.config.broker import BrokerSpec
from controller.config.fields import (
    MAX_COST_USD,
    MAX_FAILURES,
    MAX_INTERVAL_S,
    MAX_RETRIES,
    MAX_ROUNDS,
    MAX_SAMPLES,
    MAX_TOKENS,
    MAX_TURNS,
    MAX_WALL_CLOCK_S,
    MAX_WARMUPS,
    CommandTimeout,
    ComponentName,
    ForgeRepo,
    Globs,
    Interval,
    MetricName,
    NonBlank,
    PlainGlob,
    Size,
    Tol,
)
from controller.config.model import _KeyedError, _Model
from controller.config.publish import PublishSpec
from controller.config.units import Tolerance, duration_value, toml_repr
from controller.domain.enums import Direction
from controller.domain.errors import NotFoundError, SpecError

__all__ = ["AgentSpec", "KnobSpec", "PriceSpec", "Spec", "load_spec", "parse_spec"]

FINGERPRINT_VERSION = 1
MAX_SPEC_BYTES = 1 << 20  # a crucible.toml is a page of settings; 60 MB of it is an attack or a mistake


def _host_path(value: str) -> str:
    if not (value.startswith("/") or value == "~" or value.startswith("~/")):
        raise ValueError(f"must be an absolute path or start with ~/, got {json.dumps(value)}")
    if ".." in value.split("/"):
        raise ValueError(f"must not contain a '..' segment, got {json.dumps(value)}")
    return value


HostPath = Annotated[str, AfterValidator(_host_path)]


class SandboxSpec(_Model):
    """Where agent, validation and metric commands run (docs/agent.md)."""

    mode: Literal["auto", "bwrap", "none"] = "auto"
    network: bool = True
    # Paths shown read-only inside the sandbox besides what it finds itself (toolchains, programs);
    # whether each exists and stays clear of the credentials is checked where the run starts.
    readonly: list[HostPath] = Field(default_factory=list, max_length=100)

    def readonly_paths(self, home: Path) -> list[Path]:
        """``readonly`` with ``~`` expanded against ``home`` (the controller's home directory)."""
        return [
            home / entry[2:] if entry.startswith("~/") else home if entry == "~" else Path(entry)
            for entry in self.readonly
        ]


class GuardSpec(_Model):
    """A secondary metric that may not regress by more than ``tolerance``."""

    name: MetricName
    direction: Annotated[Direction, Field(strict=False)]
    tolerance: Tol = Tolerance(0.0, relative=False)


class MetricSpec(_Model):
    """The benchmark and the keep rule's thresholds (docs/keep-rule.md)."""

    command: NonBlank
    name: MetricName
    direction: Annotated[Direction, Field(strict=False)] = Direction.MINIMIZE
    samples: int = Field(default=5, ge=1, le=MAX_SAMPLES)
    min_samples: int = Field(default=3, ge=2, le=MAX_SAMPLES)
    sequential: bool = True
    warmups: int = Field(default=1, ge=0, le=MAX_WARMUPS)
    min_improvement: float = Field(default=0.0, ge=0)
    confidence: float = Field(default=0.95, ge=0, lt=1)
    interleave: bool = True
    timeout: CommandTimeout = 600.0
    guards: list[GuardSpec] = Field(default_factory=list, alias="guard")

    @model_validator(mode="after")
    def _distinct_names(self) -> MetricSpec:
        # The default first look (3) is capped at a smaller ``samples``; one the user wrote is checked.
        if self.sequential and "min_samples" in self.model_fields_set and self.min_samples > self.samples:
            raise _KeyedError(
                ("min_samples",), f"must be <= samples ({self.samples}) when sequential measurement is on"
            )
        seen = {self.name}
        for index, guard in enumerate(self.guards):
            if guard.name in seen:
                what = "the metric's own name" if guard.name == self.name else "a duplicate guard name"
                raise _KeyedError(("guard", index, "name"), f"{guard.name!r} is {what}")
            seen.add(guard.name)
        return self


class ValidationSpec(_Model):
    """A command that must pass before a candidate is measured."""

    command: NonBlank
    retries: int = Field(default=1, ge=0, le=MAX_RETRIES)
    timeout: CommandTimeout = 900.0


class BudgetSpec(_Model):
    """Limits that stop a run; ``None`` means unlimited."""

    wall_clock: Annotated[float, BeforeValidator(duration_value), Field(gt=0, le=MAX_WALL_CLOCK_S)] | None = (
        None
    )
    cost_usd: Annotated[float, Field(gt=0, le=MAX_COST_USD)] | None = None
    tokens: Annotated[int, Field(gt=0, le=MAX_TOKENS)] | None = None
    disk: Size | None = None
    max_consecutive_failures: int = Field(default=5, ge=1, le=MAX_FAILURES)
    target: float | None = None


class ComponentSpec(_Model):
    """One git repository taking part in the run, and the surface the agent may change in it."""

    name: ComponentName
    repo: NonBlank
    base: NonBlank = "HEAD"
    mutable: Globs = Field(default_factory=lambda: ["**"], min_length=1)
    protected: Globs = Field(default_factory=list)
    upstream: ForgeRepo | None = None
    fork: ForgeRepo | None = None

    @model_validator(mode="after")
    def _fork_needs_upstream(self) -> ComponentSpec:
        if self.fork is not None and self.upstream is None:
            raise _KeyedError(("fork",), "a fork needs an upstream to open PRs against")
        return self

    def is_local(self) -> bool:
        """False for git URLs (``https://…``, ``file://…``, ``git@host:path``), told apart as git does."""
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", self.repo):
            return False
        head, colon, _ = self.repo.partition(":")
        return not (colon and "/" not in head)

    def repo_path(self, spec_dir: Path) -> Path:
        """The absolute local repository path; relative paths resolve against the spec's directory."""
        if not self.is_local():
            raise ValueError(f"component {self.name!r} has a remote repo: {self.repo}")
        return (spec_dir / Path(self.repo).expanduser()).resolve()


class WorkspaceSpec(_Model):
    """Ignored caches that survive a restored turn."""

    keep_ignored: list[PlainGlob] = Field(default_factory=lambda: [".venv", "target", "node_modules"])


class FeedbackSpec(_Model):
    """How review feedback on published PRs turns into refinement rounds (docs/github.md)."""

    poll_interval: Interval = 30.0
    turns: int = Field(default=3, ge=1, le=MAX_TURNS)
    hold: Tol = Tolerance(0.01, relative=True)
    quiet_window: Annotated[float, BeforeValidator(duration_value), Field(ge=0, le=MAX_INTERVAL_S)] = 90.0
    max_rounds: int = Field(default=5, ge=1, le=MAX_ROUNDS)
    trusted_bots: list[NonBlank] = Field(default_factory=list)
    on_foreign_push: Literal["adopt", "pause"] = "adopt"


class Spec(_Model):
    """A whole run spec. ``spec_dir`` is not read from TOML: the loader sets it to the file's directory."""

    objective: NonBlank
    turns: int = Field(default=10, ge=0, le=MAX_TURNS)
    agent: AgentSpec
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    metric: MetricSpec
    validation: ValidationSpec | None = None
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    components: list[ComponentSpec] = Field(alias="component", min_length=1)
    publish: PublishSpec | None = None
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec)
    feedback: FeedbackSpec | None = None
    broker: BrokerSpec = Field(default_factory=BrokerSpec)
    spec_dir: Path

    @model_validator(mode="after")
    def _components_resolve(self) -> Spec:
        seen: set[str] = set()  # casefolded: worktree directories are named after components
        for index, component in enumerate(self.components):
            if component.name.casefold() in seen:
                message = f"duplicate component name {component.name!r}"
                raise _KeyedError(("component", index, "name"), message)
            seen.add(component.name.casefold())
        for index, component in enumerate(self.components):
            path = component.repo_path(self.spec_dir) if component.is_local() else None
            if path is not None and not path.is_dir():
                raise _KeyedError(("component", index, "repo"), f"no such directory: {path}")
        return self

    @model_validator(mode="after")
    def _parallel_can_keep(self) -> Spec:
        """With N parallel hypotheses the keep rule tests at Holm's levels, the first (1 - confidence)/N
        (ADR-0016): too few samples per side make even a candidate better in every sample fail it."""
        n, metric = self.broker.parallel, self.metric
        if n == 1 or metric.confidence == 0 or metric.samples < 3:  # no test runs: the medians decide
            return self
        first = float(1 - Decimal(repr(metric.confidence))) / n
        if 1 / math.comb(2 * metric.samples, metric.samples) > first:
            needed = next((k for k in range(metric.samples, 200) if 1 / math.comb(2 * k, k) <= first), 200)
            message = (
                f"with metric.samples = {metric.samples} no hypothesis can ever be kept: the smallest "
                f"p-value of {metric.samples} vs {metric.samples} samples is above Holm's first level "
                f"{first:.3g} ((1 - confidence) / {n}); raise metric.samples to at least {needed}"
            )
            raise _KeyedError(("broker", "parallel"), message)
        return self

    def component(self, name: str) -> ComponentSpec:
        """The component called ``name``; NotFoundError if there is none."""
        for component in self.components:
            if component.name == name:
                return component
        raise NotFoundError(f"no component named {name!r}")

    def fingerprint(self) -> str:
        """sha256 over what decides outcomes; ``resume`` refuses a run whose spec fingerprint changed.

        Left out on purpose: the objective (steer text), turns, budgets, publishing, workspace caches and
        feedback settings, which change how long or where a run goes, not what counts as better.
        """
        decided: dict[str, JsonValue] = {
            "version": FINGERPRINT_VERSION,
            "agent": self.agent.model_dump(mode="json", include=_AGENT_KEYS[self.agent.preset is None]),
            "sandbox": self.sandbox.model_dump(mode="json"),
            "metric": self.metric.model_dump(mode="json"),
            "validation": self.validation.model_dump(mode="json") if self.validation else None,
            "components": [
                c.model_dump(mode="json", include={"name", "repo", "base", "mutable", "protected"})
                for c in self.components
            ],
        }
        if self.broker.parallel != 1:  # N hypotheses change the keep rule (Holm over N, ADR-0016)
            decided["parallel"] = self.broker.parallel
        canonical = json.dumps(decided, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# The agent keys that change what a turn proposes. A preset's keys are added only for a preset, so the
# fingerprint of every spec without one is what it was before presets existed (``resume`` still works).
_AGENT_KEYS = {
    True: {"command", "builtin", "seed", "knobs"},
    False: {"preset", "model", "base_url", "args"},
}


# ------------------------------------------------------------------------------------------------- loading


def parse_spec(text: str, spec_dir: Path, *, repos: Mapping[str, Path] | None = None) -> Spec:
    """Parse and validate spec text; relative local repo paths resolve against ``spec_dir``.
    ``repos``: component name -> the repository to use instead of the one the spec names (the
    worker's clones: the spec's own paths are the controller host's and need not exist here)."""
    if len(text) > MAX_SPEC_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_SPEC_BYTES:
        raise SpecError("", f"the spec is larger than {MAX_SPEC_BYTES // 1024} KiB")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError("", _toml_message(exc)) from None
    if "spec_dir" in data:
        raise SpecError("spec_dir", "unknown key")
    components = data.get("component")
    if repos and isinstance(components, list):
        for table in components:
            if isinstance(table, dict) and table.get("name") in repos:
                table["repo"] = str(repos[table["name"]])
    try:
        return Spec.model_validate({**data, "spec_dir": spec_dir.resolve()}, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise _spec_error(exc) from None


def load_spec(path: Path) -> Spec:
    """Read and validate a spec file; its directory anchors relative repo paths."""
    if not path.is_file():
        raise SpecError("", f"no such spec file: {path}")
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise SpecError("", f"{path} is larger than {MAX_SPEC_BYTES // 1024} KiB")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError("", f"{path} is not UTF-8 text: {exc.reason}") from None
    return parse_spec(text, path.resolve().parent)


def _toml_message(exc: tomllib.TOMLDecodeError) -> str:
    """``Invalid value (at line 3, column 9)`` -> ``line 3, column 9: invalid value (not valid TOML)``."""
    match = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", str(exc))
    if match is None:
        return f"not valid TOML: {exc}"
    reason, line, column = match.groups()
    return f"line {line}, column {column}: {reason[:1].lower()}{reason[1:]} (not valid TOML)"


# ------------------------------------------------------------------------------------------- error messages

_TYPE_NAMES = {"int": "an integer", "float": "a number", "bool": "true or false", "string": "a string"}
_TYPE_NAMES |= {"list": "an array", "model": "a table", "dict": "a table"}
_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than": "<", "less_than_equal": "<="}


def _spec_error(exc: ValidationError) -> SpecError:
    """One SpecError for the first problem (TOML key, human message); the others follow in the message."""
    problems = [(_key(error), _message(error)) for error in exc.errors(include_url=False)]
    key, message = problems[0]
    others = [f"{k}: {m}" if k else m for k, m in problems[1:6]]
    if others:
        message += f" (also: {'; '.join(others)}{'; …' if len(problems) > 6 else ''})"
    return SpecError(key, message)


def _key(error: Mapping[str, Any]) -> str:
    cause = error.get("ctx", {}).get("error")
    loc = (*error["loc"], *(cause.path if isinstance(cause, _KeyedError) else ()))
    key = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for a bad dict key; the key itself precedes it
            continue
        key += f"[{part}]" if isinstance(part, int) else f".{part}" if key else str(part)
    return key


def _message(error: Mapping[str, Any]) -> str:
    kind, ctx, got = error["type"], error.get("ctx", {}), toml_repr(error.get("input"))
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "unknown key" + _suggestion(error["loc"])
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])
    if kind in _BOUNDS:  # ctx holds the one bound: {"ge": 1}
        bound = next(iter(ctx.values()))
        shown = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f"must be {_BOUNDS[kind]} {shown}"
    if kind in ("too_short", "string_too_short") and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in ("literal_error", "enum"):
        return f"must be {str(ctx['expected']).replace(chr(39), chr(34))}, got {got}"
    if kind == "finite_number":
        return "must be a finite number"
    for prefix, name in _TYPE_NAMES.items():
        if kind.startswith(prefix + "_"):
            return f"expected {name}, got {got}"
    return str(error["msg"])


def _suggestion(loc: tuple[str | int, ...]) -> str:
    """`` (did you mean 'samples'?)`` for a misspelt key, from the keys the enclosing table accepts."""
    model: type[BaseModel] | None = Spec
    for part in loc[:-1]:
        if isinstance(part, str) and model is not None:
            model = _table_model(model, part)
    if model is None:
        return ""
    keys = [field.alias or name for name, field in model.model_fields.items() if name != "spec_dir"]
    close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _table_model(model: type[BaseModel], key: str) -> type[BaseModel] | None:
    """The model behind table ``key`` of ``model``, through ``list[...]`` and ``... | None``."""
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            for candidate in (field.annotation, *get_args(field.annotation)):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    return candidate
    return None
