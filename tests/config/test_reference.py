"""docs/spec.md is generated from the spec models and stays in step with them."""

from __future__ import annotations

import tomllib
import typing
from pathlib import Path

import pytest
from pydantic import ConfigDict, TypeAdapter, ValidationError

from controller.config.reference import DOCS, keys, problems, render, scalar_keys
from controller.config.reference import main as write_reference

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "spec.md"


def test_every_key_and_table_is_documented_and_nothing_else() -> None:
    assert problems() == []


def test_docs_spec_md_is_the_rendered_reference() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render(), (
        "docs/spec.md is stale: regenerate it with `python -m controller.config.reference docs/spec.md`"
    )


def test_the_regeneration_command_writes_the_file(tmp_path: Path) -> None:
    assert write_reference([str(tmp_path / "spec.md")]) == 0
    assert (tmp_path / "spec.md").read_text(encoding="utf-8") == render()


@pytest.mark.parametrize("key", scalar_keys(), ids=lambda key: key.path)
def test_each_example_is_a_valid_value_of_its_key(key: typing.Any) -> None:
    _, example = DOCS[key.path]
    value = tomllib.loads(f"v = {example}")["v"]
    annotation = (
        typing.Annotated[(key.field.annotation, *key.field.metadata)]
        if key.field.metadata
        else (key.field.annotation)
    )
    config = ConfigDict(strict=True, allow_inf_nan=False)
    try:
        adapter = TypeAdapter(annotation, config=config)
    except Exception:  # a table type (a model) carries its own config
        adapter = TypeAdapter(annotation)
    adapter.validate_python(value)


def test_a_bad_example_would_be_caught() -> None:
    (samples,) = [key for key in keys() if key.path == "metric.samples"]
    adapter = TypeAdapter(typing.Annotated[(samples.field.annotation, *samples.field.metadata)])
    with pytest.raises(ValidationError):
        adapter.validate_python(0)


def test_defaults_and_bounds_come_from_the_models() -> None:
    text = render()
    assert "| `samples` | integer | `5` | ≥ 1, ≤ 1000 |" in text
    assert "| `confidence` | number | `0.95` | ≥ 0, < 1 |" in text
    assert '| `timeout` | duration (`"90s"`, `"20m"`, `"4h"` or seconds) | `"20m"` | > 0, ≤ "168h" |' in text
    assert "| `objective` | string | required |" in text
    assert "## `[[component]]`" in text and "## `[[metric.guard]]`" in text
