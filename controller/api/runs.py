"""``/api/runs…``: the operator routes of docs/api.md over the run services.

Each route parses, calls one service function and returns a typed view (``services.views.schemas``), so the
OpenAPI document is the contract; errors are crucible's own, mapped in ``errors.py``. Routes are plain
``def`` functions: FastAPI runs them in its thread pool, where the store's blocking calls belong.
Reads page in SQL (``limit``, ``offset``/``after`` and filters); pages of decided turns are served
from ``pagecache`` while the run has not moved.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Protocol

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from controller.api.bodies import (
    ERRORS,
    Created,
    Message,
    Patch,
    RoundCreate,
    RunCreate,
    RunPage,
    TurnPage,
    run_page_json,
)
from controller.api.hotpath import MAX_PAGE, turn_page_key
from controller.api.pagecache import PageCache
from controller.config.settings import Settings
from controller.domain.enums import Outcome, RunStatus
from controller.services.control.admission import Admission
from controller.services.control.submit import ForgeFactory, Submission, submit_run
from controller.services.views import schemas
from controller.services.views.patching import patch_text
from controller.services.views.reads import feedback_view, pulls_view, run_view, turns_page
from controller.store.ports import ApiRuns

JSON = "application/json"


class RunControl(Protocol):
    """What the routes ask of whoever drives runs (the scheduler of ``crucible serve``)."""

    def cancel(self, run_id: str) -> str:
        """Stop the run (wherever it is driven); a message saying what happened."""
        ...

    def resume(self, run_id: str) -> str:
        """Let a cancelled or crashed run go on; RefusedError for a finished one."""
        ...

    def steer(self, run_id: str, text: str, component: str | None = None) -> schemas.RoundRequest:
        """Queue a refinement round seeded with ``text`` (RefusedError unless the run watches feedback)."""
        ...

    def wake(self) -> None:
        """A run was submitted: look for work now rather than at the next tick."""
        ...


def runs_router(
    settings: Settings,
    store: ApiRuns,
    control: RunControl,
    auth: Callable[..., Awaitable[None]],
    forge_for: ForgeFactory | None = None,
    pages: PageCache[int] | None = None,
    admission: Admission | None = None,
) -> APIRouter:
    """The routes; ``pages`` keeps rendered turn pages (shared with ``hotpath``, which serves them).
    ``admission``: what a submitted spec may ask of the controller (default: the settings' rules
    over no environment, as strict as they go)."""
    router = APIRouter(prefix="/api/runs", tags=["runs"], dependencies=[Depends(auth)], responses=ERRORS)
    pages = pages if pages is not None else PageCache()
    admit = admission if admission is not None else Admission.of(settings, {})

    @router.post("", status_code=201, response_model=Created)
    def create(body: RunCreate) -> Created:
        """Submit a run: the spec is validated first (422 naming the key), then the run is pending."""
        submission = Submission(
            spec=body.spec,
            spec_dir=body.spec_dir,
            turns=body.turns,
            publish_prs=body.publish_prs,
            watch_feedback=body.watch_feedback,
        )
        run_id = submit_run(store, submission, forge_for, admit)
        control.wake()
        return Created(id=run_id)

    @router.get("", response_model=RunPage)
    def list_runs(
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
        status: RunStatus | None = None,
    ) -> Response:
        """Runs, newest first."""
        records = store.run_summaries(limit=limit + 1, offset=offset, status=status)
        return Response(content=run_page_json(records, limit=limit, offset=offset), media_type=JSON)

    @router.get("/{run_id}", response_model=schemas.Run)
    def show(run_id: str) -> schemas.Run:
        """One run as ``crucible loop --json`` prints it (diffs included)."""
        return run_view(settings, store, run_id)

    @router.post("/{run_id}/cancel", response_model=Message)
    def cancel(run_id: str) -> Message:
        """Stop the run: its driver cancels the running command and restores the turn."""
        return Message(message=control.cancel(run_id))

    @router.post("/{run_id}/resume", response_model=Message)
    def resume(run_id: str) -> Message:
        """Let a cancelled (or crashed) run go on; a turn cut off mid-way is run again from its start."""
        return Message(message=control.resume(run_id))

    @router.get("/{run_id}/turns", response_model=TurnPage)
    def turns(
        run_id: str,
        after: Annotated[int, Query(ge=0, le=2**31, description="turns numbered above this")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
        round: Annotated[int | None, Query(ge=0, le=2**31)] = None,
        outcome: Outcome | None = None,
    ) -> Response:
        """Decided turns in number order, a page at a time."""

        def render() -> bytes:
            items = turns_page(store, run_id, after=after, limit=limit + 1, round=round, outcome=outcome)
            more = len(items) > limit
            items = items[:limit]
            return (
                TurnPage(items=items, next_after=items[-1].turn if more else None).model_dump_json().encode()
            )

        key = turn_page_key(run_id, after, limit, round, outcome)
        body = pages.page(key, store.turns_version(run_id), render)
        return Response(content=body, media_type=JSON)

    @router.get("/{run_id}/patch", response_model=Patch)
    def patch(run_id: str) -> Patch:
        """The final patch, as ``crucible patch`` prints it."""
        return Patch(patch=patch_text(settings, store, run_id))

    @router.get("/{run_id}/pulls", response_model=list[schemas.PullRequest])
    def pulls(run_id: str) -> list[schemas.PullRequest]:
        """The run's draft pull requests."""
        store.get_run(run_id)
        return pulls_view(store, run_id)

    @router.get("/{run_id}/feedback", response_model=list[schemas.FeedbackItem])
    def feedback(run_id: str) -> list[schemas.FeedbackItem]:
        """Review feedback on the run's pull requests, with the trust verdicts."""
        return feedback_view(store, run_id).feedback

    @router.get("/{run_id}/replies", response_model=list[schemas.Reply])
    def replies(run_id: str) -> list[schemas.Reply]:
        """Replies crucible drafted for a human to post (crucible never posts them)."""
        return feedback_view(store, run_id).replies

    @router.get("/{run_id}/rounds", response_model=list[schemas.Round])
    def rounds_done(run_id: str) -> list[schemas.Round]:
        """The refinement rounds that finished, with what each addressed and pushed."""
        return feedback_view(store, run_id).rounds

    @router.post("/{run_id}/rounds", status_code=202, response_model=schemas.RoundRequest)
    def rounds(run_id: str, body: RoundCreate) -> schemas.RoundRequest:
        """Start a refinement round by hand, seeded with the steer: for a run watching feedback, the
        steer is stored and the run's watch starts the round next (409 for any other run)."""
        return control.steer(run_id, body.steer, body.component)

    return router
