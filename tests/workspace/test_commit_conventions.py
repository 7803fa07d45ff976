"""Crucible's commits as the team's tools read them: the configured author, a sign-off trailer that git
itself parses, and Conventional Commits headers that commitlint (npm, ``config-conventional``) accepts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from controller.config.publish import PublishSpec
from controller.config.spec import parse_spec
from controller.engine.conventions import Facts, author_identity, commit_message, finish
from controller.workspace.checkout import COMMIT_IDENTITY, Checkout
from tests.conftest import git, make_repo

# commitlint's directory (scripts/testenv/commitlint.sh installs it); read before the autouse fixture
# strips CRUCIBLE_* variables.
COMMITLINT = os.environ.get("CRUCIBLE_COMMITLINT")
REQUIRED = bool(os.environ.get("CI"))

TABLE = """\
conventional = true
signoff = true
author = { name = "Perf Bot", email = "perf-bot@acme.dev" }
"""


def spec_publish(tmp_path: Path, table: str) -> PublishSpec | None:
    text = (
        'objective = "Cut p50 latency"\n[agent]\ncommand = "a"\n[metric]\ncommand = "m"\nname = "p50_ms"\n'
        '[[component]]\nname = "router"\nrepo = "."\n[publish]\nforge = "https://api.github.com"\n' + table
    )
    return parse_spec(text, tmp_path).publish


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    source = make_repo(tmp_path / "source", {"src/app.py": "print('slow')\n"})
    return Checkout.create(source, tmp_path / "clone", git(source, "rev-parse", "HEAD"))


def commitlint(message: str) -> subprocess.CompletedProcess[str]:
    if COMMITLINT is None:
        if REQUIRED:
            pytest.fail("commitlint is required under CI (scripts/testenv/commitlint.sh installs it)")
        pytest.skip("no commitlint (scripts/testenv/commitlint.sh installs it and sets CRUCIBLE_COMMITLINT)")
    binary = Path(COMMITLINT) / "node_modules" / ".bin" / "commitlint"
    return subprocess.run(
        [str(binary), "--extends", "@commitlint/config-conventional", "--cwd", COMMITLINT],
        input=message,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_kept_candidate_is_committed_as_the_author_and_signed_off(
    checkout: Checkout, tmp_path: Path
) -> None:
    publish = spec_publish(tmp_path, TABLE)
    facts = Facts("Cut p50 latency", "router", "p50_ms", "r-1", 41.1, 10.9, "Cache the routes.", 3)
    (checkout.path / "src" / "app.py").write_text("print('fast')\n")

    sha = checkout.commit_paths(["src/app.py"], commit_message(publish, facts), author_identity(publish))

    who = git(checkout.path, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha)
    assert who == "Perf Bot <perf-bot@acme.dev>|Perf Bot <perf-bot@acme.dev>"
    body = git(checkout.path, "log", "-1", "--format=%B", sha)
    # git's own trailer parser (what DCO checks read) finds exactly the sign-off.
    trailers = git(checkout.path, "log", "-1", "--format=%(trailers:only,unfold)", sha)
    assert trailers == "Signed-off-by: Perf Bot <perf-bot@acme.dev>"
    assert body.splitlines()[0] == "perf(router): cache the routes"
    linted = commitlint(body + "\n")
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_a_merge_onto_a_moved_base_is_signed_off_too(checkout: Checkout, tmp_path: Path) -> None:
    publish = spec_publish(tmp_path, TABLE)
    head = checkout.head()
    tree = git(checkout.path, "rev-parse", f"{head}^{{tree}}")
    message = finish(
        publish, "router", "crucible: follow main to 0123456789ab\n\nrun r-1: the candidate on it"
    )

    sha = checkout.commit_tree(tree, [head], message, author_identity(publish))

    assert git(checkout.path, "log", "-1", "--format=%an|%(trailers:key=Signed-off-by,valueonly)", sha) == (
        "Perf Bot|Perf Bot <perf-bot@acme.dev>"
    )
    linted = commitlint(git(checkout.path, "log", "-1", "--format=%B", sha) + "\n")
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_without_the_keys_commits_keep_crucibles_identity_and_no_trailer(
    checkout: Checkout, tmp_path: Path
) -> None:
    publish = spec_publish(tmp_path, "")
    facts = Facts("o", "router", "p50_ms", "r-1", 2.0, 1.0, "cache", 1)
    (checkout.path / "src" / "app.py").write_text("print('fast')\n")

    sha = checkout.commit_paths(["src/app.py"], commit_message(publish, facts), author_identity(publish))

    assert git(checkout.path, "log", "-1", "--format=%an|%ae", sha) == "|".join(COMMIT_IDENTITY)
    assert git(checkout.path, "log", "-1", "--format=%(trailers)", sha) == ""
