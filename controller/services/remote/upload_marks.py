"""Which worker tokens have a bundle upload in flight, and which are being refused (issue 21).

A token has one upload at a time: a second one while the first is read gets ConflictError (409), so
uploads do not queue up on a token. An upload past the cap is answered 413 the moment the cap is
crossed, and its refusal (the turn's ``policy_violation``, the token revoked) is recorded after that
answer: a store write each, which three refusals at once used to wait on in turn before answering. The
mark is what keeps that order safe: from the 413 until the refusal is recorded the token is
``refusing``, and every worker route answers it 409 (``require_usable``, called by
``RemoteRounds.authenticate``), so no request of it (a decision keeping an earlier bundle's commit, a
second upload) slips in between the 413 and the revocation; after it, the token is revoked (401).

The marks live in this process: a run's workers talk to the replica their controller URL names
(docs/kubernetes.md), and ADR-0042 says why they are not in the database and what that leaves open.
"""

from __future__ import annotations

import threading

from controller.domain.errors import ConflictError

_READING = "reading"
_REFUSING = "refusing"


class UploadMarks:
    """The marks, by token hash (module docstring); safe to use from any thread."""

    def __init__(self) -> None:
        self._marks: dict[str, str] = {}
        self._lock = threading.Lock()

    def claim(self, token_hash: str) -> None:
        """Mark an upload of the token as in flight; ConflictError while another one is."""
        with self._lock:
            if token_hash in self._marks:
                raise ConflictError("an upload with this token is in progress; one at a time")
            self._marks[token_hash] = _READING

    def refusing(self, token_hash: str) -> None:
        """The token's upload was refused and the refusal is not recorded yet: the token is good for
        nothing until ``release`` (after the record, which revokes it)."""
        with self._lock:
            self._marks[token_hash] = _REFUSING

    def require_usable(self, token_hash: str) -> None:
        """ConflictError while the token's refused upload is being recorded (module docstring)."""
        with self._lock:
            refusing = self._marks.get(token_hash) == _REFUSING
        if refusing:
            raise ConflictError("this token's upload was refused and the token is being revoked")

    def release(self, token_hash: str) -> None:
        """The upload is over (its bundle verified, or its refusal recorded)."""
        with self._lock:
            self._marks.pop(token_hash, None)
