"""The composition root: the one place that builds settings, store, forge clients, broker and services.

CONTRIBUTING.md (rule 7) and ADR-0003. ``crucible loop``/``resume``/``cancel``/``demo``
and ``crucible serve`` each call ``build`` once and receive what they need from the ``Root``; no
command or route assembles a store, a forge client or a broker itself. This is also the only
module of ``controller`` that reads the process environment: once, into the settings and into the
explicit mapping handed to child processes (scrubbed again per run before any command sees it).

It sits above ``services`` and below ``cli``/``api`` in the layer contract. Heavy modules
(pydantic and the settings, SQLAlchemy, PyGithub, the services) are imported when first needed, so
``crucible --help`` and ``crucible runs list`` do not pay for them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from controller.config.paths import database_url, home_dir
from controller.domain.errors import SpecError

if TYPE_CHECKING:
    from controller.brokers.base import Broker, ConfirmLauncher, HypothesisLauncher
    from controller.brokers.local import RoundRunner
    from controller.config.broker import BrokerSpec
    from controller.config.settings import ForgeSettings, Settings
    from controller.config.spec import Spec
    from controller.forge.base import Forge, ForgeUsage
    from controller.forge.github import GithubForge
    from controller.services.control.admission import Admission
    from controller.services.control.reader import RunReader
    from controller.services.control.service import ForgeFor, HypothesesFor, RunService
    from controller.services.remote.remote_rounds import RemoteRounds
    from controller.services.remote.worker import WorkerLedgers
    from controller.store.http_ledger import BeforeKeep, HttpLedger
    from controller.store.ports import ControllerStore
    from controller.store.store import Store


def _round_kind(broker: BrokerSpec, round: int) -> str:
    return round_kind(broker.kind, round, broker.parallel)


def round_kind(spec_kind: str, round: int, parallel: int = 1) -> str:
    """The broker kind a round of a run goes to: the spec's, for the search round and refinement
    rounds alike (``crucible worker`` plays both since ADR-0019). A Kubernetes round 0 with
    ``parallel > 1`` is driven here: its turns launch a pod per hypothesis (``hypothesis_pods``,
    ADR-0018); its refinement rounds, one hypothesis a turn, go to a pod as any other."""
    if parallel > 1 and spec_kind == "kubernetes" and round == 0:
        return "local"
    return spec_kind


def process_environment() -> dict[str, str]:
    """The process environment, read here and nowhere else in ``controller``."""
    return dict(os.environ)


def withdraw_from_environment(name: str) -> None:
    """Remove ``name`` from this process's environment once it was read: from ``os.environ`` and, its
    bytes overwritten, from the block ``/proc/<pid>/environ`` shows (``workspace.selfguard``), so
    nothing this process starts, and nothing that reads its ``/proc``, finds it there."""
    from controller.workspace.selfguard import wipe_environment_value

    wipe_environment_value(name)
    os.environ.pop(name, None)


def configured_database(environ: Mapping[str, str]) -> str:
    """The database URL the settings of ``environ`` name, without building them (pydantic): for
    ``crucible runs list``'s read of the default SQLite file (ADR-0013)."""
    return database_url(environ, home_dir(environ))


class ForgeClients:
    """One forge client per forge API URL, all with the credential from the settings.

    A client carries the pacing of its credential (write interval, rate-limit waits), so every run
    of this process that talks to one forge shares one client rather than racing separate ones.
    ``admission`` (``crucible serve``): only its forges get a client, so the credential never goes
    to a forge a stored spec names but the operator did not configure."""

    def __init__(
        self, settings: ForgeSettings, admission: Admission | None = None, *, token: str | None = None
    ) -> None:
        self._settings = settings
        self._admission = admission
        self._token = token  # instead of the settings' credential (the demo's local forge)
        self._clients: dict[str, GithubForge] = {}
        self._lock = threading.Lock()

    def for_spec(self, spec: Spec) -> Forge:
        """The client for ``spec``'s ``publish.forge``; SpecError naming what is missing."""
        if spec.publish is None:
            raise SpecError("publish.forge", "required with --publish-prs (the forge API URL)")
        if not any(c.upstream for c in spec.components):
            raise SpecError(
                "component[0].upstream",
                "required with --publish-prs (owner/name of the repository PRs target)",
            )
        return self.for_url(spec.publish.forge)

    def usage(self) -> dict[str, ForgeUsage]:
        """Per forge API URL: the requests its client sent and the rate limit left (``/metrics``)."""
        with self._lock:
            clients = dict(self._clients)
        return {url: client.usage() for url, client in sorted(clients.items())}

    def for_url(self, api_url: str) -> Forge:
        # Imported here: PyGithub is slow to import and only publishing runs need it.
        from controller.forge.auth import ForgeCredentials, from_settings
        from controller.forge.github import GithubForge

        if self._admission is not None:
            self._admission.check_forge(api_url, "publish.forge")
        with self._lock:
            client = self._clients.get(api_url)
            if client is not None:
                return client
            if self._token is not None:
                credentials: ForgeCredentials | None = ForgeCredentials.for_token(self._token)
            else:
                credentials = from_settings(self._settings)
            if credentials is None:
                raise SpecError(
                    "CRUCIBLE_GITHUB_TOKEN",
                    "publishing needs CRUCIBLE_GITHUB_TOKEN, or CRUCIBLE_GITHUB_APP_ID with "
                    "CRUCIBLE_GITHUB_APP_PRIVATE_KEY or CRUCIBLE_GITHUB_APP_PRIVATE_KEY_FILE",
                )
            client = GithubForge(api_url, credentials, write_interval=self._settings.forge_write_interval)
            self._clients[api_url] = client
            return client


def compose_service(
    settings: Settings,
    store: ControllerStore,
    *,
    environ: Mapping[str, str],
    forge_for: ForgeFor,
    broker: Callable[[RoundRunner], Broker],
    hypotheses: HypothesesFor | None = None,
    reader: RunReader | None = None,
) -> RunService:
    """A run service with its collaborators built here: the runner of this process's rounds, the
    broker ``broker`` builds around it, the feedback hub, the read facade. ``Root.service`` uses it;
    so do the tests and benchmarks that drive runs through a broker of their own (a subprocess
    broker, a Kubernetes broker on a test cluster), so no caller builds a collaborator itself."""
    from controller.services.control.reader import RunReader
    from controller.services.control.roundjobs import LocalRounds
    from controller.services.control.service import RunService
    from controller.services.feedback.hub import FeedbackHub

    rounds = LocalRounds(store)
    return RunService(
        settings,
        store,
        environ=environ,
        forge_for=forge_for,
        rounds=rounds,
        broker=broker(rounds),
        hub=FeedbackHub(store, own_logins=settings.forge.own_logins),
        reader=reader or RunReader(settings, store),
        hypotheses=hypotheses,
    )


class Mode(StrEnum):
    """What the process built by ``build`` is; each mode is wired once, completely, at build time.

    ``loop``: ``crucible loop``/``resume``/``cancel``/``runs ...``: rounds in the caller's thread, no
    worker API (a Kubernetes spec needs a controller that serves one). ``serve``: ``crucible serve``:
    one thread per round, the worker API at ``listen_url``, specs admitted by the operator's rules.
    ``demo``: ``crucible demo``: as ``loop``, publishing with the local forge's token, and with the
    worker API when a ``listen_url`` is given (``--kubernetes``). ``worker``: ``crucible worker`` in a
    loop pod: settings only (it talks to the controller through its HTTP ledger, never a store)."""

    LOOP = "loop"
    SERVE = "serve"
    DEMO = "demo"
    WORKER = "worker"


@dataclass
class _Parts:
    """What a root opens on first use (the store, the service), cached here and not on the frozen
    root, so nothing outside can replace a part and nothing depends on which was asked for first."""

    store: Store | None = None
    service: RunService | None = None
    reader: RunReader | None = None
    remote: RemoteRounds | None = None
    hypothesis_pods: HypothesisLauncher | None = None
    confirm_pods: ConfirmLauncher | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)


@dataclass(frozen=True)
class Root:
    """Everything a command or the server needs, from one settings tree, for one ``Mode``.

    Frozen: its mode, settings, forge clients and admission rules are fixed by ``build``. Its parts
    (``store``, ``service``, ``reader``, ``worker_api``) are opened on first use so ``crucible runs
    list`` does not pay for a broker, but each is fully wired whichever is asked for first."""

    settings: Settings
    environ: Mapping[str, str]
    forges: ForgeClients
    mode: Mode = Mode.LOOP
    # The rules specs from API clients are held to (``serve``); None: specs come from the operator.
    admission: Admission | None = None
    # Where workers reach this process's worker API (``serve``, ``demo --kubernetes``); None: no API.
    listen_url: str | None = None
    forge_for: ForgeFor | None = None  # overrides forges.for_spec (tests that publish to a fake forge)
    _parts: _Parts = field(default_factory=_Parts, repr=False, compare=False)

    @property
    def inline(self) -> bool:
        """Rounds in the caller's thread (``loop``, ``demo``), or one thread each (``serve``)."""
        return self.mode is not Mode.SERVE

    def store(self) -> Store:
        """The store, opened once. The default SQLite database is created and upgraded on open so a
        first run just works; any other database must be upgraded on purpose (``crucible db upgrade``)."""
        with self._parts.lock:
            if self._parts.store is None:
                from controller.store.store import Store

                auto = self.settings.database_is_sqlite
                if auto:
                    self.settings.home.mkdir(parents=True, exist_ok=True)
                self._parts.store = Store.open(self.settings.database_url, upgrade=auto)
            return self._parts.store

    def upgraded_store(self) -> Store:
        """The store after applying every migration (``crucible db upgrade``)."""
        from controller.store.store import Store

        with self._parts.lock:
            if self.settings.database_is_sqlite:
                self.settings.home.mkdir(parents=True, exist_ok=True)
            self._parts.store = Store.open(self.settings.database_url, upgrade=True)
            return self._parts.store

    def reader(self) -> RunReader:
        """The read facade of runs: what ``crucible runs show/list/patch/feedback`` need, and no broker."""
        with self._parts.lock:
            if self._parts.reader is None:
                from controller.services.control.reader import RunReader

                self._parts.reader = RunReader(self.settings, self.store())
            return self._parts.reader

    def service(self) -> RunService:
        """The run service with every collaborator built here: the round runner and the broker
        around it (each run's rounds go to the broker its spec's ``[broker] kind`` names), the
        feedback hub, the read facade."""
        with self._parts.lock:
            if self._parts.service is None:
                self._parts.service = compose_service(
                    self.settings,
                    self.store(),
                    environ=self.environ,
                    forge_for=self.forge_for or self.forges.for_spec,
                    broker=self._broker,
                    hypotheses=self._hypotheses_for,
                    reader=self.reader(),
                )
            return self._parts.service

    def _broker(self, runner: RoundRunner) -> Broker:
        from controller.brokers.local import LocalBroker
        from controller.brokers.routing import RoutedBroker
        from controller.services.views.specs import stored_spec

        inline = self.inline
        return RoutedBroker(
            {"local": lambda: LocalBroker(runner, inline=inline), "kubernetes": self.kubernetes_broker},
            lambda run_id, round: _round_kind(stored_spec(self.store(), run_id).broker, round),
            concurrent=not inline,
        )

    def kubernetes_broker(self) -> Broker:
        """The broker of runs with ``[broker] kind = "kubernetes"`` (ADR-0015), on the cluster the
        settings name; SpecError naming what is missing."""
        # Imported here: only Kubernetes runs load the client.
        from controller.brokers.kubernetes.broker import KubernetesBroker
        from controller.brokers.kubernetes.connect import connect
        from controller.services.views.specs import stored_spec

        remote = self._remote_rounds(
            "kubernetes rounds report to the controller's worker API, which this process does not "
            "serve; run the spec with a controller that does"
        )
        kube = self.settings.kubernetes
        api, namespace = connect(kube.kubeconfig, kube.kube_namespace)
        return KubernetesBroker(
            api,
            mint_worker_env=remote.mint_worker_env,
            remote_outcome=remote.remote_outcome,
            revoke=remote.revoke,
            spec_for=lambda run_id: stored_spec(self.store(), run_id).broker,
            namespace=namespace,
        )

    def _hypotheses_for(self, run_id: str) -> HypothesisLauncher | None:
        """The launcher of the run's hypothesis pods when it runs on Kubernetes with ``parallel > 1``."""
        from controller.services.views.specs import stored_spec

        broker = stored_spec(self.store(), run_id).broker
        if broker.kind != "kubernetes" or broker.parallel <= 1:
            return None
        with self._parts.lock:
            if self._parts.hypothesis_pods is None:
                self._parts.hypothesis_pods = self._new_hypothesis_pods()
            return self._parts.hypothesis_pods

    def _new_hypothesis_pods(self) -> HypothesisLauncher:
        from controller.brokers.kubernetes.connect import connect
        from controller.brokers.kubernetes.hypotheses import HypothesisPods
        from controller.services.views.specs import stored_spec

        remote = self._remote_rounds(
            "kubernetes hypothesis pods report to the controller's worker API, which this process "
            "does not serve; run the spec with a controller that does"
        )
        kube = self.settings.kubernetes
        api, namespace = connect(kube.kubeconfig, kube.kube_namespace)
        return HypothesisPods(
            api,
            mint_slot_env=remote.mint_slot_env,
            slots=remote.slots,
            spec_for=lambda run_id: stored_spec(self.store(), run_id).broker,
            namespace=namespace,
        )

    def _confirmations_for(self, run_id: str) -> ConfirmLauncher | None:
        """The launcher of confirmations of the run's claimed keeps (ADR-0043): on Kubernetes, unless
        the operator turned them off (``CRUCIBLE_CONFIRM_KEEPS``); a local round is the controller's
        own measurement already."""
        from controller.services.views.specs import stored_spec

        if not self.settings.workers.confirm_keeps:
            return None
        if stored_spec(self.store(), run_id).broker.kind != "kubernetes":
            return None
        with self._parts.lock:
            if self._parts.confirm_pods is None:
                from controller.brokers.kubernetes.confirmations import ConfirmPods
                from controller.brokers.kubernetes.connect import connect

                kube = self.settings.kubernetes
                api, namespace = connect(kube.kubeconfig, kube.kube_namespace)
                self._parts.confirm_pods = ConfirmPods(
                    api, spec_for=lambda run: stored_spec(self.store(), run).broker, namespace=namespace
                )
            return self._parts.confirm_pods

    def worker_api(self) -> RemoteRounds:
        """The controller's side of remote rounds (ADR-0014), which ``crucible serve`` mounts and the
        remote brokers mint tokens from; workers reach it at ``CRUCIBLE_WORKER_CONTROLLER_URL`` or,
        unset, the root's ``listen_url``. SpecError when this root was built without one."""
        return self._remote_rounds(
            f"this {self.mode} process serves no worker API (build it with the address it listens on)"
        )

    def _remote_rounds(self, refusal: str) -> RemoteRounds:
        if self.listen_url is None:
            raise SpecError("broker.kind", refusal)
        with self._parts.lock:
            if self._parts.remote is None:
                from controller.config.options import RunOptions
                from controller.services.remote.remote_rounds import RemoteRounds

                store = self.store()
                workers = self.settings.workers
                self._parts.remote = RemoteRounds(
                    self.settings,
                    store,
                    controller_url=workers.worker_controller_url or self.listen_url,
                    token_ttl_s=workers.worker_token_ttl,
                    hand_over=lambda run_id: RunOptions.stored(store.get_run(run_id).options).watch_feedback,
                    confirmations=self._confirmations_for,
                )
            return self._parts.remote

    def worker_ledgers(self, controller_url: str, token: str) -> WorkerLedgers:
        """``crucible worker``'s HTTP ledgers (ADR-0014): the round's record behind the controller's
        worker routes at ``controller_url``, reached with the round's ``token``. Only a ``worker``
        root builds them: a controller's record is its store, and a ledger built from a controller's
        root would be a second, unguarded way into it."""
        if self.mode is not Mode.WORKER:
            raise ValueError(f"a {self.mode} root records through its store, not a worker's HTTP ledger")
        from controller.store.http_ledger import HttpLedger

        def ledger(*, before_keep: BeforeKeep | None = None) -> HttpLedger:
            return HttpLedger(controller_url, token, before_keep=before_keep)

        return ledger

    def close(self) -> None:
        """Close the store; the root's parts are opened again on next use."""
        with self._parts.lock:
            if self._parts.store is not None:
                self._parts.store.close()
            self._parts.store = self._parts.service = self._parts.reader = self._parts.remote = None


def build(
    environ: Mapping[str, str] | None = None,
    *,
    mode: Mode = Mode.LOOP,
    settings: Settings | None = None,
    listen_url: str | None = None,
    forge_token: str | None = None,
    forge_for: ForgeFor | None = None,
) -> Root:
    """The root for this process in ``mode``. ``environ`` defaults to the process environment (read
    once); ``settings`` defaults to the settings that environment names. ``listen_url``: where this
    process serves the worker API (``serve``; ``demo`` with Kubernetes). ``forge_token``: the token
    every forge client uses instead of the settings' credential (the demo's local forge)."""
    from controller.config.settings import Settings

    env = process_environment() if environ is None else dict(environ)
    resolved = settings if settings is not None else Settings.from_env(env)
    admission = None
    if mode is Mode.SERVE:
        from controller.services.control.admission import Admission

        # Specs from API clients: held to the operator's rules, and forge clients only for the
        # operator's forges, so the credential never goes to a forge a stored spec names.
        admission = Admission.of(resolved, env)
    return Root(
        settings=resolved,
        environ=env,
        forges=ForgeClients(resolved.forge, admission, token=forge_token),
        mode=mode,
        admission=admission,
        listen_url=listen_url,
        forge_for=forge_for,
    )
