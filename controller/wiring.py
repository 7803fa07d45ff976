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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.config.paths import database_url, home_dir
from controller.domain.errors import SpecError

if TYPE_CHECKING:
    from controller.brokers.base import Broker, HypothesisLauncher
    from controller.brokers.kubernetes.broker import RemoteRoundsPort
    from controller.brokers.local import RoundRunner
    from controller.config.broker import BrokerSpec
    from controller.config.settings import ForgeSettings, Settings
    from controller.config.spec import Spec
    from controller.forge.base import Forge, ForgeUsage
    from controller.forge.github import GithubForge
    from controller.services.control.admission import Admission
    from controller.services.control.service import ForgeFor, RunService
    from controller.services.remote.remote_rounds import RemoteRounds
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

    def __init__(self, settings: ForgeSettings, admission: Admission | None = None) -> None:
        self._settings = settings
        self._admission = admission
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
        from controller.forge.auth import from_settings
        from controller.forge.github import GithubForge

        if self._admission is not None:
            self._admission.check_forge(api_url, "publish.forge")
        with self._lock:
            client = self._clients.get(api_url)
            if client is not None:
                return client
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


@dataclass
class Root:
    """Everything a command or the server needs, built on first use from one settings tree."""

    settings: Settings
    environ: Mapping[str, str]
    forges: ForgeClients
    forge_for: ForgeFor | None = None  # overrides forges.for_spec (the demo's local forge)
    inline: bool = True  # rounds in the caller's thread (crucible loop) or one thread each (serve)
    # The controller's side of remote rounds (worker tokens, the worker's outcome); Kubernetes runs need it.
    remote_rounds: RemoteRoundsPort | None = None
    _store: Store | None = field(default=None, repr=False)
    _service: RunService | None = field(default=None, repr=False)
    _hypothesis_pods: HypothesisLauncher | None = field(default=None, repr=False)

    def store(self) -> Store:
        """The store, opened once. The default SQLite database is created and upgraded on open so a
        first run just works; any other database must be upgraded on purpose (``crucible db upgrade``)."""
        if self._store is None:
            from controller.store.store import Store

            auto = self.settings.database_is_sqlite
            if auto:
                self.settings.home.mkdir(parents=True, exist_ok=True)
            self._store = Store.open(self.settings.database_url, upgrade=auto)
        return self._store

    def upgraded_store(self) -> Store:
        """The store after applying every migration (``crucible db upgrade``)."""
        from controller.store.store import Store

        if self.settings.database_is_sqlite:
            self.settings.home.mkdir(parents=True, exist_ok=True)
        self._store = Store.open(self.settings.database_url, upgrade=True)
        return self._store

    def service(self) -> RunService:
        """The run service; each run's rounds go to the broker its spec's ``[broker] kind`` names."""
        if self._service is None:
            from controller.services.control.service import RunService

            self._service = RunService(
                self.settings,
                self.store(),
                environ=self.environ,
                forge_for=self.forge_for or self.forges.for_spec,
                broker=self._broker,
                hypotheses=self._hypotheses_for,
            )
        return self._service

    def _broker(self, runner: RoundRunner) -> Broker:
        from controller.brokers.local import LocalBroker
        from controller.brokers.routing import RoutedBroker
        from controller.services.control.recovery import stored_spec

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
        from controller.services.control.recovery import stored_spec

        if self.remote_rounds is None:
            raise SpecError(
                "broker.kind",
                "kubernetes rounds report to the controller's worker API, which this process does not "
                "serve; run the spec with a controller that does",
            )
        kube = self.settings.kubernetes
        api, namespace = connect(kube.kubeconfig, kube.kube_namespace)
        return KubernetesBroker(
            api,
            mint_worker_env=self.remote_rounds.mint_worker_env,
            remote_outcome=self.remote_rounds.remote_outcome,
            revoke=self.remote_rounds.revoke,
            spec_for=lambda run_id: stored_spec(self.store(), run_id).broker,
            namespace=namespace,
        )

    def _hypotheses_for(self, run_id: str) -> HypothesisLauncher | None:
        """The launcher of the run's hypothesis pods when it runs on Kubernetes with ``parallel > 1``."""
        from controller.services.control.recovery import stored_spec

        broker = stored_spec(self.store(), run_id).broker
        if broker.kind != "kubernetes" or broker.parallel <= 1:
            return None
        if self._hypothesis_pods is None:
            self._hypothesis_pods = self._new_hypothesis_pods()
        return self._hypothesis_pods

    def _new_hypothesis_pods(self) -> HypothesisLauncher:
        from controller.brokers.kubernetes.connect import connect
        from controller.brokers.kubernetes.hypotheses import HypothesisPods
        from controller.services.control.recovery import stored_spec

        if self.remote_rounds is None:
            raise SpecError(
                "broker.kind",
                "kubernetes hypothesis pods report to the controller's worker API, which this process "
                "does not serve; run the spec with a controller that does",
            )
        kube = self.settings.kubernetes
        api, namespace = connect(kube.kubeconfig, kube.kube_namespace)
        return HypothesisPods(
            api,
            mint_hypothesis_env=self.remote_rounds.mint_hypothesis_env,
            spec_for=lambda run_id: stored_spec(self.store(), run_id).broker,
            namespace=namespace,
        )

    def admit_from_api(self) -> Admission:
        """This process takes specs from API clients (``crucible serve``): the rules they are held to
        (the settings' over this environment), and from now on forge clients only for the operator's
        forges. Call before the service is built, which keeps the forge factory it is given."""
        from controller.services.control.admission import Admission

        admission = Admission.of(self.settings, self.environ)
        self.forges = ForgeClients(self.settings.forge, admission)
        return admission

    def worker_api(self, default_url: str) -> RemoteRounds:
        """The controller's side of remote rounds (ADR-0014), which ``crucible serve`` mounts and the
        remote brokers mint tokens from; workers reach it at ``CRUCIBLE_WORKER_CONTROLLER_URL`` or,
        unset, ``default_url`` (where this process listens)."""
        from controller.config.options import RunOptions
        from controller.services.remote.remote_rounds import RemoteRounds

        store = self.store()
        workers = self.settings.workers
        remote = RemoteRounds(
            self.settings,
            store,
            controller_url=workers.worker_controller_url or default_url,
            token_ttl_s=workers.worker_token_ttl,
            hand_over=lambda run_id: RunOptions.stored(store.get_run(run_id).options).watch_feedback,
        )
        self.remote_rounds = remote
        return remote

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self._service = None


def build(
    environ: Mapping[str, str] | None = None,
    *,
    settings: Settings | None = None,
    forge_for: ForgeFor | None = None,
    inline: bool = True,
) -> Root:
    """The root for this process. ``environ`` defaults to the process environment (read once);
    ``settings`` defaults to the settings that environment names."""
    from controller.config.settings import Settings

    env = process_environment() if environ is None else dict(environ)
    resolved = settings if settings is not None else Settings.from_env(env)
    return Root(
        settings=resolved,
        environ=env,
        forges=ForgeClients(resolved.forge),
        forge_for=forge_for,
        inline=inline,
    )
