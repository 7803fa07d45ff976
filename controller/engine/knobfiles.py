"""Read and write one scalar at a dotted key path in a TOML, YAML or JSON file.

The built-in ``knobs`` proposer (docs/agent.md) changes one configuration value per turn.
The diff it leaves must be the one-line change a reviewer expects, so each format is handled
with the least disturbance its library allows:

* TOML (``.toml``) through tomlkit: comments, ordering, spacing and line endings are kept byte
  for byte; only the value changes.
* JSON (``.json``) through the standard library: key order is kept, the indentation is
  detected (2 spaces when it cannot be), a one-line file stays on one line, and the trailing
  newline is kept. Spacing inside lines follows ``json.dumps``.
* YAML (``.yaml``/``.yml``) through PyYAML ``safe_load``/``safe_dump`` with ``sort_keys=False``:
  key order is kept but **formatting is not** -- comments, quoting style, anchors and flow
  style are lost when the file is written. Prefer TOML or JSON for knob files a human edits.

A key path is split on ``.``; each segment names a mapping key, or, inside a list (a TOML
array of tables, a YAML/JSON sequence), a decimal index. Keys that themselves contain a dot
cannot be addressed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, MutableSequence
from pathlib import Path
from typing import Any

from controller.domain.errors import PermanentError

Scalar = int | float | str | bool
"""A knob value: what a knob's key must hold, and what a proposal writes."""

_SCALAR_TYPES = (bool, int, float, str)


class KnobError(PermanentError):
    """A knob file or key cannot be read or written; names the file and the key."""

    def __init__(self, file: str, key: str, problem: str) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        super().__init__(f"{file}: key {key!r}: {problem}")


def read_knob(path: Path, key: str) -> Scalar:
    """Return the scalar at dotted ``key`` in ``path``; raise KnobError if missing or not a scalar."""
    fmt = _format_of(path, key)
    doc = fmt.load(_read_text(path, key), path, key)
    parent, last = _locate_parent(doc, path, key)
    return _scalar_at(parent, last, path, key)


def write_knob(path: Path, key: str, value: Scalar) -> None:
    """Set the scalar at dotted ``key`` in ``path`` to ``value``.

    The key must already exist and hold a scalar (int, float, str or bool): a knob file is
    declared by the user, so a missing key is a spec mistake rather than something to create.
    """
    if not isinstance(value, _SCALAR_TYPES):
        raise KnobError(str(path), key, f"cannot write a {type(value).__name__}; knob values are scalars")
    fmt = _format_of(path, key)
    text = _read_text(path, key)
    doc = fmt.load(text, path, key)
    parent, last = _locate_parent(doc, path, key)
    _scalar_at(parent, last, path, key)
    parent[last] = value
    path.write_bytes(fmt.dump(doc, text).encode("utf-8"))


_Library = tuple[Callable[[str], Any], Callable[[Any, str], str], tuple[type[Exception], ...]]
"""A format's parse, its dump (which sees the original text for hints) and the errors its parse raises."""


class _Format:
    """How one file format is parsed and serialised. Its library (tomlkit, PyYAML) is imported on first
    use: only the ``knobs`` proposer needs one, and ``crucible worker`` starts without them (ADR-0035)."""

    def __init__(self, name: str, library: Callable[[], _Library]) -> None:
        self.name = name
        self._library = library

    def load(self, text: str, path: Path, key: str) -> Any:
        parse, _dump, errors = self._library()
        try:
            return parse(text)
        except errors as exc:
            raise KnobError(str(path), key, f"not valid {self.name}: {exc}") from exc

    def dump(self, doc: Any, original: str) -> str:
        return self._library()[1](doc, original)


def _toml() -> _Library:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    return tomlkit.parse, lambda doc, _original: tomlkit.dumps(doc), (TOMLKitError,)


def _yaml() -> _Library:
    import yaml

    def dump(doc: Any, _original: str) -> str:
        return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)

    return yaml.safe_load, dump, (yaml.YAMLError,)


def _json() -> _Library:
    return json.loads, _dump_json, (ValueError,)


_INDENT_RE = re.compile(r"\n([ \t]+)\S")


def _dump_json(doc: Any, original: str) -> str:
    body = original.strip()
    indent: int | str | None
    if "\n" not in body:
        indent = None
    else:
        match = _INDENT_RE.search(body)
        unit = match.group(1) if match else "  "
        indent = unit if "\t" in unit else len(unit)
    trailer = original[len(original.rstrip()) :]
    return json.dumps(doc, indent=indent, ensure_ascii=False) + trailer


_FORMATS: dict[str, _Format] = {
    ".toml": _Format("TOML", _toml),
    ".yaml": _Format("YAML", _yaml),
    ".yml": _Format("YAML", _yaml),
    ".json": _Format("JSON", _json),
}


def _format_of(path: Path, key: str) -> _Format:
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(sorted(_FORMATS))
        raise KnobError(str(path), key, f"unsupported file type {path.suffix!r} (expected {known})")
    return fmt


def _read_text(path: Path, key: str) -> str:
    # Bytes, not read_text(): universal-newline decoding would turn CRLF files into LF ones.
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError as exc:
        raise KnobError(str(path), key, "file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise KnobError(str(path), key, f"cannot read: {exc}") from exc


def _locate_parent(doc: Any, path: Path, key: str) -> tuple[Any, Any]:
    """Walk all but the last segment of ``key``; return the container and the last step."""
    segments = key.split(".")
    if not key or any(not part for part in segments):
        raise KnobError(str(path), key, "empty segment in key path")
    node = doc
    for depth, part in enumerate(segments):
        step = _step(node, part)
        if step is None:
            where = ".".join(segments[:depth]) or "the top level"
            raise KnobError(str(path), key, f"not found ({part!r} missing under {where})")
        if depth == len(segments) - 1:
            return node, step
        node = node[step]
    raise AssertionError("unreachable: a key path has at least one segment")


def _step(node: Any, part: str) -> str | int | None:
    """The index or key that ``part`` selects in ``node``, or None if there is none."""
    if isinstance(node, Mapping):
        return part if part in node else None
    if isinstance(node, MutableSequence) and part.isascii() and part.isdigit():
        index = int(part)
        return index if index < len(node) else None
    return None


def _scalar_at(parent: Any, last: str | int, path: Path, key: str) -> Scalar:
    raw = parent[last]
    value = raw.unwrap() if hasattr(raw, "unwrap") else raw
    if not isinstance(value, _SCALAR_TYPES):
        kind = "null" if value is None else type(value).__name__
        raise KnobError(str(path), key, f"holds a {kind}, not a scalar (int, float, str or bool)")
    return value
