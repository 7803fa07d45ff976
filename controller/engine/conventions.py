"""The words crucible writes where a team's tools read them: PR titles, commit messages, status lines.

Pure text from facts, following ``[publish]`` (``controller.config.publish``):

- Titles and commit messages come from the spec's templates. With ``conventional = true`` their first
  line becomes a Conventional Commits header, ``perf(<component>): <subject>``, shaped to pass
  commitlint's ``config-conventional`` (lower-case first letter unless it starts an acronym, no full
  stop, header at most 100 characters), unless the template already starts with a type of its own.
- ``signoff = true`` ends every commit message with ``Signed-off-by: Name <email>`` for the
  configured author, in the trailer block git and the DCO check parse (``git interpret-trailers``).
- The status line is what a commit status's description holds: at most 140 characters, GitHub's limit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from controller.config.publish import (
    DEFAULT_COMMIT_MESSAGE,
    DEFAULT_TITLE,
    MAX_TITLE_CHARS,
    PublishSpec,
    render,
)
from controller.config.spec import Spec

MAX_HEADER_CHARS = 100  # commitlint's config-conventional header-max-length
MAX_STATUS_CHARS = 140  # GitHub's limit on a commit status description
CONVENTIONAL_TYPE = "perf"
CRUCIBLE_PREFIX = "crucible: "  # how crucible's default messages start; a header replaces it
_HEADER = re.compile(r"[a-z]+(\([^()\n]*\))?!?: \S")
_TRAILER = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*: \S")
MINUS = "\u2212"


def number(value: float | None) -> str:
    """A median as titles and status lines show it (four significant digits), ``?`` if unknown."""
    return "?" if value is None else f"{value:.4g}"


def improvement(baseline: float | None, value: float | None) -> str:
    """The change from ``baseline`` to ``value`` in percent, signed (``−73.5%``, ``+4.2%``); ``?`` when
    either is unknown or the baseline is 0 (no ratio)."""
    if baseline is None or value is None or baseline == 0 or not math.isfinite(baseline):
        return "?"
    change = (value - baseline) / abs(baseline) * 100
    sign = MINUS if change < 0 else "+"
    return f"{sign}{abs(change):.1f}%"


def p_text(p_value: float) -> str:
    """``4e-6`` rather than Python's ``4e-06``; ``0.03`` for ordinary values."""
    if p_value >= 0.001:
        return f"{p_value:.2g}"
    mantissa, _, exponent = f"{p_value:.0e}".partition("e")
    return f"{mantissa}e{int(exponent)}"


@dataclass(frozen=True)
class Facts:
    """What a title or a commit message may say (the placeholders of ``[publish]`` templates)."""

    objective: str
    component: str
    metric: str
    run_id: str
    baseline: float | None
    value: float | None
    hypothesis: str = ""
    turn: int = 0

    def values(self) -> dict[str, str]:
        return {
            "objective": self.objective,
            "component": self.component,
            "metric": self.metric,
            "run_id": self.run_id,
            "baseline": number(self.baseline),
            "value": number(self.value),
            "improvement": improvement(self.baseline, self.value),
            "hypothesis": self.hypothesis.strip() or f"turn {self.turn}",
            "turn": str(self.turn),
        }


def kept_facts(
    spec: Spec,
    run_id: str,
    component: str,
    baseline: float | None,
    value: float | None,
    hypothesis: str | None,
    turn: int,
) -> Facts:
    """The facts of a kept candidate's commit in ``component``."""
    return Facts(
        objective=spec.objective,
        component=component,
        metric=spec.metric.name,
        run_id=run_id,
        baseline=baseline,
        value=value,
        hypothesis=hypothesis or "",
        turn=turn,
    )


def author_identity(publish: PublishSpec | None) -> tuple[str, str] | None:
    """(name, email) of crucible's commits when ``[publish] author`` names one, else None (the
    checkout's default identity)."""
    return publish.author.identity() if publish is not None and publish.author is not None else None


def _lower_first(text: str) -> str:
    """``Cache routes`` -> ``cache routes``; ``HTTP keep-alive`` stays (an acronym keeps its case)."""
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        return text[0].lower() + text[1:]
    return text


def conventional_header(component: str, subject: str) -> str:
    """``perf(<component>): <subject>`` as commitlint's conventional rules accept it; a subject that
    is already a header (``fix: …``, ``perf(x)!: …``) is kept as written, and crucible's own
    ``crucible: `` prefix gives way to the header."""
    subject = " ".join(subject.split()).removeprefix(CRUCIBLE_PREFIX)  # crucible's own messages
    if _HEADER.match(subject):
        return subject
    prefix = f"{CONVENTIONAL_TYPE}({component}): "
    subject = _lower_first(subject).rstrip(" .") or "improve the measured result"
    room = MAX_HEADER_CHARS - len(prefix)
    if len(subject) > room:
        subject = subject[: room - 1].rstrip(" .") + "…"
    return prefix + subject


def title(publish: PublishSpec | None, facts: Facts) -> str:
    """The pull request's title (one line, at most GitHub's 256 characters)."""
    template = publish.title_template() if publish is not None else DEFAULT_TITLE
    text = " ".join(render(template, facts.values()).split())
    if publish is not None and publish.conventional:
        text = conventional_header(facts.component, text)
    return text[:MAX_TITLE_CHARS]


def commit_message(publish: PublishSpec | None, facts: Facts) -> str:
    """The message of a kept candidate's commit: the template, the conventions, the sign-off."""
    template = publish.commit_template() if publish is not None else DEFAULT_COMMIT_MESSAGE
    return finish(publish, facts.component, render(template, facts.values()))


def finish(publish: PublishSpec | None, component: str, message: str) -> str:
    """Apply the conventional header and the sign-off to any message crucible commits (kept
    candidates, and the merges that carry a champion onto a moved base or someone's push)."""
    lines = message.strip().splitlines() or [""]
    if publish is not None and publish.conventional:
        lines[0] = conventional_header(component, lines[0])
    text = "\n".join(line.rstrip() for line in lines)
    if publish is not None and publish.signoff and publish.author is not None:
        text = add_trailer(text, f"Signed-off-by: {publish.author.name} <{publish.author.email}>")
    return text + "\n"


def add_trailer(message: str, trailer: str) -> str:
    """``trailer`` at the end of ``message``'s trailer block (a new block after a blank line when the
    last paragraph is not one); not added twice."""
    message = message.rstrip()
    paragraphs = message.split("\n\n")
    last = paragraphs[-1].splitlines()
    if trailer in last and len(paragraphs) > 1:
        return message
    if len(paragraphs) > 1 and last and all(_TRAILER.match(line) for line in last):
        return f"{message}\n{trailer}"
    return f"{message}\n\n{trailer}"


def status_line(metric: str, baseline: float | None, value: float | None, p_value: float | None) -> str:
    """``p50_ms 41.1 → 10.9 (−73.5%, p = 4e-6)``, at most 140 characters."""
    detail = improvement(baseline, value)
    if p_value is not None:
        detail += f", p = {p_text(p_value)}"
    text = f"{metric} {number(baseline)} → {number(value)} ({detail})"
    return text if len(text) <= MAX_STATUS_CHARS else text[: MAX_STATUS_CHARS - 1] + "…"
