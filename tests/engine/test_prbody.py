"""crucible's block of a PR body: owned text between markers, people's text kept, GitHub's limit held."""

from __future__ import annotations

from controller.engine.prbody import END, MAX_BODY, START, Point, PullFacts, Sibling, merge_body, split_body


def _facts(**changes: object) -> PullFacts:
    fields: dict[str, object] = dict(
        run_id="r1",
        component="router",
        objective="Cut p50",
        metric="p50_ms",
        direction="minimize",
        baseline=10.0,
        baseline_samples=(10.1, 9.9, 10.0),
        candidate=8.0,
        candidate_samples=(8.1, 7.9, 8.0),
        p_value=0.05,
        turn=2,
        base_sha="b" * 40,
        head_sha="c" * 40,
        points=(Point(1, 11.0, False), Point(2, 8.0, True)),
    )
    fields.update(changes)
    return PullFacts(**fields)  # type: ignore[arg-type]


def test_block_carries_scores_significance_chart_base_and_siblings() -> None:
    body = merge_body(None, _facts(siblings=(Sibling("lib", 4, "http://forge/o/lib/pull/4"),)))
    assert body.startswith(START) and body.endswith(END)
    assert "| baseline | 10 | 10.1, 9.9, 10 |" in body
    assert "| candidate | 8 | 8.1, 7.9, 8 |" in body
    assert "p = 0.05" in body
    assert "xychart-beta" in body and "bar [10, 11, 8]" in body and "line [10, 10, 8]" in body
    assert "b" * 40 in body and "turn 2" in body
    assert "- `lib`: [#4](http://forge/o/lib/pull/4)" in body


def test_significance_names_the_test_and_how_a_sequential_measurement_stopped() -> None:
    fixed = merge_body(None, _facts())
    assert "p = 0.05 (one-sided Mann-Whitney U)" in fixed
    sequential = merge_body(None, _facts(p_value=0.004, pairs=5, sequential_stop="kept early"))
    assert (
        "p = 0.004 (one-sided drift-adjusted t, sequential: kept early after 5 interleaved pairs)"
        in sequential
    )


def test_peoples_text_around_the_block_is_kept_and_the_block_replaced() -> None:
    first = merge_body("Intro by a person.", _facts())
    edited = "Edited intro.\n\n" + first.split("\n\n", 1)[1] + "\n\nOutro."
    second = merge_body(edited, _facts(candidate=7.0))
    before, after = split_body(second)
    assert before == "Edited intro.\n\n"
    assert after == "\n\nOutro."
    assert second.count(START) == 1 and "| candidate | 7 |" in second and "| candidate | 8 |" not in second


def test_body_is_clamped_to_githubs_limit() -> None:
    many = tuple(Point(i, float(i), i % 7 == 0) for i in range(1, 20_000))
    body = merge_body("x" * 1000, _facts(points=many))
    assert len(body) <= MAX_BODY
    assert body.startswith("x" * 1000) and body.endswith(END)
    huge = merge_body("y" * (MAX_BODY + 10), _facts())
    assert len(huge) <= MAX_BODY and huge.endswith(END) and "cut to fit" in huge
