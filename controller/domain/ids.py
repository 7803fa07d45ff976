"""Run identifiers: short, sortable by creation time, safe in branch names and paths."""

from __future__ import annotations

import secrets
import time


def new_run_id(now: float | None = None) -> str:
    """``r`` + base-36 seconds since the epoch + 6 random hex chars, e.g. ``rsm2k4f-3fa9c1``."""
    t = int(time.time() if now is None else now)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while t:
        t, r = divmod(t, 36)
        out = digits[r] + out
    return f"r{out or '0'}-{secrets.token_hex(3)}"
