"""Pushing crucible's commits to a forge: explicit refspecs, never ``+``, credentials only in the env.

A force push could destroy a reviewer's commits on the PR branch, so the refspec never carries ``+``
and ``--force`` is never passed: a non-fast-forward is refused by the server and surfaces here as
``PushRejected`` (someone else moved the branch). Credentials arrive as ``GIT_CONFIG_*`` variables
(``http.extraHeader``), so they are neither on a command line (visible in ``/proc``) nor written to
any ``.git/config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from controller.domain.errors import ConflictError, GitError
from controller.workspace.git import git_env, run_git, run_git_bytes


class PushRejected(ConflictError):
    """The forge refused the push as a non-fast-forward: the branch moved under us."""


def push_commit(clone: Path, url: str, sha: str, branch: str, auth_env: Mapping[str, str]) -> None:
    """Make ``refs/heads/<branch>`` at ``url`` point at ``sha`` by a fast-forward push."""
    if branch.startswith(("+", "-")) or ":" in branch or not branch:
        raise ValueError(f"not a plain branch name: {branch!r}")
    refspec = f"{sha}:refs/heads/{branch}"
    env = git_env(dict(auth_env))
    code, out, err = run_git_bytes(
        ["-c", "credential.helper=", "push", "--porcelain", "--no-verify", url, refspec],
        clone,
        env=env,
        check=False,
    )
    if code == 0:
        return
    text = out.decode("utf-8", "replace") + err
    if "non-fast-forward" in text or "[rejected]" in text or "fetch first" in text:
        raise PushRejected(f"the forge refused a non-fast-forward push to {branch}")
    raise GitError(["push", "<url>", refspec], code, _scrub(text, auth_env))


def fetch_commit(clone: Path, url: str, ref: str, auth_env: Mapping[str, str]) -> str:
    """Fetch ``ref`` from ``url`` into the clone (no local ref written); return the fetched sha."""
    env = git_env(dict(auth_env))
    run_git(["-c", "credential.helper=", "fetch", "--quiet", "--no-tags", url, ref], clone, env=env)
    return run_git(["rev-parse", "FETCH_HEAD^{commit}"], clone)


def _scrub(text: str, auth_env: Mapping[str, str]) -> str:
    for value in auth_env.values():
        if len(value) >= 8:
            text = text.replace(value, "[REDACTED]")
    return text
