"""Waiting for a condition, not for a guessed time.

A ``time.sleep(0.5)`` before an assertion is either too short on a loaded machine (a flaky test) or
too long everywhere else (a slow one). ``wait_until`` polls the condition and fails naming what it
waited for, and, when a process was supposed to bring the condition about, what that process printed
if it died first.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

# ``serve_forever``'s poll interval for the tests' own HTTP servers: ``shutdown()`` waits for the loop's
# next poll, 0.5 s by default, which every test that stops such a server paid at its teardown.
SHUTDOWN_POLL_S = 0.05


def wait_until(
    condition: Callable[[], Any],
    what: str,
    *,
    timeout: float = 30.0,
    interval: float = 0.02,
    proc: subprocess.Popen[Any] | None = None,
) -> Any:
    """Poll ``condition`` until it returns something truthy, and return that.

    AssertionError naming ``what`` when ``timeout`` seconds pass, or at once when ``proc`` exits first
    (with its exit code). ``timeout`` is a deadline for a broken test, never a measurement.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g}s waiting for {what}")
        time.sleep(interval)
