"""A controller process for the restart tests: drives one run with ``KubernetesBroker`` until killed
(a run with ``parallel > 1``: the round here, each hypothesis in a pod of its own, ADR-0018).

    python controller_proc.py DATABASE_URL HOME API_URL KUBECONFIG RUN_ID WORKER_ARGV_JSON

It shares the database with the test (as replicas do) and mints worker tokens there; the worker routes
are served by the test process, as another replica would serve them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kubernetes import config

from controller.brokers.kubernetes.broker import KubernetesBroker
from controller.brokers.kubernetes.hypotheses import HypothesisPods
from controller.brokers.local import LocalBroker
from controller.config.settings import Settings
from controller.services.remote.remote_rounds import RemoteRounds
from controller.services.views.specs import stored_spec
from controller.store import Store
from controller.wiring import compose_service


def main() -> None:
    database_url, home, api_url, kubeconfig, run_id, argv = sys.argv[1:]
    settings = Settings(home=Path(home), database_url=database_url, lease_ttl_s=2.0)
    with Store.open(database_url) as store:
        remote = RemoteRounds(settings, store, controller_url=api_url)
        api = config.new_client_from_config(config_file=kubeconfig)

        def broker(_runner: object) -> KubernetesBroker:
            return KubernetesBroker(
                api,
                mint_worker_env=remote.mint_worker_env,
                remote_outcome=remote.remote_outcome,
                revoke=remote.revoke,
                spec_for=lambda run: stored_spec(store, run).broker,
                command=tuple(json.loads(argv)),
            )

        if stored_spec(store, run_id).broker.parallel > 1:
            pods = HypothesisPods(
                api,
                mint_slot_env=remote.mint_slot_env,
                slots=remote.slots,
                spec_for=lambda run: stored_spec(store, run).broker,
                command=tuple(json.loads(argv)),
            )
            service = compose_service(
                settings,
                store,
                environ={},
                forge_for=_no_forge,
                broker=lambda runner: LocalBroker(runner, inline=True),
                hypotheses=lambda _run: pods,
            )
        else:
            service = compose_service(settings, store, environ={}, forge_for=_no_forge, broker=broker)
        print("driving", flush=True)
        service.drive(run_id)


def _no_forge(spec: object) -> object:
    raise AssertionError("no publishing here")


if __name__ == "__main__":
    main()
