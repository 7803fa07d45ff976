"""The ledger port over HTTP: what ``crucible worker`` gives the turn path inside a loop pod (ADR-0014).

A round executed away from the controller still reads and writes its run's record through the
``Ledger`` contract, but every call is a request to the controller's worker routes
(``/api/worker/runs/{id}/ledger/...``) carrying the round's bearer token. The controller answers
each call with the SQL store inside one transaction, so atomicity and the exactly-once decision
stay where they were: a ``decide_turn`` whose answer was lost and that is sent again is refused
with ConflictError, never applied twice. Requests and answers are the shared schemas of
``store.worker_protocol`` (the answers are the records themselves), sent with the protocol version
(ADR-0028). ``tests/ledger`` holds this class to the same suite as the store.

Errors come back as the contract names them (the routes send ``kind``): 404 NotFoundError, 409
ConflictError, 400 ValueError (and 422: a body its schema refused), 401/403
Unauthenticated/ForbiddenError, 503 and transport failures RetryLaterError. Measurements that are
not finite never leave the process (``allow_nan=False`` raises ValueError before anything is sent).
"""

from __future__ import annotations

import functools
import json
import math
import os
import ssl
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, TypeAdapter

from controller.domain.enums import EventKind, Reason, RunStatus, StopReason
from controller.domain.errors import (
    ConfirmingError,
    ConflictError,
    CrucibleError,
    ForbiddenError,
    NotFoundError,
    RetryLaterError,
    UnauthenticatedError,
    UnconfirmedError,
)
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
from controller.store.worker_protocol import (
    PROTOCOL_HEADER,
    PROTOCOL_VERSION,
    BaselineReport,
    BundleHeads,
    ConfirmationOutcome,
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

# The answers are the ledger's records themselves (``store.worker_protocol``); built once, not per call.
_RUN = TypeAdapter(RunRecord)
_SNAPSHOT = TypeAdapter(TurnSnapshot)
_TURN = TypeAdapter(TurnRecord)
_SAMPLES = TypeAdapter(list[SampleRecord])
_REPORT = TypeAdapter(HypothesisReport)
_HYPOTHESIS = TypeAdapter(HypothesisRecord)
_HYPOTHESES = TypeAdapter(list[HypothesisRecord])
_EVENT = TypeAdapter(EventRecord)
_EVENTS = TypeAdapter(list[EventRecord])

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
# Answers a worker acts on (ADR-0043): a keep being confirmed (send it again), or not reproduced.
ERROR_OF_KIND: dict[tuple[int, object], type[Exception]] = {
    (503, "confirming"): ConfirmingError,
    (403, "unconfirmed"): UnconfirmedError,
}
RECONNECT_S = 600.0  # how long a decision waits for a controller away (restarting) before failing


def tls_context() -> ssl.SSLContext:
    """The TLS context every client of this module verifies the controller with: httpx's default
    (``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set, else certifi's bundle), built once per process
    and per those two variables. Building one loads the whole CA bundle (about 150 certificates:
    some 20 ms of CPU, 0.23 s measured on a loaded machine), and a warm hypothesis pod makes two
    clients per hypothesis (issue 23): built per client, that was half a second of every hypothesis."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()


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
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout, transport=transport, verify=tls_context()
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HttpLedger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the Ledger methods -------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        return _RUN.validate_python(self._call("GET", run_id, "run"))

    def turn_snapshot(self, run_id: str, *, last: int) -> TurnSnapshot:
        return _SNAPSHOT.validate_python(self._call("GET", run_id, "snapshot", params={"last": last}))

    def await_turn(self, run_id: str, turn: int) -> TurnSnapshot:
        """``turn_snapshot(last=1)`` once the run's highest turn is at least ``turn`` or it stopped, or
        after the controller's wait (``turn_wait.WAIT_S``): a long poll (ADR-0051's addendum)."""
        params = {"last": 1, "wait_for_turn": turn}
        return _SNAPSHOT.validate_python(self._call("GET", run_id, "snapshot", params=params))

    def start_baseline(self, run_id: str) -> None:
        self._call("POST", run_id, "baseline/start", body=Done())

    def set_baseline(self, run_id: str, value: float, event_payload: Mapping[str, Any]) -> None:
        self._call(
            "POST", run_id, "baseline", body=BaselineReport(value=value, event_payload=dict(event_payload))
        )

    def add_samples(self, run_id: str, turn: int, samples: Sequence[Sample]) -> None:
        self._call("POST", run_id, "samples", body=SamplesReport(turn=turn, samples=list(samples)))

    def list_samples(self, run_id: str, turn: int | None = None) -> list[SampleRecord]:
        params = {} if turn is None else {"turn": turn}
        return _SAMPLES.validate_python(self._call("GET", run_id, "samples", params=params))

    def start_turn(
        self,
        run_id: str,
        number: int,
        round: int,
        *,
        event: tuple[EventKind, Mapping[str, Any]] | None = None,
    ) -> TurnRecord:
        body = TurnStart(number=number, round=round, event=None if event is None else EventSpec.of(event))
        return _TURN.validate_python(self._call("POST", run_id, "turns", body=body))

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
        progress: Sequence[tuple[EventKind, Mapping[str, Any]]] = (),
    ) -> TurnRecord:
        """The decision, after its ``progress`` (one request per event, as ``append_events``: the worker
        API takes the decision without them)."""
        self.append_events(run_id, progress)
        commits = {**component_heads, **decision.commits}
        if commits and self._before_keep is not None:
            self._before_keep(run_id, number, commits)
        body = DecisionReport(
            decision=decision,
            champion=champion,
            component_heads=dict(component_heads),
            event=EventSpec.of(event),
            samples=list(samples),
            hypotheses=None if hypotheses is None else dict(hypotheses),
        )
        # A keep waits for its confirmation (ADR-0043): the controller answers "confirming" after a
        # long poll, and the same decision is sent again; a controller away (restarting, its lease
        # moving) is waited for as a warm pod waits for it.
        gave_up = time.monotonic() + RECONNECT_S
        while True:
            try:
                return _TURN.validate_python(
                    self._call("POST", run_id, f"turns/{number}/decision", body=body)
                )
            except ConfirmingError:
                continue
            except RetryLaterError:
                if time.monotonic() > gave_up:
                    raise
                time.sleep(1.0)

    def report_hypothesis(self, run_id: str, turn: int, report: HypothesisReport) -> HypothesisRecord:
        for name in ("value", "reference_value", "delta", "p_value"):
            number = getattr(report, name)
            if number is not None and not math.isfinite(number):
                raise ValueError(f"{name} must be finite, got {number!r}")
        if report.commits and self._before_keep is not None:
            self._before_keep(run_id, turn, report.commits)
        body = _REPORT.dump_python(report, mode="json")
        answer = self._call("POST", run_id, f"turns/{turn}/hypotheses", body=body)
        return _HYPOTHESIS.validate_python(answer)

    def list_hypotheses(self, run_id: str, turn: int | None = None) -> list[HypothesisRecord]:
        params = {} if turn is None else {"turn": turn}
        return _HYPOTHESES.validate_python(self._call("GET", run_id, "hypotheses", params=params))

    def append_event(self, run_id: str, kind: EventKind, payload: Mapping[str, Any]) -> EventRecord:
        body = EventSpec(kind=kind, payload=dict(payload))
        return _EVENT.validate_python(self._call("POST", run_id, "events", body=body))

    def append_events(
        self, run_id: str, events: Sequence[tuple[EventKind, Mapping[str, Any]]]
    ) -> list[EventRecord]:
        """One request per event: the worker API takes one event per request (``Ledger.append_events``
        allows a written prefix on failure)."""
        return [self.append_event(run_id, kind, payload) for kind, payload in events]

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int = 0,
        limit: int | None = None,
        kinds: Collection[EventKind] | None = None,
    ) -> list[EventRecord]:
        params: dict[str, int | str | list[str]] = {"after_id": after_id}
        if limit is not None:
            params["limit"] = limit
        if kinds is not None:
            # An empty filter means "no kind": say so explicitly, a query cannot carry an empty list.
            params["filter_kinds"] = "true"
            params["kind"] = sorted(str(k) for k in kinds)
        return _EVENTS.validate_python(self._call("GET", run_id, "events", params=params))

    def set_run_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        stop_reason: StopReason | None = None,
        stop_message: str | None = None,
    ) -> RunRecord:
        """A worker never moves the run: the controller records the stop its round's outcome names
        (ADR-0031). ForbiddenError, without a request."""
        raise ForbiddenError(f"a worker does not set run {run_id}'s status ({status}); the controller does")

    # -- plumbing -----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        run_id: str,
        path: str,
        *,
        body: BaseModel | Mapping[str, object] | None = None,
        params: Mapping[str, int | str | list[str]] | None = None,
    ) -> object:
        headers = {
            "Authorization": f"Bearer {self._token_for(run_id)}",
            PROTOCOL_HEADER: str(PROTOCOL_VERSION),
        }
        content = None if body is None else _json(body)
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
        headers = {"Authorization": f"Bearer {token}", PROTOCOL_HEADER: str(PROTOCOL_VERSION)}
        self._http = httpx.Client(
            base_url=f"{base_url.rstrip('/')}/api/worker/runs/{run_id}",
            headers=headers,
            timeout=300.0,
            transport=transport,
            verify=tls_context(),
        )

    def close(self) -> None:
        self._http.close()

    def job(self) -> JobInputs:
        """The round's job, the spec text, the components' base shas, whether round 0 hands over."""
        return JobInputs.model_validate_json(self._send("GET", "/job").content)

    def feedback(self) -> RoundFeedback:
        """A refinement round's feedback items to quote, and the component its PR is of."""
        return RoundFeedback.model_validate_json(self._send("GET", "/feedback").content)

    def start_bundle(self, component: str, out: Path, have: str | None = None) -> None:
        """Write the start commits of ``component`` (a git bundle) to ``out``; with ``have``, only
        those past that commit when the controller knows it (a warm pod's fetch, ADR-0034)."""
        params = {} if have is None else {"have": have}
        out.write_bytes(self._send("GET", f"/components/{component}/bundle", params=params).content)

    def next_hypothesis(self, after: int) -> SlotNext:
        """A warm pod's next hypothesis after turn ``after`` (with its slot token; ADR-0034)."""
        answer = self._send("GET", "/slot/next", params={"after": after})
        return SlotNext.model_validate_json(answer.content)

    def send_bundle(self, bundle: Path, turn: int | None) -> dict[str, str]:
        """Upload the worker's commits; the heads the controller verified (ForbiddenError: refused)."""
        params = {} if turn is None else {"turn": turn}
        answer = self._send("POST", "/bundle", content=bundle.read_bytes(), params=params)
        return BundleHeads.model_validate_json(answer.content).heads

    def confirm(self, samples: Sequence[Sample]) -> ConfirmationOutcome:
        """A confirmation's samples (ADR-0043); what the controller concluded (the token is revoked)."""
        body = {"samples": [list(s) for s in samples]}
        answer = self._send("POST", "/confirmation", content=_json(body), json_body=True)
        return ConfirmationOutcome.model_validate_json(answer.content)

    def finish(self, outcome: RoundEnd) -> None:
        """Report how the round ended (the token is revoked with it)."""
        self._send("POST", "/outcome", content=_json(outcome), json_body=True)

    def _send(
        self,
        method: str,
        path: str,
        *,
        content: bytes | str | None = None,
        params: Mapping[str, int | str] | None = None,
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
    if (response.status_code == 400 and kind == "value") or response.status_code == 422:
        return ValueError(detail)  # a body its schema refused is the caller's bug too
    cls = ERROR_OF_KIND.get((response.status_code, kind)) or ERROR_OF_STATUS.get(
        response.status_code, CrucibleError
    )
    return cls(f"{response.request.method} {response.request.url.path}: {detail}")


def _json(body: BaseModel | Mapping[str, object]) -> str:
    """A request body as JSON; allow_nan=False: a NaN or infinite measurement is the caller's bug
    (ValueError), never sent."""
    data = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
    return json.dumps(data, allow_nan=False)


def _conforms(ledger: HttpLedger) -> Ledger:
    """mypy checks here that ``HttpLedger`` keeps the ``Ledger`` contract."""
    return ledger
