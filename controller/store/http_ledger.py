"""The ledger port over HTTP: what ``crucible worker`` gives the turn path inside a loop pod (ADR-0014).

A round executed away from the controller still reads and writes its run's record through the
``Ledger`` contract, but every call is a request to the controller's worker routes
(``/api/worker/runs/{id}/ledger/...``) carrying the round's bearer token. The controller answers
each call with the SQL store inside one transaction, so atomicity and the exactly-once decision
stay where they were: a ``decide_turn`` whose answer was lost and that is sent again is refused
with ConflictError, never applied twice. ``tests/ledger`` holds this class to the same suite as
the store.

Errors come back as the contract names them (the routes send ``kind``): 404 NotFoundError, 409
ConflictError, 400 ValueError, 401/403 Unauthenticated/ForbiddenError, 503 and transport failures
RetryLaterError. Measurements that are not finite never leave the process (``allow_nan=False``
raises ValueError before anything is sent).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from controller.domain.enums import EventKind, Reason, RunStatus, StopReason
from controller.domain.errors import (
    ConflictError,
    CrucibleError,
    ForbiddenError,
    NotFoundError,
    RetryLaterError,
    UnauthenticatedError,
)
from controller.store import ledger_codec as codec
from controller.store.ledger import Ledger
from controller.store.records import (
    ChampionUpdate,
    EventRecord,
    HypothesisRecord,
    HypothesisReport,
    RunRecord,
    Sample,
    SampleRecord,
    TurnDecision,
    TurnRecord,
    TurnSnapshot,
)

TokenFor = Callable[[str], str]
"""The bearer token to send for a run (a worker has one token, for its own run)."""

BeforeKeep = Callable[[str, int, Mapping[str, str]], None]
"""Called with (run id, turn, component -> commit) before a decision or a hypothesis report that
carries commits is sent: ``crucible worker`` uploads them as a bundle there, since the controller
refuses commits no verified bundle brought in."""

ERROR_OF_STATUS: dict[int, type[Exception]] = {
    401: UnauthenticatedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    503: RetryLaterError,
}


class HttpLedger:
    """A ``Ledger`` whose record lives behind the controller's worker routes (module docstring)."""

    def __init__(
        self,
        base_url: str,
        token: str | TokenFor,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        before_keep: BeforeKeep | None = None,
    ) -> None:
        self._token_for: TokenFor = (lambda _run: token) if isinstance(token, str) else token
        self._before_keep = before_keep
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HttpLedger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the Ledger methods -------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        return codec.decode_run(self._call("GET", run_id, "run"))

    def turn_snapshot(self, run_id: str, *, last: int) -> TurnSnapshot:
        return codec.decode_snapshot(self._call("GET", run_id, "snapshot", params={"last": last}))

    def start_baseline(self, run_id: str) -> None:
        self._call("POST", run_id, "baseline/start", body={})

    def set_baseline(self, run_id: str, value: float, event_payload: Mapping[str, Any]) -> None:
        self._call("POST", run_id, "baseline", body={"value": value, "event_payload": dict(event_payload)})

    def add_samples(self, run_id: str, turn: int, samples: Sequence[Sample]) -> None:
        self._call("POST", run_id, "samples", body={"turn": turn, "samples": codec.samples_json(samples)})

    def list_samples(self, run_id: str, turn: int | None = None) -> list[SampleRecord]:
        params = {} if turn is None else {"turn": turn}
        rows = self._call("GET", run_id, "samples", params=params)
        return [codec.decode_sample_record(r) for r in rows]

    def start_turn(
        self,
        run_id: str,
        number: int,
        round: int,
        *,
        event: tuple[EventKind, Mapping[str, Any]] | None = None,
    ) -> TurnRecord:
        body = {"number": number, "round": round, "event": codec.event_spec_json(event)}
        return codec.decode_turn(self._call("POST", run_id, "turns", body=body))

    def decide_turn(
        self,
        run_id: str,
        number: int,
        decision: TurnDecision,
        *,
        champion: ChampionUpdate | None,
        component_heads: Mapping[str, str],
        event: tuple[EventKind, Mapping[str, Any]],
        samples: Sequence[Sample] = (),
        hypotheses: Mapping[int, tuple[Reason, str]] | None = None,
    ) -> TurnRecord:
        commits = {**component_heads, **decision.commits}
        if commits and self._before_keep is not None:
            self._before_keep(run_id, number, commits)
        body = {
            "decision": codec.decision_json(decision),
            "champion": codec.champion_json(champion),
            "component_heads": dict(component_heads),
            "event": codec.event_spec_json(event),
            "samples": codec.samples_json(samples),
            "hypotheses": codec.final_hypotheses_json(hypotheses),
        }
        return codec.decode_turn(self._call("POST", run_id, f"turns/{number}/decision", body=body))

    def report_hypothesis(self, run_id: str, turn: int, report: HypothesisReport) -> HypothesisRecord:
        for name in ("value", "reference_value", "delta", "p_value"):
            number = getattr(report, name)
            if number is not None and not math.isfinite(number):
                raise ValueError(f"{name} must be finite, got {number!r}")
        if report.commits and self._before_keep is not None:
            self._before_keep(run_id, turn, report.commits)
        body = codec.report_json(report)
        return codec.decode_hypothesis(self._call("POST", run_id, f"turns/{turn}/hypotheses", body=body))

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[HypothesisRecord]:
        params = {} if turn is None else {"turn": turn}
        rows = self._call("GET", run_id, "hypotheses", params=params)
        return [codec.decode_hypothesis(r) for r in rows]

    def append_event(self, run_id: str, kind: EventKind, payload: Mapping[str, Any]) -> EventRecord:
        body = {"kind": str(kind), "payload": dict(payload)}
        return codec.decode_event(self._call("POST", run_id, "events", body=body))

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int = 0,
        limit: int | None = None,
        kinds: Collection[EventKind] | None = None,
    ) -> list[EventRecord]:
        params: dict[str, Any] = {"after_id": after_id}
        if limit is not None:
            params["limit"] = limit
        if kinds is not None:
            # An empty filter means "no kind": say so explicitly, a query cannot carry an empty list.
            params["filter_kinds"] = "true"
            params["kind"] = sorted(str(k) for k in kinds)
        rows = self._call("GET", run_id, "events", params=params)
        return [codec.decode_event(r) for r in rows]

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        stop_reason: StopReason | None = None,
        stop_message: str | None = None,
    ) -> RunRecord:
        body = {
            "status": str(status),
            "stop_reason": stop_reason and str(stop_reason),
            "stop_message": stop_message,
        }
        return codec.decode_run(self._call("POST", run_id, "status", body=body))

    # -- plumbing -----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        run_id: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        # allow_nan=False: a NaN or infinite measurement is the caller's bug (ValueError), never sent.
        content = None if body is None else json.dumps(body, allow_nan=False)
        headers = {"Authorization": f"Bearer {self._token_for(run_id)}"}
        if content is not None:
            headers["Content-Type"] = "application/json"
        url = f"/api/worker/runs/{run_id}/ledger/{path}"
        try:
            response = self._http.request(method, url, content=content, params=params, headers=headers)
        except httpx.TransportError as exc:
            raise RetryLaterError(f"the controller is unreachable: {exc}") from exc
        if response.status_code < 400:
            return response.json()
        raise error_of(response)


class WorkerApi:
    """The rest of the worker routes (``api/worker.py``) for one round: the job, the start bundles,
    the worker's bundles and the outcome. Errors as ``HttpLedger``'s."""

    def __init__(
        self, base_url: str, token: str, run_id: str, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.run_id = run_id
        headers = {"Authorization": f"Bearer {token}"}
        self._http = httpx.Client(
            base_url=f"{base_url.rstrip('/')}/api/worker/runs/{run_id}",
            headers=headers,
            timeout=300.0,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def job(self) -> dict[str, Any]:
        """The round's job, the spec text, the components' base shas, whether round 0 hands over."""
        return dict(self._send("GET", "/job").json())

    def feedback(self) -> dict[str, Any]:
        """A refinement round's feedback items to quote, and the component its PR is of."""
        return dict(self._send("GET", "/feedback").json())

    def start_bundle(self, component: str, out: Path) -> None:
        """Write the start commits of ``component`` (a git bundle) to ``out``."""
        out.write_bytes(self._send("GET", f"/components/{component}/bundle").content)

    def send_bundle(self, bundle: Path, turn: int | None) -> dict[str, str]:
        """Upload the worker's commits; the heads the controller verified (ForbiddenError: refused)."""
        params = {} if turn is None else {"turn": turn}
        answer = self._send("POST", "/bundle", content=bundle.read_bytes(), params=params)
        return dict(answer.json()["heads"])

    def finish(self, outcome: Mapping[str, Any]) -> None:
        """Report how the round ended (the token is revoked with it)."""
        self._send("POST", "/outcome", content=json.dumps(dict(outcome)), json_body=True)

    def _send(
        self,
        method: str,
        path: str,
        *,
        content: bytes | str | None = None,
        params: Mapping[str, Any] | None = None,
        json_body: bool = False,
    ) -> httpx.Response:
        headers = {"Content-Type": "application/json"} if json_body else None
        try:
            response = self._http.request(method, path, content=content, params=params, headers=headers)
        except httpx.TransportError as exc:
            raise RetryLaterError(f"the controller is unreachable: {exc}") from exc
        if response.status_code >= 400:
            raise error_of(response)
        return response


def error_of(response: httpx.Response) -> Exception:
    """The crucible error an error answer of the worker routes stands for."""
    try:
        data = response.json()
        detail = str(data.get("detail", response.text))
        kind = data.get("kind")
    except ValueError:
        detail, kind = response.text, None
    if response.status_code == 400 and kind == "value":
        return ValueError(detail)
    cls = ERROR_OF_STATUS.get(response.status_code, CrucibleError)
    return cls(f"{response.request.method} {response.request.url.path}: {detail}")


def _conforms(ledger: HttpLedger) -> Ledger:
    """mypy checks here that ``HttpLedger`` keeps the ``Ledger`` contract."""
    return ledger
