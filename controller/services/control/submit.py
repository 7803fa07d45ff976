"""Runs submitted to a controller (``POST /api/runs``), and the operator's cancel and resume there.

The spec arrives as text: it is validated first (a SpecError names the key and nothing is stored),
then the run is recorded as ``pending`` with its options, and a scheduler picks it up. Relative paths
in the spec (``repo = "."``) resolve against ``spec_dir``, a directory on the controller's machine
(``crucible loop --server`` sends the spec file's own directory; default: the server's working
directory). Over the API, ``admission`` holds the spec to what a write-token holder may ask of the
controller (``admission``): checked before the forge is built, so a refused forge gets no request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controller.config.spec import Spec, parse_spec
from controller.domain.enums import FINISHED_STATUSES, RunStatus
from controller.domain.errors import RefusedError, SpecError
from controller.forge.base import Forge
from controller.services.control.admission import Admission
from controller.services.execution.runs import check_sandbox, create_run
from controller.store.ports import RunControl

ForgeFactory = Callable[[Spec], Forge]


@dataclass(frozen=True)
class Submission:
    spec: str
    spec_dir: str | None = None
    turns: int | None = None
    publish_prs: bool = False
    watch_feedback: bool = False


def submit_run(
    store: RunControl,
    sub: Submission,
    forge_for: ForgeFactory | None = None,
    admission: Admission | None = None,
) -> str:
    """Validate and record a submitted run (pending); its id. SpecError names the offending key."""
    spec_dir = Path(sub.spec_dir) if sub.spec_dir else Path.cwd()
    if not spec_dir.is_absolute():
        raise SpecError("spec_dir", f"must be an absolute path on the controller, got {sub.spec_dir!r}")
    if not spec_dir.is_dir():
        raise SpecError("spec_dir", f"no such directory on the controller: {spec_dir}")
    try:
        spec = parse_spec(sub.spec, spec_dir)
    except SpecError as exc:
        if exc.key:
            raise
        raise SpecError("spec", exc.message) from None  # TOML syntax: the field is the spec text
    if admission is not None:
        admission.check(spec)
    check_sandbox(spec)  # what this controller's sandbox cannot enforce is refused before anything is stored
    if sub.watch_feedback and not sub.publish_prs:
        raise SpecError("watch_feedback", "needs publish_prs (feedback arrives on the published PRs)")
    if sub.watch_feedback and spec.feedback is None:
        raise SpecError("feedback", "a [feedback] table is required with watch_feedback")
    forge = None
    if sub.publish_prs:
        if forge_for is None:
            raise SpecError("publish_prs", "this controller has no forge credentials configured")
        forge = forge_for(spec)
    return create_run(
        store,
        spec,
        sub.spec,
        spec_dir / "crucible.toml",
        turns=sub.turns,
        options={"publish_prs": sub.publish_prs, "watch_feedback": sub.watch_feedback},
        forge=forge,
    )


def reopen(store: RunControl, run_id: str) -> str:
    """Make a cancelled run claimable again (the scheduler resumes it); RefusedError for a finished
    one. A run still pending or running needs nothing: the message says so."""
    run = store.get_run(run_id)
    if run.status in FINISHED_STATUSES - {RunStatus.CANCELLED}:
        raise RefusedError(f"run {run_id} already finished ({run.status}: {run.stop_reason})")
    if run.status is RunStatus.CANCELLED:
        store.set_run_status(run_id, RunStatus.RUNNING)
        return "resuming: the scheduler will pick it up"
    return f"run {run_id} is {run.status}; the scheduler drives it"
