"""workspace layer (docs/architecture.md): where crucible touches git, processes and the sandbox.

Isolated per-run checkouts (shared clones under CRUCIBLE_HOME) with exact restore, commands run in
their own process group with timeouts and capped output, the scrubbed environment, and bubblewrap.
Imports only ``controller.domain``, ``controller.config`` and the standard library.
"""

from controller.workspace.checkout import COMMIT_IDENTITY, CRUCIBLE_REF_PREFIX, Checkout
from controller.workspace.envscrub import PROTOCOL_VARS, ScrubbedEnv, redact, scrub_env
from controller.workspace.git import git_env, is_ancestor, resolve_ref, run_git
from controller.workspace.process import (
    CommandResult,
    kill_process_group,
    process_group_alive,
    run_command,
)
from controller.workspace.sandbox import bwrap_path, resolve_sandbox, wrap_command

__all__ = [
    "COMMIT_IDENTITY",
    "CRUCIBLE_REF_PREFIX",
    "PROTOCOL_VARS",
    "Checkout",
    "CommandResult",
    "ScrubbedEnv",
    "bwrap_path",
    "git_env",
    "is_ancestor",
    "kill_process_group",
    "process_group_alive",
    "redact",
    "resolve_ref",
    "resolve_sandbox",
    "run_command",
    "run_git",
    "scrub_env",
    "wrap_command",
]
