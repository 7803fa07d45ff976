"""``/healthz``, ``/readyz`` and ``/metrics``: what Kubernetes probes and Prometheus scrape.

``/healthz`` answers while the process serves (no I/O: a slow database must not get a live process
killed); ``/readyz`` is 200 only when the database answers and is at this code's schema head, so a
replica started against an old schema takes no traffic. ``/metrics`` is the Prometheus text format
through ``prometheus-client``, computed at scrape time from the store (runs by status, turns by
outcome, webhook deliveries) and from the process (leases held, broker rounds, forge requests and
rate limit left, via ``ServiceStats``). None of these need a token: probes and scrapers carry none, and
nothing here names a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool

from controller.domain.enums import Outcome, RunStatus
from controller.domain.errors import CrucibleError
from controller.forge.base import ForgeUsage
from controller.store.ports import OpsStore


@dataclass
class ServiceStats:
    """Process-side figures the service reports; each is a callable read at scrape time."""

    leases_held: Callable[[], int] = lambda: 0
    broker_rounds: Callable[[], int] = lambda: 0
    # Per forge API URL, what this process's client for it spent (``wiring.ForgeClients.usage``).
    forges: Callable[[], Mapping[str, ForgeUsage]] = field(default=lambda: {})


class _StoreCollector(Collector):
    def __init__(self, store: OpsStore, stats: ServiceStats) -> None:
        self.store = store
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily("crucible_runs", "Runs by status", labels=["status"])
        by_status = self.store.count_runs_by_status()
        for status in RunStatus:
            runs.add_metric([status.value], by_status.get(status, 0))
        yield runs
        turns = CounterMetricFamily("crucible_turns", "Decided turns by outcome", labels=["outcome"])
        by_outcome = self.store.count_turns_by_outcome()
        for outcome in Outcome:
            turns.add_metric([outcome.value], by_outcome.get(outcome, 0))
        yield turns
        total, waiting = self.store.count_deliveries()
        yield CounterMetricFamily("crucible_webhook_deliveries", "Webhook deliveries stored", value=total)
        yield GaugeMetricFamily(
            "crucible_webhook_deliveries_pending", "Stored deliveries not processed yet", value=waiting
        )
        yield GaugeMetricFamily(
            "crucible_leases_held",
            "Runs this process drives (holds the lease of)",
            value=self.stats.leases_held(),
        )
        yield CounterMetricFamily(
            "crucible_broker_rounds", "Rounds launched through the broker", value=self.stats.broker_rounds()
        )
        yield CounterMetricFamily(
            "crucible_db_statements", "SQL statements this process sent", value=self.store.statements
        )
        requests = CounterMetricFamily(
            "crucible_forge_requests", "Requests sent to a forge", labels=["forge"]
        )
        remaining = GaugeMetricFamily(
            "crucible_forge_rate_limit_remaining", "Rate limit left, as the forge last said", labels=["forge"]
        )
        for forge, usage in self.stats.forges().items():
            requests.add_metric([forge], usage.requests)
            if usage.rate_remaining is not None:
                remaining.add_metric([forge], usage.rate_remaining)
        yield requests
        yield remaining


def ops_router(store: OpsStore, stats: ServiceStats) -> APIRouter:
    router = APIRouter(tags=["operations"])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StoreCollector(store, stats))

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process serves requests."""
        return {"status": "ok"}

    @router.get("/readyz", responses={503: {"description": "database unreachable or not at the schema head"}})
    def readyz() -> JSONResponse:
        """Readiness: the database answers and its schema is at this code's head."""
        try:
            store.check_schema()
        except CrucibleError as exc:
            return JSONResponse({"status": "unready", "detail": str(exc)}, status_code=503)
        return JSONResponse({"status": "ready"})

    @router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
    async def metrics() -> Response:
        """Prometheus text format."""
        body = await run_in_threadpool(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return router
