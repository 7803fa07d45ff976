"""Builders of a spec's text and of a composition root, for tests that need one but are not about it.

``spec_text`` writes the smallest valid spec (one component at ``.``, commands that do nothing) with
keyword arguments for what a test changes, so a test's spec shows only what matters to it; each
``[section]`` a test adds is TOML lines appended under that table. ``root_for`` is ``wiring.build``
over a settings tree of the test's own (its home and SQLite file under ``tmp_path``), never the
machine's environment, in the mode the test names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.config.settings import Settings
from controller.wiring import Mode, Root, build


def spec_text(
    *,
    objective: str = "x",
    agent: str = "true",
    metric: str = "true",
    name: str = "m",
    direction: str = "minimize",
    samples: int | None = None,
    components: Sequence[tuple[str, str]] = (("app", "."),),
    sections: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """A spec: ``objective``, ``[agent] command``, ``[metric]`` (``samples`` when given), one
    ``[[component]]`` per (name, repo); ``sections``: more lines per table (``{"metric":
    ["sequential = false"], "sandbox": ['mode = "none"']}``), a table named anew or one above."""
    extra = {table: list(lines) for table, lines in (sections or {}).items()}
    metric_lines = [f"command = {_toml(metric)}", f'name = "{name}"', f'direction = "{direction}"']
    if samples is not None:
        metric_lines.append(f"samples = {samples}")
    tables = {
        "agent": [f"command = {_toml(agent)}", *extra.pop("agent", [])],
        "metric": [*metric_lines, *extra.pop("metric", [])],
        **extra,
    }
    out = [f"objective = {_toml(objective)}"]
    for table, lines in tables.items():
        out += [f"[{table}]", *lines]
    for component, repo in components:
        out += ["[[component]]", f'name = "{component}"', f"repo = {_toml(repo)}"]
    return "\n".join(out) + "\n"


def root_for(
    tmp_path: Path,
    *,
    mode: Mode = Mode.LOOP,
    environ: Mapping[str, str] | None = None,
    **build_args: Any,
) -> Root:
    """``wiring.build`` in ``mode`` over a home and a SQLite file under ``tmp_path`` (the caller
    closes it: ``root.close()``); ``build_args``: ``listen_url``, ``forge_for``, ..."""
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{tmp_path / 'crucible.db'}")
    return build(dict(environ or {}), settings=settings, mode=mode, **build_args)


def _toml(text: str) -> str:
    """A TOML basic string (a JSON string is one)."""
    return json.dumps(text)
