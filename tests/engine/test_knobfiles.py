"""Knob files: one scalar read and written per format, with the least disturbance possible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from controller.domain.errors import CrucibleError
from controller.engine.knobfiles import KnobError, read_knob, write_knob

TOML = """\
# Cache settings, tuned by hand in 2023.
title = "router"   # not a knob

[cache]  # the LRU in front of the store
size_mb = 64     # megabytes; keep a power of two
policy = 'lru'
enabled = true
ratio = 0.25
sizes = [1, 2, 3]
limits = { soft = 10, hard = 20 }  # inline table
nested.depth = 3

[[servers]]
port = 80

[[servers]]
port = 81 # second
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def test_toml_round_trip_changes_only_the_value(tmp_path: Path) -> None:
    path = write(tmp_path / "config" / "cache.toml", TOML)
    assert read_knob(path, "cache.size_mb") == 64
    write_knob(path, "cache.size_mb", 128)
    assert read_knob(path, "cache.size_mb") == 128
    expected = TOML.replace("size_mb = 64 ", "size_mb = 128 ")
    assert path.read_bytes() == expected.encode()


@pytest.mark.parametrize(
    ("key", "old", "new", "old_text", "new_text"),
    [
        ("title", "router", "switch", '"router"', '"switch"'),
        ("cache.enabled", True, False, "enabled = true", "enabled = false"),
        ("cache.ratio", 0.25, 0.5, "ratio = 0.25", "ratio = 0.5"),
        ("cache.limits.hard", 20, 40, "hard = 20", "hard = 40"),
        ("cache.nested.depth", 3, 4, "nested.depth = 3", "nested.depth = 4"),
        ("servers.1.port", 81, 8081, "port = 81 #", "port = 8081 #"),
    ],
)
def test_toml_nested_keys_of_each_scalar_type(
    tmp_path: Path, key: str, old: object, new: int | float | str | bool, old_text: str, new_text: str
) -> None:
    path = write(tmp_path / "c.toml", TOML)
    assert read_knob(path, key) == old
    assert type(read_knob(path, key)) is type(old)
    write_knob(path, key, new)
    assert read_knob(path, key) == new
    assert path.read_text() == TOML.replace(old_text, new_text, 1)


def test_toml_keeps_crlf_line_endings(tmp_path: Path) -> None:
    text = "# c\r\n[a]\r\nb = 1  # note\r\n"
    path = write(tmp_path / "c.toml", text)
    write_knob(path, "a.b", 2)
    assert path.read_bytes() == b"# c\r\n[a]\r\nb = 2  # note\r\n"


def test_yaml_round_trip_keeps_key_order(tmp_path: Path) -> None:
    text = "zeta: 1\ncache:\n  size_mb: 64\n  policy: lru\n  flags: {fast: true}\nalpha: [1, 2]\n"
    path = write(tmp_path / "c.yaml", text)
    assert read_knob(path, "cache.size_mb") == 64
    assert read_knob(path, "cache.flags.fast") is True
    write_knob(path, "cache.size_mb", 256)
    write_knob(path, "cache.flags.fast", False)
    data = yaml.safe_load(path.read_text())
    assert data == {
        "zeta": 1,
        "cache": {"size_mb": 256, "policy": "lru", "flags": {"fast": False}},
        "alpha": [1, 2],
    }
    assert list(data) == ["zeta", "cache", "alpha"]
    assert list(data["cache"]) == ["size_mb", "policy", "flags"]


def test_yml_extension_and_list_index(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yml", "workers:\n- name: a\n  threads: 2\n- name: b\n  threads: 4\n")
    assert read_knob(path, "workers.1.threads") == 4
    write_knob(path, "workers.1.threads", 8)
    assert read_knob(path, "workers.1.threads") == 8
    assert read_knob(path, "workers.0.threads") == 2


def test_json_round_trip_detects_indent_and_keeps_order(tmp_path: Path) -> None:
    data = {"b": {"size": 64, "name": "x"}, "a": [1, 2], "ü": "é"}
    text = json.dumps(data, indent=4, ensure_ascii=False) + "\n"
    path = write(tmp_path / "c.json", text)
    write_knob(path, "b.size", 128)
    expected = json.dumps({**data, "b": {"size": 128, "name": "x"}}, indent=4, ensure_ascii=False) + "\n"
    assert path.read_text() == expected


def test_json_tab_indent_and_one_line_files_are_kept(tmp_path: Path) -> None:
    tabbed = write(tmp_path / "tab.json", '{\n\t"a": {\n\t\t"b": 1\n\t}\n}')
    write_knob(tabbed, "a.b", 2)
    assert tabbed.read_text() == '{\n\t"a": {\n\t\t"b": 2\n\t}\n}'
    flat = write(tmp_path / "flat.json", '{"a": 1, "b": true}\n')
    write_knob(flat, "b", False)
    assert flat.read_text() == '{"a": 1, "b": false}\n'


def test_json_without_detectable_indent_uses_two_spaces(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", '{"a":\n1}')
    write_knob(path, "a", 2)
    assert path.read_text() == '{\n  "a": 2\n}'


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("c.toml", "[cache]\nsize = 1\n"),
        ("c.yaml", "cache:\n  size: 1\n"),
        ("c.json", '{"cache": {"size": 1}}'),
    ],
)
def test_missing_key_names_file_and_key(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path / name, text)
    for key in ("cache.size_mb", "nope.size", "cache.size.deeper"):
        with pytest.raises(KnobError) as info:
            read_knob(path, key)
        assert str(path) in str(info.value)
        assert key in str(info.value)
        assert info.value.key == key
        assert isinstance(info.value, CrucibleError)
    with pytest.raises(KnobError, match="not found"):
        write_knob(path, "cache.size_mb", 2)
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("c.toml", "[cache]\nsizes = [1, 2]\ntable = { a = 1 }\nwhen = 2024-01-01\n"),
        ("c.yaml", "cache:\n  sizes: [1, 2]\n  table: {a: 1}\n  when: null\n"),
        ("c.json", '{"cache": {"sizes": [1, 2], "table": {"a": 1}, "when": null}}'),
    ],
)
def test_non_scalar_values_are_refused(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path / name, text)
    for key in ("cache.sizes", "cache.table", "cache.when", "cache"):
        with pytest.raises(KnobError, match="not a scalar"):
            read_knob(path, key)
        with pytest.raises(KnobError, match="not a scalar"):
            write_knob(path, key, 3)
    assert path.read_text() == text


def test_bad_inputs_are_knob_errors(tmp_path: Path) -> None:
    with pytest.raises(KnobError, match="file not found"):
        read_knob(tmp_path / "absent.toml", "a")
    with pytest.raises(KnobError, match="unsupported file type"):
        read_knob(write(tmp_path / "c.ini", "a=1"), "a")
    with pytest.raises(KnobError, match="not valid TOML"):
        read_knob(write(tmp_path / "bad.toml", "a = = 1"), "a")
    with pytest.raises(KnobError, match="not valid JSON"):
        read_knob(write(tmp_path / "bad.json", "{"), "a")
    with pytest.raises(KnobError, match="not valid YAML"):
        read_knob(write(tmp_path / "bad.yaml", "a: 1\n---\nb: 2\n"), "a")
    with pytest.raises(KnobError, match="empty segment"):
        read_knob(write(tmp_path / "ok.json", '{"a": 1}'), "a..b")
    with pytest.raises(KnobError, match="scalars"):
        write_knob(tmp_path / "ok.json", "a", [1, 2])  # type: ignore[arg-type]
    assert (tmp_path / "ok.json").read_text() == '{"a": 1}'
