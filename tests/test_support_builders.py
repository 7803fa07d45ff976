"""``tests.support.builders``: the spec a test builds is a valid spec saying what the test asked for,
and a test's root lives under the test's own directory."""

from __future__ import annotations

from pathlib import Path

from controller.config.spec import parse_spec
from controller.wiring import Mode
from tests.support import root_for, spec_text


def test_the_smallest_spec_parses_and_sections_land_in_their_tables(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    spec = parse_spec(spec_text(), tmp_path)
    assert (spec.objective, spec.agent.command, spec.metric.command) == ("x", "true", "true")
    assert [(c.name, c.repo) for c in spec.components] == [("app", ".")]
    text = spec_text(
        objective='say "hi"',
        samples=3,
        components=(("app", "a"), ("lib", "b")),
        sections={"metric": ["interleave = false"], "sandbox": ['mode = "none"']},
    )
    spec = parse_spec(text, tmp_path)
    assert spec.objective == 'say "hi"' and spec.metric.samples == 3 and not spec.metric.interleave
    assert spec.sandbox.mode == "none" and [c.name for c in spec.components] == ["app", "lib"]


def test_a_root_is_built_over_the_tests_own_home_and_database(tmp_path: Path) -> None:
    root = root_for(tmp_path, mode=Mode.SERVE, environ={"CRUCIBLE_HOME": "/nonexistent"})
    try:
        assert root.mode is Mode.SERVE and not root.inline
        assert root.settings.home == tmp_path / "home"
        assert root.store().url == f"sqlite:///{tmp_path / 'crucible.db'}"
    finally:
        root.close()
