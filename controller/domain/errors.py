"""One root error, split by what the caller should do about it (CONTRIBUTING.md, rule 6).

The CLI maps these to exit codes and the API to HTTP statuses, each in exactly one place;
nothing below those edges knows about either.
"""

from __future__ import annotations


class CrucibleError(Exception):
    """Root of every error crucible raises on purpose."""


class PermanentError(CrucibleError):
    """Retrying will not help: the input or the state must change first."""


class RetryLaterError(CrucibleError):
    """A transient condition (a busy database, a rate limit); the same call may succeed later."""


class SpecError(PermanentError):
    """A run spec is malformed. ``key`` is the dotted path of the offending field."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)


class NotFoundError(PermanentError):
    """The named run, turn or object does not exist."""


class ConflictError(PermanentError):
    """The request contradicts the stored state (a duplicate, an illegal state transition)."""


class LeaseHeldError(ConflictError):
    """Another process holds the run's lease and has not let it expire (it is driving the run)."""

    def __init__(self, run_id: str, owner: str, expires_in_s: float) -> None:
        self.run_id, self.owner, self.expires_in_s = run_id, owner, expires_in_s
        super().__init__(f"run {run_id} is held by {owner} (lease expires in {expires_in_s:.0f} s)")


class LeaseLostError(ConflictError):
    """This process's lease on a run was taken over (it stopped heart-beating long enough)."""


class RefusedError(PermanentError):
    """crucible declines to act because acting could lose the user's work (accept, resume)."""


class UnauthenticatedError(PermanentError):
    """The request carries no valid credential (a missing, unknown, expired or revoked token)."""


class ForbiddenError(PermanentError):
    """The credential is valid but does not grant this (a worker token used on another run)."""


class UnconfirmedError(ForbiddenError):
    """A claimed keep that its confirmation did not reproduce (ADR-0043): the worker settles the turn
    as rejected ``unconfirmed`` instead."""


class ConfirmingError(RetryLaterError):
    """A claimed keep is being confirmed (ADR-0043): send the same decision again to wait on."""


class SchemaOutdatedError(PermanentError):
    """The database schema is older than this code; run ``crucible db upgrade``."""


class GitError(CrucibleError):
    """A git command failed; carries the command and its stderr so the message is readable."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"git {' '.join(args)} exited {returncode}: {stderr.strip()}")
