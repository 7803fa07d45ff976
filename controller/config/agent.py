"""The ``[agent]`` table of ``crucible.toml``: what proposes changes.

Three kinds, exactly one per spec: ``command`` (any program, docs/agent.md), ``preset`` (a coding-agent
CLI crucible knows how to drive headless: ``controller.agents``), or ``builtin = "knobs"`` (the deterministic
walker over ``[[agent.knob]]``). The preset names live here, below the agents package, so the spec can refuse
an unknown one with the list of known ones; ``controller.agents.registry`` has one preset per name (a test
holds them equal).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from controller.config.fields import MAX_SEED, CommandTimeout, NonBlank, inside_repo, matching
from controller.config.model import _KeyedError, _Model
from controller.config.units import toml_repr

PRESET_NAMES = ("claude-code", "codex", "aider", "gemini", "qwen-code")
MAX_KNOB_CANDIDATES = 10_000  # a range that expands to more is almost certainly a typo in its step
KNOB_FILE_SUFFIXES = (".toml", ".yaml", ".yml", ".json")
MAX_PRICE_PER_MTOK = 10_000.0  # USD per million tokens; far above any model's list price


def _knob_file(path: str) -> str:
    if not path.endswith(KNOB_FILE_SUFFIXES):
        raise ValueError(f"must be a {', '.join(KNOB_FILE_SUFFIXES)} file, got {json.dumps(path)}")
    return inside_repo(path)


def _knob_scalar(value: object) -> object:
    if not isinstance(value, int | float | str | bool):
        raise ValueError(f"expected a number, string or boolean, got {toml_repr(value)}")
    return value


def _range_triple(value: object) -> object:
    if value is None:
        return None
    items = list(value) if isinstance(value, list | tuple) else []
    if len(items) != 3 or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
        raise ValueError(f"expected [min, max, step] (three numbers), got {toml_repr(value)}")
    return tuple(items)


def _not_crucibles(name: str) -> str:
    """``CRUCIBLE_*`` is crucible's own configuration (API tokens, the forge credential, the webhook
    secret, the database URL): no spec may hand it to the agent, whoever wrote the spec."""
    if name.upper().startswith("CRUCIBLE_"):
        raise ValueError(
            f"{json.dumps(name)}: CRUCIBLE_* variables are crucible's own and never reach the agent"
        )
    return name


def _known_preset(name: str) -> str:
    if name not in PRESET_NAMES:
        raise ValueError(f"unknown preset {json.dumps(name)}; the presets are {', '.join(PRESET_NAMES)}")
    return name


KnobValue = Annotated[int | float | str | bool, BeforeValidator(_knob_scalar)]
Number = int | float
PresetName = Annotated[str, AfterValidator(_known_preset)]
HttpUrl = Annotated[str, matching(r"https?://\S+", "an http:// or https:// URL")]
Price = Annotated[float, Field(ge=0, le=MAX_PRICE_PER_MTOK)]


class KnobSpec(_Model):
    """One scalar in a TOML/YAML/JSON file that ``builtin = "knobs"`` may set, and the values it may take."""

    file: Annotated[str, Field(min_length=1), AfterValidator(_knob_file)]
    key: Annotated[str, matching(r"[^.\s]+(\.[^.\s]+)*", 'a dotted key like "cache.size_mb"')]
    values: Annotated[list[KnobValue] | None, Field(min_length=1)] = None
    range: Annotated[tuple[Number, Number, Number] | None, BeforeValidator(_range_triple)] = None

    @model_validator(mode="after")
    def _one_source(self) -> KnobSpec:
        if self.values is None and self.range is None:
            raise _KeyedError(("values",), "set values or range = [min, max, step]")
        if self.values is not None and self.range is not None:
            raise _KeyedError(("range",), "set values or range, not both")
        if self.range is not None:
            low, high, step = self.range
            if step <= 0:
                raise _KeyedError(("range",), f"step must be > 0, got {step}")
            if low > high:
                raise _KeyedError(("range",), f"min must be <= max, got {low} > {high}")
            if (high - low) / step >= MAX_KNOB_CANDIDATES:
                raise _KeyedError(("range",), f"expands to more than {MAX_KNOB_CANDIDATES} values")
        return self

    def candidates(self) -> list[int | float | str | bool]:
        """The values, in order; a range counts from min by step up to max inclusive."""
        if self.values is not None:
            return list(self.values)
        assert self.range is not None  # guaranteed by _one_source
        low, high, step = (Decimal(str(v)) for v in self.range)
        count = int((high - low) / step) + 1
        if all(isinstance(v, int) for v in self.range):
            return [int(low + i * step) for i in range(count)]
        return [float(low + i * step) for i in range(count)]


class PriceSpec(_Model):
    """What one model costs, in USD per million tokens, for CLIs that report tokens but no money."""

    input: Price
    output: Price


# Keys that only a preset reads: set without one, they would be silently ignored.
_PRESET_ONLY = ("model", "base_url", "cli", "args", "prices")


class AgentSpec(_Model):
    """What proposes changes: a program (``command``), a coding-agent CLI (``preset``) or the knob walker."""

    command: NonBlank | None = None
    preset: PresetName | None = None
    builtin: Literal["knobs"] | None = None
    model: NonBlank | None = None
    base_url: HttpUrl | None = None
    cli: NonBlank | None = None
    args: list[str] = Field(default_factory=list)
    prices: dict[NonBlank, PriceSpec] = Field(default_factory=dict)
    timeout: CommandTimeout = 1200.0
    env_allow: list[Annotated[NonBlank, AfterValidator(_not_crucibles)]] = Field(default_factory=list)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    knobs: list[KnobSpec] = Field(default_factory=list, alias="knob")

    @model_validator(mode="after")
    def _one_proposer(self) -> AgentSpec:
        chosen = [key for key in ("command", "preset", "builtin") if getattr(self, key) is not None]
        if not chosen:
            raise _KeyedError(("command",), "set agent.command or agent.builtin (or agent.preset)")
        if len(chosen) > 1:
            first, second = chosen[:2]
            raise _KeyedError((second,), f"set agent.{first} or agent.{second}, not both")
        if self.preset is None:
            for key in _PRESET_ONLY:
                if key in self.model_fields_set:
                    raise _KeyedError((key,), f"is used only with agent.preset (got agent.{chosen[0]})")
        if self.builtin == "knobs" and not self.knobs:
            raise _KeyedError(("knob",), 'builtin = "knobs" needs at least one [[agent.knob]]')
        if self.builtin is None and self.knobs:
            raise _KeyedError(("knob",), 'knobs are used only with builtin = "knobs"')
        seen: set[tuple[str, str]] = set()
        for index, knob in enumerate(self.knobs):
            if (knob.file, knob.key) in seen:
                raise _KeyedError(("knob", index, "key"), f"duplicate knob {knob.file}:{knob.key}")
            seen.add((knob.file, knob.key))
        return self
