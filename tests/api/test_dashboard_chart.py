"""The progress chart is a pure SVG renderer: dots by outcome, the running best as a monotone step line,
round markers, escaped text, and hypothesis labels that never overlap however many turns are kept."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from controller.api.dashboard.chart import Point, place_labels, render_chart

SVG = "{http://www.w3.org/2000/svg}"


def _points(n: int) -> list[Point]:
    out, best = [], 100.0
    for t in range(1, n + 1):
        if t % 2 == 0:
            best *= 0.995
            out.append(Point(t, 0 if t < n * 0.8 else 1, "accepted", best, f"idea number {t} with words"))
        elif t % 5 == 0:
            out.append(Point(t, 0, "failed", None, "crashed"))
        else:
            out.append(Point(t, 0, "rejected", best * 1.02, "worse"))
    return out


def test_the_chart_is_well_formed_and_marks_each_outcome() -> None:
    points = _points(40)
    svg = render_chart(points, baseline=100.0, metric="latency <ms>", minimize=True)
    root = ET.fromstring(svg)  # well-formed XML, text escaped
    circles = root.findall(f"{SVG}circle")
    assert sum(c.get("class") == "kept" for c in circles) == 20
    assert sum(c.get("class") == "rejected" for c in circles) == 16
    assert len([p for p in root.findall(f"{SVG}path") if p.get("class") == "failed"]) == 4
    assert [ln.get("class") for ln in root.findall(f"{SVG}line")].count("round") == 1
    assert "latency &lt;ms&gt;" in svg


def test_the_best_line_only_steps_towards_better() -> None:
    points = [
        Point(1, 0, "accepted", 90.0, "a"),
        Point(2, 0, "rejected", 80.0, "b"),
        Point(3, 0, "accepted", 85.0, "c"),
    ]
    svg = render_chart(points, baseline=100.0, metric="m", minimize=True)
    best = re.search(r'class="best" d="([^"]+)"', svg)
    assert best is not None
    # two steps down only: the baseline, then 90 at turn 1; 85 at turn 3; the rejected 80 is no step
    assert best.group(1).count("V") == 2


def test_labels_never_overlap_and_are_thinned_on_a_long_run() -> None:
    points = _points(500)
    anchors = [(p.turn, 64 + p.turn * 1.7, 100 + (p.turn % 50) * 4.0, p.hypothesis or "") for p in points]
    labels = place_labels(anchors)
    assert 0 < len(labels) < 250
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert not a.box.overlaps(b.box), (a, b)
    svg = render_chart(points, baseline=100.0, metric="m", minimize=True)
    assert 0 < svg.count('class="label"') < 250


def test_an_empty_run_still_draws_axes() -> None:
    root = ET.fromstring(render_chart([], baseline=None, metric="m", minimize=False))
    assert root.findall(f"{SVG}circle") == []
