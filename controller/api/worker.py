"""``/api/worker/runs/{id}/…``: the routes ``crucible worker`` talks to, with its round's token (ADR-0014).

These are not the operator API: a worker token (minted per round by ``services.remote.remote_rounds``)
is the only credential they take, and it is good for nothing else (the operator routes compare
against ``CRUCIBLE_API_TOKEN`` only). They stay out of ``/docs`` and ``docs/openapi.json``: the one
client is ``crucible worker`` of the same version, and the ledger's records are its contract
(``store.ledger_codec``), not a public schema.

- ``GET  job``: the round's job, the spec text and the components' base shas.
- ``GET  feedback``: a refinement round's feedback items (those of its job only), to quote.
- ``GET  components/{name}/bundle``: the start commits of a component as a git bundle.
- ``POST bundle?turn=N``: the worker's commits as a git bundle, verified before anything is recorded.
- ``/ledger/…``: the ``Ledger`` port, one route per method (``store.http_ledger`` is the client).
- ``POST outcome``: how the round ended; the token is revoked with it.

A hypothesis pod's token (ADR-0018) reads alike, sends its bundle for its own turn and reports its
own hypothesis; the routes that start or decide turns, record the baseline or move the run answer
403 to it (``RemoteRounds.require_round``): the controller decides those turns.

Errors are the API's usual ``{"detail", "kind"}`` (401 no valid token, 403 another run, a refused
bundle or an unproved commit, 404, 409), plus 400 ``kind = "value"`` for the ledger's ValueError.
"""

# No ``from __future__ import annotations``: FastAPI reads the route signatures, whose ``Grant``
# dependency is local to the router.
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse

from controller.domain.enums import EventKind, RunStatus, StopReason
from controller.services.remote.remote_rounds import RemoteRounds
from controller.store import ledger_codec as codec
from controller.store.records import WorkerRoundRecord

T = TypeVar("T")
JsonBody = Annotated[dict[str, Any], Body()]


def _value_error(exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": f"{type(exc).__name__}: {exc}", "kind": "value"}, status_code=400)


def _answer(produce: Callable[[], T], encode: Callable[[T], Any]) -> Any:
    """Run a ledger call; a ValueError (a caller bug, a malformed body) is a 400 of kind "value"."""
    try:
        return encode(produce())
    except (ValueError, KeyError, TypeError) as exc:
        return _value_error(exc)


def worker_router(remote: RemoteRounds) -> APIRouter:
    router = APIRouter(prefix="/api/worker/runs/{run_id}", tags=["worker"], include_in_schema=False)
    store = remote.store

    def grant(request: Request, run_id: str) -> WorkerRoundRecord:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else ""
        return remote.authenticate(token, run_id)

    Grant = Annotated[WorkerRoundRecord, Depends(grant)]

    @router.get("/job")
    def job(g: Grant) -> dict[str, Any]:
        return remote.job(g)

    @router.get("/feedback")
    def feedback(g: Grant) -> dict[str, Any]:
        return remote.feedback(g)

    @router.get("/components/{name}/bundle")
    def start_bundle(g: Grant, name: str) -> FileResponse:
        path = remote.start_bundle(g, name)
        return FileResponse(path, media_type="application/octet-stream", filename=path.name)

    @router.post("/bundle")
    async def receive_bundle(g: Grant, request: Request, turn: int | None = None) -> dict[str, Any]:
        data = await request.body()
        heads = await run_in_threadpool(remote.receive_bundle, g, data, turn)
        return {"heads": heads}

    @router.post("/outcome")
    def outcome(g: Grant, body: JsonBody) -> Any:
        return _answer(lambda: remote.finish(g, body), lambda _none: {"accepted": True})

    # -- the Ledger port ----------------------------------------------------------------------

    @router.get("/ledger/run")
    def get_run(g: Grant) -> Any:
        return codec.run_json(store.get_run(g.run_id))

    @router.get("/ledger/snapshot")
    def snapshot(g: Grant, last: int) -> Any:
        return codec.snapshot_json(store.turn_snapshot(g.run_id, last=last))

    @router.post("/ledger/baseline/start")
    def start_baseline(g: Grant) -> Any:
        remote.require_round(g)
        store.start_baseline(g.run_id)
        return {}

    @router.post("/ledger/baseline")
    def set_baseline(g: Grant, body: JsonBody) -> Any:
        remote.require_round(g)
        return _answer(
            lambda: store.set_baseline(g.run_id, float(body["value"]), dict(body["event_payload"])),
            lambda _none: {},
        )

    @router.post("/ledger/samples")
    def add_samples(g: Grant, body: JsonBody) -> Any:
        remote.require_round(g)
        return _answer(
            lambda: store.add_samples(g.run_id, int(body["turn"]), codec.decode_samples(body["samples"])),
            lambda _none: {},
        )

    @router.get("/ledger/samples")
    def list_samples(g: Grant, turn: int | None = None) -> Any:
        return [codec.sample_record_json(s) for s in store.list_samples(g.run_id, turn)]

    @router.post("/ledger/turns")
    def start_turn(g: Grant, body: JsonBody) -> Any:
        remote.require_round(g)
        return _answer(
            lambda: store.start_turn(
                g.run_id,
                int(body["number"]),
                int(body["round"]),
                event=codec.decode_event_spec(body.get("event")),
            ),
            codec.turn_json,
        )

    @router.post("/ledger/turns/{number}/decision")
    def decide_turn(g: Grant, number: int, body: JsonBody) -> Any:
        remote.require_round(g)

        def decide() -> Any:
            event = codec.decode_event_spec(body["event"])
            if event is None:
                raise ValueError("event is required")
            return remote.decide_turn(
                g,
                number,
                codec.decode_decision(body["decision"]),
                champion=codec.decode_champion(body.get("champion")),
                component_heads={str(k): str(v) for k, v in body["component_heads"].items()},
                event=event,
                samples=codec.decode_samples(body.get("samples", [])),
                hypotheses=codec.decode_final_hypotheses(body.get("hypotheses")),
            )

        return _answer(decide, codec.turn_json)

    @router.post("/ledger/turns/{number}/hypotheses")
    def report_hypothesis(g: Grant, number: int, body: JsonBody) -> Any:
        return _answer(
            lambda: remote.report_hypothesis(g, number, codec.decode_report(body)), codec.hypothesis_json
        )

    @router.get("/ledger/hypotheses")
    def list_hypotheses(g: Grant, turn: int | None = None) -> Any:
        return [codec.hypothesis_json(h) for h in store.list_hypotheses(g.run_id, turn)]

    @router.post("/ledger/events")
    def append_event(g: Grant, body: JsonBody) -> Any:
        remote.require_round(g)
        return _answer(
            lambda: store.append_event(g.run_id, EventKind(body["kind"]), dict(body["payload"])),
            codec.event_json,
        )

    @router.get("/ledger/events")
    def list_events(
        g: Grant,
        after_id: int = 0,
        limit: int | None = None,
        filter_kinds: bool = False,
        kind: Annotated[list[str] | None, Query()] = None,
    ) -> Any:
        def read() -> Any:
            kinds = {EventKind(k) for k in kind or []} if filter_kinds else None
            return store.list_events(g.run_id, after_id=after_id, limit=limit, kinds=kinds)

        return _answer(read, lambda rows: [codec.event_json(e) for e in rows])

    @router.post("/ledger/status")
    def set_status(g: Grant, body: JsonBody) -> Any:
        remote.require_round(g)

        def move() -> Any:
            reason = body.get("stop_reason")
            return store.set_run_status(
                g.run_id,
                RunStatus(body["status"]),
                stop_reason=StopReason(reason) if reason else None,
                stop_message=body.get("stop_message"),
            )

        return _answer(move, codec.run_json)

    return router
