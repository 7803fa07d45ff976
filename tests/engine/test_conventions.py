"""Titles, commit messages and status lines from ``[publish]``: templates, Conventional Commits headers,
the DCO sign-off trailer, and GitHub's length limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config.publish import PublishSpec
from controller.config.spec import parse_spec
from controller.engine.conventions import (
    MAX_HEADER_CHARS,
    MAX_STATUS_CHARS,
    Facts,
    add_trailer,
    commit_message,
    conventional_header,
    finish,
    improvement,
    p_text,
    status_line,
    title,
)

FACTS = Facts(
    objective="Cut p50 latency of the router",
    component="router",
    metric="p50_ms",
    run_id="r-1",
    baseline=41.1,
    value=10.9,
    hypothesis="Cache the routes.",
    turn=3,
)


def publish(tmp_path: Path, table: str = "") -> PublishSpec:
    text = (
        'objective = "x"\n[agent]\ncommand = "a"\n[metric]\ncommand = "m"\nname = "p50_ms"\n'
        '[[component]]\nname = "router"\nrepo = "."\n[publish]\nforge = "https://api.github.com"\n' + table
    )
    spec = parse_spec(text, tmp_path).publish
    assert spec is not None
    return spec


def test_improvement_and_p_values_read_as_people_write_them() -> None:
    assert improvement(41.1, 10.9) == "\u221273.5%"
    assert improvement(10.0, 10.5) == "+5.0%"
    assert improvement(None, 1.0) == improvement(0.0, 1.0) == "?"
    assert (p_text(4e-6), p_text(0.0312), p_text(0.5)) == ("4e-6", "0.031", "0.5")


def test_status_line_matches_the_example_and_fits_githubs_limit() -> None:
    assert status_line("p50_ms", 41.1, 10.9, 4e-6) == "p50_ms 41.1 \u2192 10.9 (\u221273.5%, p = 4e-6)"
    assert status_line("p50_ms", 41.1, 10.9, None) == "p50_ms 41.1 \u2192 10.9 (\u221273.5%)"
    long = status_line("m" * 200, 1.0, 2.0, 0.01)
    assert len(long) == MAX_STATUS_CHARS and long.endswith("…")


def test_without_a_publish_table_the_defaults_apply() -> None:
    assert title(None, FACTS) == "crucible: Cut p50 latency of the router (p50_ms 41.1 \u2192 10.9) [router]"
    assert commit_message(None, FACTS) == "crucible: Cache the routes.\n\nrun r-1, turn 3: p50_ms=10.9\n"


def test_templates_fill_every_placeholder(tmp_path: Path) -> None:
    spec = publish(
        tmp_path,
        'title = "[{component}] {metric} {improvement} ({run_id})"\n'
        'commit_message = "{hypothesis}\\n\\n{objective}: {baseline} -> {value}, turn {turn}"\n',
    )
    assert title(spec, FACTS) == "[router] p50_ms \u221273.5% (r-1)"
    assert commit_message(spec, FACTS) == (
        "Cache the routes.\n\nCut p50 latency of the router: 41.1 -> 10.9, turn 3\n"
    )


def test_a_missing_hypothesis_names_the_turn(tmp_path: Path) -> None:
    facts = Facts("o", "router", "m", "r", 1.0, 0.5, hypothesis="  ", turn=7)
    assert commit_message(publish(tmp_path, "conventional = true"), facts).startswith(
        "perf(router): turn 7\n"
    )


def test_conventional_headers_pass_commitlints_rules(tmp_path: Path) -> None:
    spec = publish(tmp_path, "conventional = true")
    assert title(spec, FACTS) == "perf(router): cut p50 latency of the router (p50_ms 41.1 \u2192 10.9)"
    assert commit_message(spec, FACTS).splitlines()[0] == "perf(router): cache the routes"
    assert conventional_header("router", "HTTP keep-alive on") == "perf(router): HTTP keep-alive on"
    assert conventional_header("router", "fix(api)!: say so") == "fix(api)!: say so"
    long = conventional_header("router", "a" + " word" * 60)
    assert len(long) == MAX_HEADER_CHARS and long.endswith("…")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("subject", "subject\n\nSigned-off-by: A <a@b.c>"),
        ("subject\n\nbody", "subject\n\nbody\n\nSigned-off-by: A <a@b.c>"),
        (
            "subject\n\nCo-authored-by: X <x@y.z>",
            "subject\n\nCo-authored-by: X <x@y.z>\nSigned-off-by: A <a@b.c>",
        ),
        ("subject\n\nSigned-off-by: A <a@b.c>", "subject\n\nSigned-off-by: A <a@b.c>"),
    ],
)
def test_the_sign_off_joins_the_trailer_block_once(message: str, expected: str) -> None:
    assert add_trailer(message, "Signed-off-by: A <a@b.c>") == expected


def test_finish_signs_off_merges_as_the_configured_author(tmp_path: Path) -> None:
    spec = publish(
        tmp_path,
        'conventional = true\nsignoff = true\nauthor = { name = "Perf Bot", email = "perf@acme.dev" }\n',
    )
    message = finish(spec, "router", "crucible: Follow main to 0123abcd\n\nrun r-1: the candidate on it")
    assert message == (
        "perf(router): follow main to 0123abcd\n\nrun r-1: the candidate on it\n\n"
        "Signed-off-by: Perf Bot <perf@acme.dev>\n"
    )
