"""GitHub's rate-limit headers, read without any HTTP client (shared by the PyGithub adapter and the
httpx poll reader, so both wait the same way).

GitHub documents two limits: the primary one (``x-ratelimit-remaining`` / ``x-ratelimit-reset``) and
secondary ones (``retry-after``, or a 403/429 whose message says so). A 304 answer to a conditional
request does not count against the primary limit, which is what makes ETag polling cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from controller.forge.base import RateStatus

DEFAULT_RATE_LIMIT_WAIT = 60.0  # GitHub: without retry-after/reset headers, wait at least a minute


def _lowered(headers: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def rate_limit_wait(status: int, headers: Mapping[str, Any], message: str, now: float) -> float | None:
    """Seconds to wait if this answer is a primary or secondary rate limit, else None.

    ``retry-after`` wins; then ``x-ratelimit-remaining: 0`` with ``x-ratelimit-reset`` (epoch
    seconds, compared with ``now``, plus one second because the reset happens somewhere within
    that second); a 429, or a 403 whose message speaks of a rate limit, waits a minute.
    """
    if status not in (403, 429):
        return None
    lowered = _lowered(headers)
    retry_after = lowered.get("retry-after", "").strip()
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:  # an HTTP date: GitHub does not send those, so be conservative
            return DEFAULT_RATE_LIMIT_WAIT
    if lowered.get("x-ratelimit-remaining", "").strip() == "0":
        try:
            return max(0.0, float(lowered.get("x-ratelimit-reset", "")) - now) + 1.0
        except ValueError:
            return DEFAULT_RATE_LIMIT_WAIT
    text = message.lower()
    if status == 429 or "rate limit" in text or "abuse" in text:
        return DEFAULT_RATE_LIMIT_WAIT
    return None


def server_time(headers: Mapping[str, Any]) -> float | None:
    """The answer's ``Date`` as epoch seconds, or None if absent or unreadable."""
    raw = _lowered(headers).get("date", "").strip()
    if not raw:
        return None
    try:
        return parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError):
        return None


def rate_status(headers: Mapping[str, Any], now: float) -> RateStatus | None:
    """The primary limit as this answer states it, or None when it carries no (readable) headers.

    ``observed`` is the server's ``Date`` when present (``reset`` is on the server's clock too),
    else ``now``.
    """
    lowered = _lowered(headers)
    try:
        limit = int(lowered["x-ratelimit-limit"])
        remaining = int(lowered["x-ratelimit-remaining"])
        reset = float(lowered["x-ratelimit-reset"])
    except (KeyError, ValueError):
        return None
    observed = server_time(headers)
    return RateStatus(limit, remaining, reset, now if observed is None else observed)
