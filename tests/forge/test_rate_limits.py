"""Which answers are rate limits, and how long they ask to wait (GitHub's documented headers)."""

from __future__ import annotations

import pytest

from controller.forge.github import split_head
from controller.forge.ratelimit import DEFAULT_RATE_LIMIT_WAIT, rate_limit_wait

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("status", "headers", "message", "wait"),
    [
        (403, {"Retry-After": "7"}, "You have exceeded a secondary rate limit", 7.0),
        (429, {"retry-after": "0"}, "", 0.0),
        (
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 30)},
            "API rate limit",
            31.0,
        ),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 30)}, "API rate limit", 1.0),
        (403, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, "", DEFAULT_RATE_LIMIT_WAIT),
        (429, {}, "", DEFAULT_RATE_LIMIT_WAIT),
        (
            403,
            {"x-ratelimit-remaining": "4999"},
            "You have exceeded a secondary rate limit",
            DEFAULT_RATE_LIMIT_WAIT,
        ),
        (403, {"x-ratelimit-remaining": "4999"}, "Must have admin rights to Repository.", None),
        (502, {"Retry-After": "7"}, "Server Error", None),
        (404, {}, "Not Found", None),
    ],
)
def test_rate_limit_wait(status: int, headers: dict[str, str], message: str, wait: float | None) -> None:
    assert rate_limit_wait(status, headers, message, NOW) == wait


def test_split_head() -> None:
    assert split_head("alice:crucible/run-1") == ("alice", "crucible/run-1")
    for bad in ("crucible/run-1", "alice:", ":main", "a/b:main"):
        with pytest.raises(ValueError):
            split_head(bad)
