"""``/api/worker/runs/{id}/…``: the routes ``crucible worker`` talks to, with its round's token (ADR-0014).

These are not the operator API: a worker token (minted per round by ``services.remote.remote_rounds``)
is the only credential they take, and it is good for nothing else (the operator routes compare
against ``CRUCIBLE_API_TOKEN`` only). Every request and answer is a schema of
``store.worker_protocol``, which ``crucible worker`` imports too (ADR-0028), so the routes are in
``/docs`` and ``docs/openapi.json`` under the tag ``worker``, pinned by the golden test like the rest.

- ``GET  job``: the round's job, the spec text and the components' base shas.
- ``GET  feedback``: a refinement round's feedback items (those of its job only), to quote.
- ``GET  components/{name}/bundle``: the start commits of a component as a git bundle.
- ``POST bundle?turn=N``: the worker's commits as a git bundle, verified before anything is recorded.
- ``/ledger/…``: the ``Ledger`` port, one route per method (``store.http_ledger`` is the client),
  but for the run's status, which the controller records from the round's outcome (ADR-0031); a
  worker appends only progress events (``turn_step``, ``sample``), the rest come with the write they
  belong to (a started turn, a decision, the baseline), each of the kind that write makes.
  ``ledger/snapshot?wait_for_turn=T`` is a long poll (``turn_wait.await_turn``): a warm pod holding a
  hypothesis taken ahead of turn T waits in it for T's start or its withdrawal (ADR-0051).
- ``POST outcome``: how the round ended; the token is revoked with it.
- ``POST confirmation``: a confirmation's samples of a claimed keep (ADR-0043), with its own token
  (good for ``job``, the start bundles, the ledger's reads and this); the controller's conclusion.
- ``GET  slot/next?after=T``: a warm hypothesis pod's next hypothesis and its token (ADR-0034), with
  the pod's slot token, which no other route takes (a long poll of up to ``slots.WAIT_S``).

A hypothesis pod's token (ADR-0018) reads alike, sends its bundle for its own turn and reports its
own hypothesis; the routes that start or decide turns, record the baseline or move the run answer
403 to it (``RemoteRounds.require_round``, a dependency, so before the body is read): the controller
decides those turns.

Errors are the API's usual ``{"detail", "kind"}`` (401 no valid token, 403 another run, a refused
bundle or an unproved commit, 404, 409, 413 a bundle past the cap, of kind "too_large", 422 a body
that does not match its schema), plus 400 ``kind = "value"`` for the ledger's ValueError and 400
``kind = "protocol"`` for a client of another protocol version.
"""

# No ``from __future__ import annotations``: FastAPI reads the route signatures, whose ``Grant``
# dependency is local to the router.
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse
from fastapi.routing import APIRoute
from starlette.background import BackgroundTask

from controller.api.uploads import stream_to_file
from controller.domain.enums import EventKind
from controller.services.remote.remote_rounds import RemoteRounds
from controller.services.remote.turn_wait import await_turn
from controller.store.records import (
    EventRecord,
    HypothesisRecord,
    HypothesisReport,
    RunRecord,
    SampleRecord,
    TurnRecord,
    TurnSnapshot,
    WorkerRoundRecord,
)
from controller.store.worker_protocol import (
    PROTOCOL_HEADER,
    PROTOCOL_VERSION,
    Accepted,
    BaselineReport,
    BundleHeads,
    ConfirmationOutcome,
    ConfirmationReport,
    DecisionReport,
    Done,
    EventSpec,
    JobInputs,
    RoundEnd,
    RoundFeedback,
    SamplesReport,
    SlotNext,
    TurnStart,
)


class _ProtocolMismatch(Exception):
    pass


class _WorkerRoute(APIRoute):
    """A route whose ValueError (a caller bug the ledger refuses) answers 400 of kind "value", and
    whose client of another protocol version gets 400 of kind "protocol" (module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except _ProtocolMismatch as exc:
                return JSONResponse({"detail": str(exc), "kind": "protocol"}, status_code=400)
            except ValueError as exc:
                return JSONResponse(
                    {"detail": f"{type(exc).__name__}: {exc}", "kind": "value"}, status_code=400
                )

        return route


def _protocol(
    version: Annotated[int | None, Header(alias=PROTOCOL_HEADER, description="absent: the current")] = None,
) -> None:
    if version is not None and version != PROTOCOL_VERSION:
        raise _ProtocolMismatch(
            f"this controller speaks worker protocol {PROTOCOL_VERSION}, the worker {version}: "
            "run a crucible worker of the controller's release"
        )


def worker_router(remote: RemoteRounds) -> APIRouter:
    router = APIRouter(
        prefix="/api/worker/runs/{run_id}",
        tags=["worker"],
        dependencies=[Depends(_protocol)],
        route_class=_WorkerRoute,
    )

    def grant(request: Request, run_id: str) -> WorkerRoundRecord:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else ""
        return remote.authenticate(token, run_id)

    def round_grant(g: Annotated[WorkerRoundRecord, Depends(grant)]) -> WorkerRoundRecord:
        remote.require_round(g)
        return g

    def slot_grant(request: Request, run_id: str) -> WorkerRoundRecord:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else ""
        return remote.authenticate(token, run_id, slot=True)

    @router.get("/slot/next")
    def next_hypothesis(g: Annotated[WorkerRoundRecord, Depends(slot_grant)], after: int = -1) -> SlotNext:
        taken = remote.next_hypothesis(g, after)
        token = taken.env.get("CRUCIBLE_WORKER_TOKEN") if taken.env is not None else None
        return SlotNext(done=taken.done, turn=taken.turn, index=taken.index, token=token)

    _round_routes(router, remote, Depends(grant))
    _ledger_reads(router, remote, Depends(grant))
    _ledger_writes(router, remote, Depends(grant), Depends(round_grant))
    return router


def _round_routes(router: APIRouter, remote: RemoteRounds, grant: Any) -> None:
    """The round's inputs (job, feedback, start bundles), its bundles and its end."""

    @router.get("/job")
    def job(g: WorkerRoundRecord = grant) -> JobInputs:
        return remote.job(g)

    @router.get("/feedback")
    def feedback(g: WorkerRoundRecord = grant) -> RoundFeedback:
        return remote.feedback(g)

    @router.get(
        "/components/{name}/bundle",
        response_class=FileResponse,
        responses={200: {"content": {"application/octet-stream": {}}, "description": "a git bundle"}},
    )
    def start_bundle(name: str, have: str | None = None, g: WorkerRoundRecord = grant) -> FileResponse:
        path = remote.start_bundle(g, name, have)
        return FileResponse(path, media_type="application/octet-stream", filename=path.name)

    @router.post(
        "/bundle",
        response_model=BundleHeads,  # or the 413 of ``too_large``, a response of its own
        openapi_extra={
            "requestBody": {"content": {"application/octet-stream": {}}, "description": "a git bundle"}
        },
    )
    async def receive_bundle(
        request: Request, turn: int | None = None, g: WorkerRoundRecord = grant
    ) -> BundleHeads | Response:
        path = remote.open_upload(g)  # 409 while this token has another upload in flight
        handed_over = False
        try:
            if not await stream_to_file(request, path, remote.max_bundle_bytes):
                answer = too_large(remote, g, turn, path)
                handed_over = True  # the upload ends in the answer's background task
                return answer
            heads = await run_in_threadpool(remote.receive_bundle, g, path, turn)
        finally:
            if not handed_over:
                remote.close_upload(g, path)
        return BundleHeads(heads=heads)

    @router.post("/confirmation")
    def confirmation(body: ConfirmationReport, g: WorkerRoundRecord = grant) -> ConfirmationOutcome:
        return remote.confirm(g, body.samples)

    @router.post("/outcome")
    def outcome(body: RoundEnd, g: WorkerRoundRecord = grant) -> Accepted:
        remote.finish(g, body)
        return Accepted()


def too_large(remote: RemoteRounds, grant: WorkerRoundRecord, turn: int | None, path: Path) -> JSONResponse:
    """413 for an upload past the cap, sent before its refusal is recorded (issue 21: three refusals'
    store writes, one after another, made the last 413 come over a second after its cap). The token
    is marked refusing first, so it answers 409 everywhere until the background task has recorded the
    refusal and revoked it (``upload_marks``). That task runs once the answer is sent, whether or not
    the client is still there (uvicorn drops a send to a gone client, and no middleware here buffers
    the answer), in a thread that a cancellation waits for (Starlette's ``run_in_threadpool``), so the
    mark is released only after the record, whatever happens to the request."""
    detail = remote.oversized(grant, turn)  # ForbiddenError (the upload is closed) for another turn

    def record() -> None:
        try:
            remote.refuse_oversized(grant, turn)
        finally:
            remote.close_upload(grant, path)

    return JSONResponse(
        {"detail": detail, "kind": "too_large"}, status_code=413, background=BackgroundTask(record)
    )


def _ledger_reads(router: APIRouter, remote: RemoteRounds, grant: Any) -> None:
    """The ``Ledger`` port's reads: any token of the run may read it."""
    store = remote.store

    @router.get("/ledger/run")
    def get_run(g: WorkerRoundRecord = grant) -> RunRecord:
        return store.get_run(g.run_id)

    @router.get("/ledger/snapshot")
    def snapshot(
        last: int,
        g: WorkerRoundRecord = grant,
        wait_for_turn: Annotated[
            int | None,
            Query(
                description="wait (up to 10 s) until the run's highest turn is at least this one, the run "
                "stops or the token is revoked (401): a hypothesis taken ahead of its turn (ADR-0051)"
            ),
        ] = None,
    ) -> TurnSnapshot:
        if wait_for_turn is None:
            return store.turn_snapshot(g.run_id, last=last)
        return await_turn(store, remote.slots, g, wait_for_turn, last=last)

    @router.get("/ledger/samples")
    def list_samples(turn: int | None = None, g: WorkerRoundRecord = grant) -> list[SampleRecord]:
        return store.list_samples(g.run_id, turn)

    @router.get("/ledger/hypotheses")
    def list_hypotheses(turn: int | None = None, g: WorkerRoundRecord = grant) -> list[HypothesisRecord]:
        return store.list_hypotheses(g.run_id, turn)

    @router.get("/ledger/events")
    def list_events(
        g: WorkerRoundRecord = grant,
        after_id: int = 0,
        limit: int | None = None,
        filter_kinds: bool = False,
        kind: Annotated[list[EventKind] | None, Query()] = None,
    ) -> list[EventRecord]:
        kinds = set(kind or []) if filter_kinds else None
        return store.list_events(g.run_id, after_id=after_id, limit=limit, kinds=kinds)


def _ledger_writes(router: APIRouter, remote: RemoteRounds, grant: Any, round_grant: Any) -> None:
    """The ``Ledger`` port's writes; all but a hypothesis report take the round's own token."""
    store = remote.store

    @router.post("/ledger/baseline/start")
    def start_baseline(g: WorkerRoundRecord = round_grant) -> Done:
        store.start_baseline(g.run_id)
        return Done()

    @router.post("/ledger/baseline")
    def set_baseline(body: BaselineReport, g: WorkerRoundRecord = round_grant) -> Done:
        remote.set_baseline(g, body.value, body.event_payload)
        return Done()

    @router.post("/ledger/samples")
    def add_samples(body: SamplesReport, g: WorkerRoundRecord = round_grant) -> Done:
        remote.add_baseline_samples(g, body.turn, body.samples)
        return Done()

    @router.post("/ledger/turns")
    def start_turn(body: TurnStart, g: WorkerRoundRecord = round_grant) -> TurnRecord:
        return remote.start_turn(g, body)

    @router.post("/ledger/turns/{number}/decision")
    def decide_turn(number: int, body: DecisionReport, g: WorkerRoundRecord = round_grant) -> TurnRecord:
        return remote.decide_turn(
            g,
            number,
            body.decision,
            champion=body.champion,
            component_heads=body.component_heads,
            event=body.event.pair(),
            samples=body.samples,
            hypotheses=body.hypotheses,
        )

    @router.post("/ledger/turns/{number}/hypotheses")
    def report_hypothesis(
        number: int, body: HypothesisReport, g: WorkerRoundRecord = grant
    ) -> HypothesisRecord:
        return remote.report_hypothesis(g, number, body)

    @router.post("/ledger/events")
    def append_event(body: EventSpec, g: WorkerRoundRecord = round_grant) -> EventRecord:
        return remote.append_event(g, body)
