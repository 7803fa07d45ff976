"""The crucible block of a pull request body (docs/github.md), rendered purely from run facts.

Crucible owns only the text between the two markers; whatever people wrote around it is kept as they
wrote it. The whole body is clamped to GitHub's 65,536 characters: first the block drops its chart and
history, and only if people's own text alone is too long is that text cut (with a note).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

START = "<!-- crucible:start -->"
END = "<!-- crucible:end -->"
MAX_BODY = 65_536
HISTORY_ROWS = 30


@dataclass(frozen=True)
class Point:
    """One measured turn: its candidate median and whether it became the champion."""

    turn: int
    value: float
    kept: bool


@dataclass(frozen=True)
class Sibling:
    component: str
    number: int
    url: str


@dataclass(frozen=True)
class PullFacts:
    run_id: str
    component: str
    objective: str
    metric: str
    direction: str
    baseline: float | None
    baseline_samples: Sequence[float]
    candidate: float | None
    candidate_samples: Sequence[float]
    p_value: float | None
    turn: int | None
    base_sha: str
    head_sha: str
    points: Sequence[Point] = ()
    siblings: Sequence[Sibling] = ()
    notes: Sequence[str] = field(default_factory=tuple)
    pairs: int | None = None
    sequential_stop: str | None = None


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.6g}"


def _samples(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.4g}" for v in values) or "–"


def _chart(facts: PullFacts) -> list[str]:
    if not facts.points:
        return []
    xs = [0] + [p.turn for p in facts.points]
    champion = facts.baseline if facts.baseline is not None else facts.points[0].value
    line: list[float] = [champion]
    bars: list[float] = [champion]
    minimize = facts.direction == "minimize"
    for point in facts.points:
        if point.kept and (point.value < champion if minimize else point.value > champion):
            champion = point.value
        bars.append(point.value)
        line.append(champion)
    fmt = ", ".join
    return [
        "```mermaid",
        "xychart-beta",
        f'    title "{facts.metric} by turn ({facts.direction})"',
        f"    x-axis [{fmt(str(x) for x in xs)}]",
        f'    y-axis "{facts.metric}"',
        f"    bar [{fmt(f'{v:.6g}' for v in bars)}]",
        f"    line [{fmt(f'{v:.6g}' for v in line)}]",
        "```",
        "",
    ]


def _significance(facts: PullFacts) -> str:
    """The test that kept the candidate: the fixed rule's Mann-Whitney U, or the sequential rule's
    drift-adjusted t with how many pairs it took and why it stopped there."""
    if facts.p_value is None:
        return "–"
    if facts.pairs is None:
        return f"p = {facts.p_value:.3g} (one-sided Mann-Whitney U)"
    return (
        f"p = {facts.p_value:.3g} (one-sided drift-adjusted t, sequential: "
        f"{facts.sequential_stop or 'stopped'} after {facts.pairs} interleaved pairs)"
    )


def score_table(facts: PullFacts) -> str:
    """The score table and its significance line alone (a check run's text)."""
    return "\n".join(
        [
            f"| | `{facts.metric}` ({facts.direction}) | samples |",
            "|---|---|---|",
            f"| baseline | {_num(facts.baseline)} | {_samples(facts.baseline_samples)} |",
            f"| candidate | {_num(facts.candidate)} | {_samples(facts.candidate_samples)} |",
            "",
            f"Significance: {_significance(facts)}.",
        ]
    )


def render_block(facts: PullFacts, *, compact: bool = False) -> str:
    """The text between the markers, markers included."""
    significance = _significance(facts)
    lines = [
        START,
        f"### crucible: {facts.objective}",
        "",
        f"Run `{facts.run_id}`, component `{facts.component}`. The diff is relative to base "
        f"`{facts.base_sha}`; this candidate is `{facts.head_sha[:12]}` from turn {facts.turn or '–'}.",
        "",
        f"| | `{facts.metric}` ({facts.direction}) | samples |",
        "|---|---|---|",
        f"| baseline | {_num(facts.baseline)} | {_samples(facts.baseline_samples)} |",
        f"| candidate | {_num(facts.candidate)} | {_samples(facts.candidate_samples)} |",
        "",
        f"Significance: {significance}.",
        "",
    ]
    for note in facts.notes:
        lines += [f"> **{note}**", ""]
    if facts.siblings:
        lines.append("Sibling pull requests of this composite change:")
        lines += [f"- `{s.component}`: [#{s.number}]({s.url})" for s in facts.siblings]
        lines.append("")
    if not compact:
        lines += _chart(facts)
        if facts.points:
            lines += [
                "<details><summary>measured turns</summary>",
                "",
                "| turn | value | kept |",
                "|---|---|---|",
            ]
            for p in list(facts.points)[-HISTORY_ROWS:]:
                lines.append(f"| {p.turn} | {p.value:.6g} | {'yes' if p.kept else ''} |")
            lines += ["", "</details>", ""]
    lines.append("_This block is maintained by crucible; edit outside it freely._")
    lines.append(END)
    return "\n".join(lines)


def split_body(body: str | None) -> tuple[str, str]:
    """People's text before and after crucible's block (the block itself dropped)."""
    text = body or ""
    start = text.find(START)
    end = text.find(END, start + len(START)) if start >= 0 else -1
    if start < 0 or end < 0:
        return text, ""
    return text[:start], text[end + len(END) :]


def merge_body(existing: str | None, facts: PullFacts) -> str:
    """``existing`` with crucible's block replaced (or appended), clamped to MAX_BODY."""
    before, after = split_body(existing)
    if before and not before.endswith("\n"):
        before += "\n\n"
    for compact in (False, True):
        body = before + render_block(facts, compact=compact) + after
        if len(body) <= MAX_BODY:
            return body
    block = render_block(facts, compact=True)
    note = "\n\n[crucible: the text above was cut to fit GitHub's body limit]\n\n"
    room = MAX_BODY - len(block) - len(note)
    people = (before + after)[: max(0, room)]
    return people + note + block
