"""The ``--server URL`` side of the CLI: the operator REST API over HTTP, for ``crucible loop`` and
``crucible runs …``/``feedback``/``patch``/``cancel``/``resume``.

Answers are the JSON of ``schemas.py`` (what local commands print with ``--json``), so the CLI formats
both with the same printers. The token comes from ``CRUCIBLE_API_TOKEN``; an HTTP error becomes a
``CrucibleError`` of the matching kind (404 NotFound, 409 Conflict, 422 Spec, others plain), which
``main`` turns into the usual exit codes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx

from controller.domain.errors import ConflictError, CrucibleError, NotFoundError, RefusedError, SpecError
from controller.services.views.json_forms import FeedbackJson, RunJson, RunSummaryJson, TurnJson

RECONNECT_DELAY_S = 1.0
MAX_RECONNECTS = 30  # consecutive failed reconnects before giving up on an event stream


class ApiClient:
    """A thin, typed wrapper over the routes of docs/api.md (one method per route the CLI uses)."""

    def __init__(self, base_url: str, token: str | None, *, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def submit(
        self, spec_text: str, spec_dir: str, *, turns: int | None, publish_prs: bool, watch_feedback: bool
    ) -> str:
        body = {
            "spec": spec_text,
            "spec_dir": spec_dir,
            "turns": turns,
            "publish_prs": publish_prs,
            "watch_feedback": watch_feedback,
        }
        return str(self._json("POST", "/api/runs", json=body)["id"])

    # The answers are the JSON forms of the views (``json_forms``): the server validated them against
    # the same models when it answered, so they are typed here without being parsed again.
    def runs(self, limit: int) -> list[RunSummaryJson]:
        rows: list[RunSummaryJson] = self._json("GET", "/api/runs", params={"limit": limit})["items"]
        return rows

    def run(self, run_id: str) -> RunJson:
        view: RunJson = self._json("GET", f"/api/runs/{run_id}")
        return view

    def turns(self, run_id: str, *, after: int = 0, limit: int = 100) -> list[TurnJson]:
        params = {"after": after, "limit": limit}
        rows: list[TurnJson] = self._json("GET", f"/api/runs/{run_id}/turns", params=params)["items"]
        return rows

    def feedback(self, run_id: str) -> FeedbackJson:
        base = f"/api/runs/{run_id}"
        return {
            "run_id": run_id,
            "feedback": self._json("GET", f"{base}/feedback"),
            "rounds": self._json("GET", f"{base}/rounds"),
            "replies": self._json("GET", f"{base}/replies"),
        }

    def patch(self, run_id: str) -> str:
        return str(self._json("GET", f"/api/runs/{run_id}/patch")["patch"])

    def cancel(self, run_id: str) -> str:
        return str(self._json("POST", f"/api/runs/{run_id}/cancel")["message"])

    def resume(self, run_id: str) -> str:
        return str(self._json("POST", f"/api/runs/{run_id}/resume")["message"])

    def events(self, run_id: str, *, after: int = 0, follow: bool = True) -> Iterator[dict[str, object]]:
        """The run's events from ``after`` on, as Server-Sent Events; a dropped connection is resumed
        with ``Last-Event-ID``, so no event is missed or seen twice. Ends when the server ends the
        stream (the run finished, or ``follow`` is False and the stored events are sent)."""
        last = after
        failures = 0
        while True:
            headers = {"Last-Event-ID": str(last)} if last else {}
            params = {"follow": "true" if follow else "false"}
            try:
                with self._http.stream(
                    "GET", f"/api/runs/{run_id}/events", headers=headers, params=params, timeout=None
                ) as response:
                    _raise_for(response)
                    for event_id, data in _sse(response.iter_lines()):
                        failures = 0
                        last = event_id
                        yield data
                return
            except httpx.TransportError as exc:
                failures += 1
                if failures > MAX_RECONNECTS:
                    raise CrucibleError(f"lost the event stream of {self.base_url}: {exc}") from exc
                time.sleep(RECONNECT_DELAY_S)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CrucibleError(f"cannot reach {self.base_url}: {exc}") from exc
        _raise_for(response)
        return response.json()


def _sse(lines: Iterator[str]) -> Iterator[tuple[int, dict[str, object]]]:
    """(id, data) of each event in a text/event-stream (comments and keep-alives skipped)."""
    event_id: int | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            if event_id is not None and data:
                yield event_id, json.loads("\n".join(data))
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def _raise_for(response: httpx.Response) -> None:
    """An HTTP error as the CrucibleError the API mapped it from (``api/errors.py``, ``kind``)."""
    if response.status_code < 400:
        return
    response.read()
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text}
    detail = body.get("detail", response.text) if isinstance(body, dict) else response.text
    if isinstance(detail, list):  # FastAPI's own 422 for a malformed payload
        detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}" for d in detail)
    kind = body.get("kind") if isinstance(body, dict) else None
    if response.status_code == 404:
        raise NotFoundError(str(detail))
    if response.status_code == 422:
        raise SpecError(str(body.get("key") or ""), str(detail))
    if kind == "refused":
        raise RefusedError(str(detail))
    if response.status_code == 409:
        raise ConflictError(str(detail))
    path = response.request.url.path
    raise CrucibleError(f"{response.request.method} {path}: HTTP {response.status_code}: {detail}")
