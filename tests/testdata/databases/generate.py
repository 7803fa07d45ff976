"""Write the database a released crucible leaves behind, for the upgrade tests (as Optuna keeps one per
release): ``python tests/testdata/databases/generate.py VERSION COMMIT``.

The released code writes it, not today's: ``controller/`` of ``COMMIT`` (the release's commit) is
extracted into a temporary folder and run from there with this checkout's virtual environment. It runs
``crucible loop`` for four turns on a small git repository (a baseline, one kept turn, three rejected
ones: runs, components, turns, samples, events), then stores a pull request and one review comment
through that version's own ``Store`` (publishing needs a forge, which the release's CLI cannot be
pointed at here). The result is compacted into ``VERSION.sqlite3`` beside this file, and its expected
contents into ``VERSION.json``, which ``tests/store/test_released_databases.py`` checks after upgrading a
copy to the current schema.

Run it once per release, when the release is cut; the files are never regenerated afterwards.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

AGENT = """#!/bin/sh
v=$(cat src/value.txt)
if [ $((v % 2)) -eq 0 ]; then
  echo $((v + 3)) > src/value.txt; echo "HYPOTHESIS a bigger value"
else
  echo $((v - 1)) > src/value.txt; echo "HYPOTHESIS a smaller value"
fi
"""
METRIC = '#!/bin/sh\necho "METRIC value=$(cat src/value.txt)"\n'
SPEC = """objective = "Cut the value"
turns = 4

[agent]
command = "./agent.sh"
timeout = "1m"

[sandbox]
mode = "none"

[metric]
command = "./metric.sh"
name = "value"
direction = "minimize"
samples = 5
warmups = 1

[[component]]
name = "demo"
repo = "."
base = "main"
mutable = ["src/**"]
"""
# Run inside the released code after the loop: a pull request and a review comment on it.
EXTRAS = """
import sys
from controller.forge.base import FeedbackEvent
from controller.store import Store
from controller.store.records import PullRecord

with Store.open(sys.argv[1]) as store:
    (run,) = store.list_runs()
    (component,) = store.list_components(run.id)
    store.save_pull(PullRecord(
        run_id=run.id, component=component.name, repo="alice/demo", number=7,
        url="https://github.com/alice/demo/pull/7", branch=f"crucible/{run.id}",
        head_sha=component.head_sha, pushed_sha=component.head_sha, base_sha=component.base_sha,
    ))
    store.add_feedback(run.id, component.name, FeedbackEvent(
        repo="alice/demo", pr_number=7, source="review_comment", external_id=101, review_id=100,
        author="bob", author_type="User", association="COLLABORATOR", body="Try a smaller value here.",
        path="src/value.txt", line=1, action="created", updated_at="2026-12-02T10:00:00Z",
        diff_hunk="@@ -1 +1 @@\\n-5\\n+4",
    ))
"""


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def main(version: str, commit: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        code, repo, home = work / "code", work / "repo", work / "home"
        code.mkdir()
        archive = subprocess.run(
            ["git", "archive", commit, "controller"], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True)
        (repo / "src").mkdir(parents=True)
        (repo / "src" / "value.txt").write_text("5\n")
        for name, text in (("agent.sh", AGENT), ("metric.sh", METRIC), ("crucible.toml", SPEC)):
            (repo / name).write_text(text)
            (repo / name).chmod(0o755)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "CRUCIBLE_"))},
            "PYTHONPATH": str(code),
            "CRUCIBLE_HOME": str(home),
            "GIT_AUTHOR_NAME": "crucible",
            "GIT_AUTHOR_EMAIL": "crucible@example.com",
            "GIT_COMMITTER_NAME": "crucible",
            "GIT_COMMITTER_EMAIL": "crucible@example.com",
        }
        run(["git", "init", "-q", "-b", "main"], repo, env)
        run(["git", "add", "-A"], repo, env)
        run(["git", "commit", "-qm", "the demo"], repo, env)
        crucible = [sys.executable, "-c", "from controller.cli.main import main; main()"]
        result = json.loads(run([*crucible, "loop", "--json"], repo, env))
        database = home / "crucible.db"
        run([sys.executable, "-c", EXTRAS, f"sqlite:///{database}"], repo, env)
        target = HERE / f"{version}.sqlite3"
        target.unlink(missing_ok=True)
        conn = sqlite3.connect(database)
        try:
            conn.execute("VACUUM INTO ?", (str(target),))
        finally:
            conn.close()
    expected = {
        "version": version,
        "commit": commit,
        "run_id": result["run_id"],
        "status": result["status"],
        "stop_reason": result["stop_reason"],
        "baseline": result["baseline"]["value"],
        "best": result["best"],
        "turns": [{"turn": t["turn"], "outcome": t["outcome"], "value": t["value"]} for t in result["turns"]],
        "pull_request": 7,
        "feedback_authors": ["bob"],
    }
    (HERE / f"{version}.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(f"wrote {target.relative_to(ROOT)} and {version}.json")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
