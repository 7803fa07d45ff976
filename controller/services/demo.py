"""``crucible demo``: the whole loop end to end, offline, on embedded defaults.

It copies the bundled toy router (``controller/examples/demo``) into a fresh git repository in a temp
dir, points CRUCIBLE_HOME there too (SQLite, shared clones), runs the built-in knobs proposer against
the noisy benchmark with a guard, and prints the score table and the final patch.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from controller.config.settings import Settings
from controller.config.spec import load_spec
from controller.domain.enums import RunStatus
from controller.services.context import Observer
from controller.services.loop import run_loop
from controller.services.patching import patch_text
from controller.services.runs import create_run, open_context
from controller.services.views import run_view
from controller.store.store import Store

DEMO_FILES = ("config.toml", "router.py", "bench.py", "test_router.py", "crucible.toml")


def make_demo_repo(target: Path) -> Path:
    """A committed git repository holding the bundled example at ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("controller") / "examples" / "demo"
    for name in DEMO_FILES:
        (target / name).write_text(source.joinpath(name).read_text())
    (target / ".gitignore").write_text("__pycache__/\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "Demo", "GIT_AUTHOR_EMAIL": "demo@example.com"}
    env.update(GIT_COMMITTER_NAME="Demo", GIT_COMMITTER_EMAIL="demo@example.com")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "toy router"]):
        subprocess.run(["git", *args], cwd=target, env=env, check=True, capture_output=True)
    return target


def run_demo(*, turns: int, as_json: bool, workdir: Path | None, observer: Observer) -> int:
    """Run the demo; return the process exit code."""
    root = workdir or Path(tempfile.mkdtemp(prefix="crucible-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    repo = make_demo_repo(root / "router")
    home = root / "crucible-home"
    home.mkdir(exist_ok=True)
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'crucible.db'}")
    store = Store.open(settings.database_url, upgrade=True)
    spec_path = repo / "crucible.toml"
    spec = load_spec(spec_path)
    say = print if not as_json else (lambda *a, **k: None)
    say(f"demo: toy router in {repo}; crucible state in {home}")
    say(f"demo: objective: {spec.objective}")
    run_id = create_run(store, spec, spec_path.read_text(), spec_path, turns=turns)
    ctx = open_context(settings, store, run_id, spec, observer=observer)
    result = run_loop(ctx)
    view = run_view(settings, store, run_id)
    if as_json:
        print(json.dumps(view, default=str))
    else:
        print(result.message)
        base = view["baseline"]["value"]
        best = view["best"]
        print(f"baseline p50_ms {base:.3f} -> best {best['value']:.3f} (turn {best['turn']})")
        patch = patch_text(settings, store, run_id)
        print("final patch (crucible patch):" if patch else "no change was kept")
        print(patch, end="")
        print(f"run {run_id}; inspect it with CRUCIBLE_HOME={home} crucible runs show {run_id}")
    store.close()
    return 0 if result.status == RunStatus.COMPLETED else 1
