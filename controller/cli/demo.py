"""``crucible demo``: the whole loop end to end on embedded defaults, offline (and with ``--kubernetes``,
its search round as a Job on a control plane this machine can reach)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from controller.cli.common import EXIT_USAGE, build_root


def register(cli: click.Group) -> None:
    cli.add_command(demo)


@click.command()
@click.option("--turns", default=8, type=click.IntRange(min=1), help="turns in round 0")
@click.option("--json", "as_json", is_flag=True)
@click.option("--keep", "keep_dir", type=click.Path(path_type=Path), default=None, help="work here, keep it")
@click.option(
    "--kubernetes",
    is_flag=True,
    help="run the search round as a Job on the Kubernetes control plane CRUCIBLE_KUBECONFIG names",
)
def demo(turns: int, as_json: bool, keep_dir: Path | None, kubernetes: bool) -> None:
    """The whole loop end to end on embedded defaults, offline."""
    from contextlib import ExitStack

    from controller.cli.display import TableObserver
    from controller.config.settings import Settings
    from controller.services.control.demo import DemoParts, run_demo
    from controller.wiring import Mode, build

    root = build_root()
    if kubernetes:
        _require_control_plane(root.settings)
    stack = ExitStack()

    def services(settings: Settings, forge_url: str, forge_token: str) -> DemoParts:
        settings = settings.model_copy(update={"kubernetes": root.settings.kubernetes})
        demo_root = build(
            root.environ,
            mode=Mode.DEMO,
            settings=settings,
            forge_token=forge_token,
            listen_url="http://127.0.0.1" if kubernetes else None,
        )
        stack.callback(demo_root.close)  # the demo's store, once the demo is done with it
        if kubernetes:
            from controller.api.worker_serve import serving, worker_app

            # As ``serve`` builds it: round 0 of a watching run hands over to the review round.
            remote = demo_root.worker_api()
            remote.controller_url = stack.enter_context(
                serving(worker_app(remote), on_stop=remote.close_waits)
            )
        return DemoParts(demo_root.service(), demo_root.reader(), demo_root.forges.for_url(forge_url))

    with stack:
        code = run_demo(
            turns=turns,
            as_json=as_json,
            workdir=keep_dir,
            observer=TableObserver(),
            environ=root.environ,
            services=services,
            kubernetes=kubernetes,
        )
    sys.exit(code)


K8S_HINT = """crucible demo --kubernetes needs a Kubernetes control plane: {problem}
On this machine, from a crucible checkout:
  bash scripts/k8s/up                  # a real API server, etcd and Job controller on 127.0.0.1
  eval "$(bash scripts/k8s/env)"
  CRUCIBLE_KUBECONFIG=$CRUCIBLE_K8S_KUBECONFIG crucible demo --kubernetes
Or point CRUCIBLE_KUBECONFIG at any cluster whose nodes can reach this machine."""


def _require_control_plane(settings: Any) -> None:
    from controller.brokers.kubernetes.connect import unreachable

    problem = unreachable(settings.kubernetes.kubeconfig, settings.kubernetes.kube_namespace)
    if problem is not None:
        click.echo(K8S_HINT.format(problem=problem), err=True)
        sys.exit(EXIT_USAGE)
