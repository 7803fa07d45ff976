"""What ``resume`` and ``cancel`` need besides the run service: is it safe to continue a run after a
crash, what did a dead driver leave running, and stopping one from outside.

Resume (``RunService.resume``) first proves it is safe here (same spec fingerprint, same bases, and
no live driver: the run's lease is free or ran out without being renewed,
``liveness.await_takeover``), takes the lease, kills every process group the dead driver recorded
on this host (``kill_leftovers``), then drives the run again, which re-runs any turn that was cut
off before its decision and, for a run that was watching or in a round, goes on from there.

Cancel never signals a process (it may run on another host): it sets the run's cancel flag, which
the driver's heartbeat reads; a run nobody drives is marked cancelled at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from controller.config.settings import Settings
from controller.config.spec import Spec, load_spec
from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.domain.errors import LeaseHeldError, RefusedError, SpecError
from controller.forge.base import Forge
from controller.services.execution.liveness import await_takeover, process_owner
from controller.services.execution.pgroups import GroupRegistry
from controller.services.execution.runs import resolve_bases
from controller.services.views.layout import RunLayout
from controller.services.views.specs import stored_spec
from controller.store.ports import Recovery
from controller.workspace.process import kill_process_group


def check_resumable(
    store: Recovery,
    run_id: str,
    forge: Forge | None = None,
    *,
    on_wait: Callable[[str, float], None] | None = None,
) -> Spec:
    """Raise RefusedError naming the mismatch unless ``run_id`` may be resumed; return its spec.

    The last check waits for a lease whose holder stopped heart-beating to run out (at most one
    lease; ``on_wait`` is told who and how long) and refuses as soon as the holder renews it."""
    run = store.get_run(run_id)
    if run.status in (RunStatus.COMPLETED, RunStatus.FAILED):
        raise RefusedError(f"run {run_id} already finished ({run.status}: {run.stop_reason})")
    spec = stored_spec(store, run_id)
    if run.spec_path and Path(run.spec_path).is_file():
        try:
            current = load_spec(Path(run.spec_path))
        except SpecError as exc:
            raise RefusedError(f"the spec file {run.spec_path} no longer parses: {exc}") from exc
        if current.fingerprint() != run.spec_fingerprint:
            raise RefusedError(
                f"the spec fingerprint changed since the run started ({run.spec_path}): commands, metric, "
                "thresholds or globs differ; start a new run instead"
            )
    publishes = bool(run.options.get("publish_prs"))
    if publishes and forge is None:
        raise RefusedError(f"run {run_id} publishes pull requests: set CRUCIBLE_GITHUB_TOKEN to resume it")
    bases = resolve_bases(spec, forge if publishes else None)
    for comp in store.list_components(run_id):
        if bases.get(comp.name) != comp.base_sha:
            raise RefusedError(
                f"{comp.name}: base {comp.base_ref!r} moved from {comp.base_sha[:12]} to "
                f"{(bases.get(comp.name) or '?')[:12]} since the run started"
            )
    await_takeover(store, run_id, on_wait=on_wait)
    return spec


def recorded_groups(settings: Settings, store: Recovery, run_id: str) -> list[tuple[int, str]]:
    """Every process group recorded for the run: in its directory (crucible's own commands) and in
    the store (where other writers, such as a worker reporting to the controller, record them)."""
    registry = GroupRegistry(RunLayout(settings.run_dir(run_id), ()).process_groups)
    return sorted(set(registry.list()) | set(store.list_process_groups(run_id)))


def kill_leftovers(settings: Settings, store: Recovery, run_id: str) -> int:
    """Kill the process groups a dead controller left running; return how many were alive."""
    killed = 0
    registry = GroupRegistry(RunLayout(settings.run_dir(run_id), ()).process_groups)
    for pgid, _command in recorded_groups(settings, store, run_id):
        # A recorded pgid may belong to an unrelated process by now (after a reboot): kill it only
        # if its leader still carries this run's id in its environment.
        if kill_process_group(pgid, require_env={"CRUCIBLE_RUN_ID": run_id}):
            killed += 1
        store.clear_process_group(run_id, pgid)
        registry.clear(pgid)
    return killed


def cancel(settings: Settings, store: Recovery, run_id: str) -> str:
    """Stop a run: set its cancel flag for whoever drives it (from any host), or, when nobody
    does, mark it cancelled here and kill what a dead driver left on this host."""
    run = store.get_run(run_id)
    if run.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
        raise RefusedError(f"run {run_id} already finished ({run.status})")
    store.request_cancel(run_id)
    owner = process_owner()
    try:
        store.claim_run(run_id, owner, settings.lease_ttl_s)
    except LeaseHeldError as held:
        return (
            f"cancel requested: {held.owner} drives the run and stops it at its next heartbeat "
            f"(within {settings.lease_ttl_s / 3:.0f} s; if it died, when its lease runs out)"
        )
    try:
        kill_leftovers(settings, store, run_id)
        message = "stopped: cancelled by the user"
        store.set_run_status(
            run_id, RunStatus.CANCELLED, stop_reason=StopReason.CANCELLED, stop_message=message
        )
        store.append_event(
            run_id,
            EventKind.COMPLETED,
            {"status": "cancelled", "stop_reason": "cancelled", "message": message},
        )
    finally:
        store.release_lease(run_id, owner)
    return "cancelled"
