"""The run's progress chart as a server-side SVG string: the classic autoresearch plot.

Every measured turn is a dot (kept green and labelled with its hypothesis, rejected grey, failed a red
cross on the axis), the running best is a step line, the baseline a dashed line, and each refinement
round starts at a marked vertical line. Rendered on the server so the page works without JavaScript
and the SVG can be embedded anywhere. A pure function of its inputs (no store, no HTTP): every text
that reaches the SVG goes through ``html.escape``, and only presentation attributes are used (no
``style`` attribute), so a Content-Security-Policy without inline styles holds.

Labels are thinned greedily, in turn order: a label is placed right of its dot, else left of it, else
dropped, and never overlaps a label already placed (``place_labels`` returns the boxes for tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 960, 392
# TOP leaves a band above the plot for the value axis's title, so it can never meet the top tick label
# (drawn at the plot's top edge, right-aligned against the axis).
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 40
AXIS_TITLE_Y = 14  # baseline of the value axis's title, inside the band above the plot
AXIS_TITLE_CHARS = 120
CHAR_W, LABEL_H = 6.2, 12.0
LABEL_CHARS = 36
KEPT, REJECTED, FAILED, BEST, BASE = "#1a7f37", "#8c959f", "#cf222e", "#0969da", "#6e7781"


@dataclass(frozen=True)
class Point:
    """One decided turn as the chart needs it; ``value`` is None when nothing was measured."""

    turn: int
    round: int
    outcome: str | None
    value: float | None
    hypothesis: str | None


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float

    def overlaps(self, other: Box) -> bool:
        return not (
            self.x + self.w <= other.x
            or other.x + other.w <= self.x
            or self.y + self.h <= other.y
            or other.y + other.h <= self.y
        )


@dataclass(frozen=True)
class Label:
    turn: int
    text: str
    box: Box


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= LABEL_CHARS else line[: LABEL_CHARS - 1] + "…"


class _Scale:
    def __init__(self, points: Sequence[Point], baseline: float | None) -> None:
        values = [p.value for p in points if p.value is not None]
        if baseline is not None:
            values.append(baseline)
        lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
        pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
        self.lo, self.hi = lo - pad, hi + pad
        self.last = max([p.turn for p in points] + [1])

    def x(self, turn: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * turn / self.last

    def y(self, value: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (self.hi - value) / (self.hi - self.lo)


def place_labels(anchors: Sequence[tuple[int, float, float, str]]) -> list[Label]:
    """Greedy, overlap-free placement of ``(turn, x, y, text)`` labels inside the plot area."""
    placed: list[Label] = []
    for turn, x, y, text in anchors:
        short = _short(text)
        if not short:
            continue
        w = len(short) * CHAR_W
        top = min(max(y - LABEL_H - 4, TOP), HEIGHT - BOTTOM - LABEL_H)
        for bx in (x + 6, x - 6 - w):
            box = Box(bx, top, w, LABEL_H)
            inside = bx >= LEFT and bx + w <= WIDTH - RIGHT
            if inside and not any(box.overlaps(p.box) for p in placed):
                placed.append(Label(turn, short, box))
                break
    return placed


def _best_path(points: Sequence[Point], baseline: float | None, scale: _Scale, minimize: bool) -> str:
    best = baseline
    parts = [f"M{scale.x(0):.1f},{scale.y(best):.1f}"] if best is not None else []
    for p in points:
        if p.outcome != "accepted" or p.value is None:
            continue
        if best is None:
            best = p.value
            parts.append(f"M{scale.x(p.turn):.1f},{scale.y(best):.1f}")
            continue
        if (p.value < best) if minimize else (p.value > best):
            best = p.value
            parts.append(f"H{scale.x(p.turn):.1f}V{scale.y(best):.1f}")
    if parts:
        parts.append(f"H{scale.x(scale.last):.1f}")
    return "".join(parts)


def _axes(scale: _Scale, metric: str) -> list[str]:
    floor = HEIGHT - BOTTOM
    out = [
        f'<line x1="{LEFT}" y1="{floor}" x2="{WIDTH - RIGHT}" y2="{floor}" stroke="#57606a"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{floor}" stroke="#57606a"/>',
    ]
    for i in range(5):
        v = scale.lo + (scale.hi - scale.lo) * i / 4
        y = scale.y(v)
        tick = f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
        out.append(f"{tick}{v:.4g}</text>")
    step = max(1, round(scale.last / 10))
    for t in range(0, scale.last + 1, step):
        x = scale.x(t)
        out.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" font-size="11">{t}</text>'
        )
    out.append(
        f'<text x="{(LEFT + WIDTH) / 2:.0f}" y="{HEIGHT - 6}" text-anchor="middle" font-size="12">turn</text>'
    )
    title = metric if len(metric) <= AXIS_TITLE_CHARS else metric[: AXIS_TITLE_CHARS - 1] + "…"
    out.append(f'<text class="axis-title" x="4" y="{AXIS_TITLE_Y}" font-size="12">{escape(title)}</text>')
    return out


def _dot(p: Point, scale: _Scale) -> str:
    title = f"turn {p.turn} (round {p.round}): {p.outcome or '?'}"
    if p.value is not None:
        title += f", {p.value:.6g}"
    if p.hypothesis:
        title += f" · {p.hypothesis}"
    tip = f"<title>{escape(title)}</title>"
    x = scale.x(p.turn)
    if p.value is None:  # failed or nothing measured: a cross on the axis
        y: float = HEIGHT - BOTTOM - 6
        d = f"M{x - 4:.1f},{y - 4:.1f}l8,8m0,-8l-8,8"
        return f'<path class="failed" d="{d}" stroke="{FAILED}" stroke-width="2">{tip}</path>'
    y = scale.y(p.value)
    if p.outcome == "accepted":
        return f'<circle class="kept" cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{KEPT}">{tip}</circle>'
    if p.outcome == "failed":
        paint = f'fill="none" stroke="{FAILED}"'
        return f'<circle class="failed" cx="{x:.1f}" cy="{y:.1f}" r="4" {paint}>{tip}</circle>'
    paint = f'fill="{REJECTED}"'
    return f'<circle class="rejected" cx="{x:.1f}" cy="{y:.1f}" r="3.5" {paint}>{tip}</circle>'


def render_chart(points: Sequence[Point], *, baseline: float | None, metric: str, minimize: bool) -> str:
    """The whole chart as one ``<svg>`` element (no XML prolog: it is embedded in the page)."""
    points = sorted(points, key=lambda p: p.turn)
    scale = _Scale(points, baseline)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'class="chart" font-family="sans-serif" aria-label="progress of {escape(metric)} per turn">',
        *_axes(scale, metric),
    ]
    first_turn: dict[int, int] = {}
    for p in points:
        first_turn.setdefault(p.round, p.turn)
    for rnd, turn in sorted(first_turn.items()):
        if rnd == 0:
            continue
        x = scale.x(turn - 0.5)
        out.append(
            f'<line class="round" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM}" '
            f'stroke="#8250df" stroke-dasharray="2 3"/>'
            f'<text x="{x + 3:.1f}" y="{TOP + 10}" font-size="11" fill="#8250df">round {rnd}</text>'
        )
    if baseline is not None:
        y = scale.y(baseline)
        out.append(
            f'<line class="baseline" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            f'stroke="{BASE}" stroke-dasharray="6 4"><title>baseline {baseline:.6g}</title></line>'
        )
    best = _best_path(points, baseline, scale, minimize)
    if best:
        out.append(f'<path class="best" d="{best}" fill="none" stroke="{BEST}" stroke-width="1.5"/>')
    out.extend(_dot(p, scale) for p in points)
    anchors = [
        (p.turn, scale.x(p.turn), scale.y(p.value), p.hypothesis or "")
        for p in points
        if p.outcome == "accepted" and p.value is not None
    ]
    for label in place_labels(anchors):
        b = label.box
        out.append(
            f'<text class="label" x="{b.x:.1f}" y="{b.y + b.h - 2:.1f}" font-size="10.5" '
            f'fill="{KEPT}">{escape(label.text)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
