"""The user's reference for ``crucible.toml`` (``docs/spec.md``), generated from the pydantic models.

A hand-written reference drifts the day someone changes a default or a bound. Here the structure, every
key's type, default and bounds are read from the models in ``controller.config.spec``; only the prose and
an example value per key are written by hand, in ``DOCS`` beside this code. ``problems()`` lists every key
the models have and ``DOCS`` lacks (and the reverse), and a test fails on any, and when ``docs/spec.md``
differs from ``render()``. Regenerate with::

    python -m controller.config.reference docs/spec.md
"""

from __future__ import annotations

import sys
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from controller.config.broker import whole_seconds_value
from controller.config.reference_text import DOCS, EXAMPLE_INTRO, INTRO, SECTIONS
from controller.config.spec import Spec
from controller.config.template import render_template
from controller.config.units import Tolerance, duration_value, size_value, tolerance_value

# Not a real folder: the example must not depend on where the generator runs (``crucible init`` reads the
# branch a folder has checked out).
EXAMPLE_REPO = Path("/nonexistent-crucible-example/router")

__all__ = ["DOCS", "Key", "keys", "problems", "render", "scalar_keys"]


@dataclass(frozen=True)
class Key:
    """One key of the spec as the reference shows it: ``path`` is dotted (``metric.guard.tolerance``)."""

    path: str
    table: str  # "" for top-level keys, else the dotted table (``metric.guard``)
    array: bool  # the table is an array of tables (``[[metric.guard]]``)
    field: FieldInfo


def _name(name: str, field: FieldInfo) -> str:
    return field.alias or name


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model behind a table-valued annotation and whether it is an array of tables. A mapping of
    models (``agent.prices``: model name -> price) is one key, shown with an inline-table example."""
    if get_origin(annotation) is dict:
        return None, False
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate, False
        if get_origin(candidate) is list:
            inner, _ = _model_of(get_args(candidate)[0])
            if inner is not None:
                return inner, True
    return None, False


def keys(model: type[BaseModel] = Spec, table: str = "", array: bool = False) -> list[Key]:
    """Every key in document order: a table's scalar keys first, then its sub-tables."""
    scalars, tables = [], []
    for name, field in model.model_fields.items():
        if name == "spec_dir":  # set by the loader, never read from TOML
            continue
        path = f"{table}.{_name(name, field)}" if table else _name(name, field)
        sub, sub_array = _model_of(field.annotation)
        if sub is None:
            scalars.append(Key(path, table, array, field))
        else:
            tables.append(Key(path, table, array, field))
            tables += keys(sub, path, sub_array)
    return scalars + tables


def scalar_keys() -> list[Key]:
    """The keys that hold values (not tables): the rows of the reference."""
    return [key for key in keys() if _model_of(key.field.annotation)[0] is None]


# ------------------------------------------------------------------------------------------------- types


def _parts(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any], bool]:
    """``(base type, all constraint/validator metadata, optional)`` through ``Annotated`` and ``| None``."""
    optional = False
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(args) < len(get_args(annotation))
        if len(args) == 1:
            annotation = args[0]
    meta = list(metadata)
    while get_origin(annotation) is typing.Annotated:
        annotation, *extra = get_args(annotation)
        for item in extra:
            meta += item.metadata if isinstance(item, FieldInfo) else [item]
    return annotation, meta, optional


def _validator(meta: list[Any]) -> Any:
    return next((m.func for m in meta if isinstance(m, BeforeValidator)), None)


def _type_text(annotation: Any, meta: list[Any]) -> str:
    special = {
        duration_value: 'duration (`"90s"`, `"20m"`, `"4h"` or seconds)',
        whole_seconds_value: 'duration (`"90s"`, `"20m"`, `"4h"` or seconds), rounded up to whole seconds',
        size_value: 'size (`"500MB"`, `"20GB"`, `"1GiB"` or bytes)',
        tolerance_value: 'tolerance (`"5%"` relative, or an absolute number)',
    }
    if _validator(meta) in special:
        return special[_validator(meta)]
    if get_origin(annotation) is Literal:
        return " \\| ".join(f'`"{v}"`' for v in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " \\| ".join(f'`"{v.value}"`' for v in annotation)
    if get_origin(annotation) is list:
        inner, inner_meta, _ = _parts(get_args(annotation)[0], [])
        plural = {"string": "strings", "integer": "integers", "number": "numbers", "boolean": "booleans"}
        words = [plural.get(word, word) for word in _type_text(inner, inner_meta).split(" or ")]
        return "array of " + (", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0])
    if get_origin(annotation) is tuple:
        return "array `[min, max, step]` of numbers"
    if get_origin(annotation) is dict:
        return "table of strings"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in names:
        return names[annotation]
    args = [a for a in get_args(annotation) if a is not type(None)]
    if args and all(a in names for a in args):
        if {int, float} <= set(args):  # int | float is just a number to a reader
            names[int] = "number"
        return " or ".join(dict.fromkeys(names[a] for a in args))
    raise TypeError(f"no reference wording for the type {annotation!r}")


def _bounds_text(meta: list[Any]) -> str:
    words = []
    show: Any = {duration_value: _seconds, whole_seconds_value: _seconds, size_value: _bytes}.get(
        _validator(meta), str
    )
    for item in meta:
        if isinstance(item, annotated_types.Ge):
            words.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Gt):
            words.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Le):
            words.append(f"≤ {show(item.le)}")
        elif isinstance(item, annotated_types.Lt):
            words.append(f"< {item.lt}")
        elif isinstance(item, annotated_types.MinLen) and item.min_length:
            words.append("not empty" if item.min_length == 1 else f"at least {item.min_length} items")
        elif isinstance(item, annotated_types.MaxLen):
            words.append(f"at most {item.max_length} items")
    return ", ".join(words)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return f'"{value.value}"'
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Tolerance):
        return f'"{value}"' if value.relative else f"{value.value:g}"
    if isinstance(value, float):
        return f"{value:g}" if not value.is_integer() else f"{value:.1f}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _seconds(value: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if value >= size and value % size == 0:
            return f'"{value / size:g}{unit}"'
    return f'"{value:g}s"'


def _bytes(value: int) -> str:
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if value >= size and value % size == 0:
            return f'"{value // size}{unit}"'
    return str(value)


def _default_text(key: Key) -> str:
    field = key.field
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "all defaults"
    _, meta, _ = _parts(field.annotation, field.metadata)
    if _validator(meta) in (duration_value, whole_seconds_value) and isinstance(value, int | float):
        return f"`{_seconds(float(value))}`"
    return f"`{_toml(value)}`"


# ------------------------------------------------------------------------------------------------ checks


def problems() -> list[str]:
    """Keys the models have and DOCS lacks, DOCS entries for keys that no longer exist, tables without
    a section text."""
    tables = {key.path for key in keys() if _model_of(key.field.annotation)[0] is not None}
    paths = {key.path for key in keys()} - tables
    out = [f"{p}: no entry in DOCS (controller/config/reference_text.py)" for p in sorted(paths - set(DOCS))]
    out += [f"{p}: in DOCS but not a key of the spec" for p in sorted(set(DOCS) - paths)]
    out += [f"[{t}]: no entry in SECTIONS" for t in sorted(tables - set(SECTIONS))]
    out += [f"[{t}]: in SECTIONS but not a table of the spec" for t in sorted(set(SECTIONS) - tables)]
    return out


# ------------------------------------------------------------------------------------------------ render


def _heading(key: Key) -> str:
    bracket = ("[[{}]]" if _model_of(key.field.annotation)[1] else "[{}]").format(key.path)
    return f"## `{bracket}`"


def _row(key: Key) -> str:
    annotation, meta, _ = _parts(key.field.annotation, key.field.metadata)
    name = key.path.rsplit(".", 1)[-1]
    text, example = DOCS[key.path]
    cells = [
        f"`{name}`",
        _type_text(annotation, meta),
        _default_text(key),
        _bounds_text(meta),
        text.replace("|", "\\|"),
        f"`{name} = {example}`",
    ]
    return "| " + " | ".join(cells) + " |"


def render() -> str:
    """The whole of ``docs/spec.md``."""
    header = "| key | type | default | bounds | meaning | example |\n|---|---|---|---|---|---|"
    lines = [INTRO.strip(), "", "## Top-level keys", "", header]
    for key in keys():
        table = _model_of(key.field.annotation)[0]
        if table is None:
            lines.append(_row(key))
            continue
        lines += ["", _heading(key), "", SECTIONS[key.path].strip(), ""]
        if any(k.table == key.path and _model_of(k.field.annotation)[0] is None for k in keys()):
            lines.append(header)
    lines += ["", "## A complete example", "", EXAMPLE_INTRO.strip(), "", "```toml"]
    lines += [render_template(EXAMPLE_REPO).rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if problems():
        print("\n".join(problems()), file=sys.stderr)
        return 1
    if len(argv) != 1:
        print("usage: python -m controller.config.reference docs/spec.md", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
