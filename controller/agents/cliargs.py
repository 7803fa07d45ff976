"""What a spec's ``agent.args`` already say, so a preset does not say it twice.

The Node CLIs (yargs) turn a flag given twice into a list and then refuse it (``Invalid approval mode:
yolo,default``); a flag the user passes in ``agent.args`` therefore replaces the preset's own instead of
being repeated after it.
"""

from __future__ import annotations

from collections.abc import Sequence


def sets_flag(args: Sequence[str], *flags: str) -> bool:
    """Whether ``args`` gives any of ``flags``, as ``--flag VALUE`` or ``--flag=VALUE``."""
    return any(arg == flag or arg.startswith(flag + "=") for arg in args for flag in flags)
