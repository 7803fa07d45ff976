"""The process node: a stand-in kubelet that runs each pod's command as a local process.

There is no container runtime on the machines crucible is tested on, but the Kubernetes broker must be
tested against the real API server and the real Job controller. This node closes the gap: it registers a
Ready Node, binds unscheduled pods to itself (no kube-scheduler), runs the first container of each pod as a
local process with the pod's environment, and reports what a kubelet reports: Pending -> Running ->
Succeeded/Failed with the exit code, ``DeadlineExceeded`` past the pod's ``activeDeadlineSeconds``. It
honours deletion (SIGTERM to the process group, SIGKILL after the grace period to every process the pod
started, whatever session it put itself in, as a runtime ends a container; then deletes the pod with
grace 0, as a kubelet confirms a deletion) and serves ``pods/log`` to the API server over TLS, as a
kubelet does on port 10250.

What it does not emulate (see adr/0006): images (the command runs on this host; an empty ``command`` means
the image's entrypoint, taken to be ``crucible`` since every image of the project is crucible's), security
contexts, resource limits, probes, restarts, init and sidecar containers, and volumes other than
``emptyDir``: each emptyDir is a directory of the pod's own, and a mount path in the working directory,
the arguments or the environment is rewritten to that directory.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import http.server
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

MERGE_PATCH = "application/merge-patch+json"  # the client defaults a dict body to JSON Patch
KILL_GRACE_CAP = 10.0  # seconds between SIGTERM and SIGKILL at most, whatever the pod asks
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Running:
    """One pod's process and what its end should report."""

    process: subprocess.Popen[bytes]
    log: Path
    started: str
    deleting: bool = False
    deadline_exceeded: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class ProcessNode:
    def __init__(
        self, api: client.ApiClient, node: str, workdir: Path, entrypoint: str, log_port: int
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.node = node
        self.workdir = workdir
        self.entrypoint = entrypoint
        self.log_port = log_port
        self.running: dict[tuple[str, str], Running] = {}
        self.started: set[str] = set()  # pod uids whose process was started (a pod runs once)
        self.deleted: set[str] = set()  # pod uids being deleted (their process must not start or must die)
        self.lock = threading.Lock()

    # -- node ---------------------------------------------------------------------------------------------
    def register(self) -> None:
        labels = {
            "kubernetes.io/hostname": self.node,
            "kubernetes.io/os": "linux",
            "crucible.dev/process-node": "true",
        }
        try:
            self.core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=self.node, labels=labels)))
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        capacity = {
            "cpu": str(os.cpu_count() or 2),
            "memory": "16Gi",
            "pods": "110",
            "ephemeral-storage": "50Gi",
        }
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": self.node},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.log_port}},
            "nodeInfo": _node_info(),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "ProcessNodeReady",
                    "message": "process node",
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                },
            ],
        }
        self.core.patch_node_status(self.node, {"status": status}, _content_type=MERGE_PATCH)
        # A new Node may carry the not-ready taint; nothing here would ever lift it.
        self.core.patch_node(self.node, {"spec": {"taints": None}}, _content_type=MERGE_PATCH)

    # -- binding (instead of kube-scheduler) -----------------------------------------------------------------
    def bind_forever(self) -> None:
        for pod in _watch_pods(self.core, "spec.nodeName="):
            if pod.metadata.deletion_timestamp is None and not pod.spec.node_name:
                self.bind(pod)

    def bind(self, pod: Any) -> None:
        target = client.V1ObjectReference(kind="Node", name=self.node, api_version="v1")
        body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod.metadata.name), target=target)
        try:
            self.core.create_namespaced_pod_binding(
                pod.metadata.name, pod.metadata.namespace, body, _preload_content=False
            )
        except client.ApiException as exc:
            if exc.status not in (404, 409):  # gone, or bound already
                raise

    # -- pods on this node ----------------------------------------------------------------------------------
    def run_forever(self) -> None:
        for pod in _watch_pods(self.core, f"spec.nodeName={self.node}"):
            key = (pod.metadata.namespace, pod.metadata.name)
            if pod.metadata.deletion_timestamp is not None:
                self.delete(pod, key)
            elif pod.metadata.uid not in self.started and pod.status.phase in (None, "Pending"):
                self.started.add(pod.metadata.uid)
                threading.Thread(target=self.run, args=(pod,), daemon=True, name=f"pod-{key[1]}").start()
            elif pod.metadata.uid not in self.started and pod.status.phase == "Running":
                # Running before this node (re)started: its process is gone, as after a kubelet restart.
                self.started.add(pod.metadata.uid)
                self.report(pod, "Failed", _terminated(137, "ProcessNodeRestarted", now()))

    def delete(self, pod: Any, key: tuple[str, str]) -> None:
        with self.lock:
            running = self.running.get(key)
            first = pod.metadata.uid not in self.deleted
            self.deleted.add(pod.metadata.uid)
        if not first:
            return
        if running is not None:
            running.deleting = True
            grace = min(float(pod.metadata.deletion_grace_period_seconds or 0), KILL_GRACE_CAP)
            threading.Thread(target=self.kill, args=(running, grace), daemon=True).start()
            threading.Thread(target=self.confirm_deletion, args=(key, running), daemon=True).start()
        else:
            self.confirm_deletion(key, None)

    def kill(self, running: Running, grace: float) -> None:
        # The pod's processes are found before its first process can exit: once it has, the agents it
        # started in sessions of their own belong to init and could no longer be told from others'.
        tree = _descendants(running.process.pid)
        _signal_group(running.process, signal.SIGTERM)
        if not running.done.wait(grace):
            tree |= _descendants(running.process.pid)  # still ours: started during the grace period
            _signal_group(running.process, signal.SIGKILL)
        _kill_all(tree)

    def confirm_deletion(self, key: tuple[str, str], running: Running | None) -> None:
        if running is not None:
            running.done.wait()
        try:
            self.core.delete_namespaced_pod(key[1], key[0], grace_period_seconds=0)
        except client.ApiException as exc:
            if exc.status != 404:
                raise

    def run(self, pod: Any) -> None:
        key = (pod.metadata.namespace, pod.metadata.name)
        pod_dir = self.workdir / key[0] / key[1]
        volumes = _empty_dirs(pod, pod_dir)
        container = pod.spec.containers[0]
        env = self.wait_for_config(pod, container, pod_dir, volumes)
        if env is None:
            return  # deleted while it waited
        argv = [
            _remap(_expand(a, env), volumes)
            for a in [*(container.command or [self.entrypoint]), *(container.args or [])]
        ]
        cwd = Path(_remap(container.working_dir, volumes)) if container.working_dir else pod_dir
        log = pod_dir / "log"
        started = now()
        try:
            cwd.mkdir(parents=True, exist_ok=True)
            with log.open("wb") as out:
                process = subprocess.Popen(
                    argv,
                    env=env,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except (OSError, ValueError) as exc:
            log.write_text(f"process node: cannot start {argv!r}: {exc}\n")
            self.report(pod, "Failed", _terminated(128, "StartError", started, str(exc)), started)
            return
        running = Running(process=process, log=log, started=started)
        with self.lock:
            self.running[key] = running
            deleted_meanwhile = pod.metadata.uid in self.deleted
        if deleted_meanwhile:
            running.deleting = True
            _signal_group(process, signal.SIGKILL)
            threading.Thread(target=self.confirm_deletion, args=(key, running), daemon=True).start()
        self.report(pod, "Running", {"running": {"startedAt": started}}, started)
        deadline = pod.spec.active_deadline_seconds
        try:
            code = process.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            running.deadline_exceeded = True
            tree = _descendants(process.pid)
            _signal_group(process, signal.SIGKILL)
            _kill_all(tree)
            code = process.wait()
        running.done.set()
        with self.lock:
            self.running.pop(key, None)
        if running.deleting:
            return  # confirm_deletion removes the pod; a deleted pod reports nothing more
        exit_code = 128 - code if code < 0 else code  # killed by a signal: 128 + signal, as runtimes report
        if running.deadline_exceeded:
            self.report(
                pod,
                "Failed",
                _terminated(exit_code, "DeadlineExceeded", started),
                started,
                reason="DeadlineExceeded",
                message="Pod was active on the node longer than the specified deadline",
            )
        elif exit_code == 0:
            self.report(pod, "Succeeded", _terminated(0, "Completed", started), started)
        else:
            self.report(pod, "Failed", _terminated(exit_code, "Error", started), started)

    def wait_for_config(
        self, pod: Any, container: Any, pod_dir: Path, volumes: dict[str, Path]
    ) -> dict[str, str] | None:
        """The pod's environment once every Secret and ConfigMap it needs exists; a kubelet keeps the pod
        Pending (``CreateContainerConfigError``) and retries meanwhile. None when the pod is deleted first."""
        reported = False
        while pod.metadata.uid not in self.deleted:
            try:
                return self.environment(pod, container, pod_dir, volumes)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
                if not reported:
                    waiting = {"reason": "CreateContainerConfigError", "message": f"not found: {exc.reason}"}
                    self.report(pod, "Pending", {"waiting": waiting})
                    reported = True
                time.sleep(0.2)
        return None

    def environment(
        self, pod: Any, container: Any, pod_dir: Path, volumes: dict[str, Path]
    ) -> dict[str, str]:
        """The pod's environment on top of a minimal base (PATH with this interpreter's bin first, HOME)."""
        base_path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{base_path}",
            "HOME": str(pod_dir / "home"),
            "HOSTNAME": pod.metadata.name,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
        }
        (pod_dir / "home").mkdir(parents=True, exist_ok=True)
        ns = pod.metadata.namespace
        for source in container.env_from or []:
            data = self.source_data(ns, source.config_map_ref, source.secret_ref)
            env.update({f"{source.prefix or ''}{k}": v for k, v in data.items()})
        for var in container.env or []:
            value = self.env_value(pod, var, env)
            if value is not None:
                env[var.name] = _remap(value, volumes)
        return env

    def source_data(self, ns: str, config_map: Any, secret: Any) -> dict[str, str]:
        try:
            if config_map is not None:
                return dict(self.core.read_namespaced_config_map(config_map.name, ns).data or {})
            if secret is not None:
                raw = self.core.read_namespaced_secret(secret.name, ns).data or {}
                return {k: _b64(v) for k, v in raw.items()}
        except client.ApiException as exc:
            optional = (config_map or secret).optional
            if exc.status == 404 and optional:
                return {}
            raise
        return {}

    def env_value(self, pod: Any, var: Any, env: dict[str, str]) -> str | None:
        if var.value_from is None:
            return _expand(var.value or "", env)
        ref = var.value_from
        if ref.field_ref is not None:
            fields = {
                "metadata.name": pod.metadata.name,
                "metadata.namespace": pod.metadata.namespace,
                "metadata.uid": pod.metadata.uid,
                "spec.nodeName": self.node,
                "spec.serviceAccountName": pod.spec.service_account_name or "",
                "status.podIP": "127.0.0.1",
                "status.hostIP": "127.0.0.1",
            }
            return fields.get(ref.field_ref.field_path)
        key_ref = ref.secret_key_ref or ref.config_map_key_ref
        if key_ref is not None:
            data = self.source_data(pod.metadata.namespace, ref.config_map_key_ref, ref.secret_key_ref)
            return data.get(key_ref.key)
        return None

    def report(
        self,
        pod: Any,
        phase: str,
        state: dict[str, Any],
        started: str | None = None,
        *,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        container = pod.spec.containers[0]
        running = phase == "Running"
        ready = "True" if running else "False"
        status: dict[str, Any] = {
            "phase": phase,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": started or now(),
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": now()}
                for t, s in (
                    ("PodScheduled", "True"),
                    ("Initialized", "True"),
                    ("Ready", ready),
                    ("ContainersReady", ready),
                )
            ],
            "containerStatuses": [
                {
                    "name": container.name,
                    "image": container.image or "",
                    "imageID": "",
                    "ready": running,
                    "restartCount": 0,
                    "started": running,
                    "state": state,
                }
            ],
            "reason": reason,
            "message": message,
        }
        try:
            self.core.patch_namespaced_pod_status(
                pod.metadata.name, pod.metadata.namespace, {"status": status}, _content_type=MERGE_PATCH
            )
        except client.ApiException as exc:
            if exc.status != 404:  # deleted meanwhile
                raise

    def log_path(self, ns: str, name: str) -> Path:
        return self.workdir / ns / name / "log"

    def is_running(self, ns: str, name: str) -> bool:
        with self.lock:
            return (ns, name) in self.running


# -- pods/log, served to the API server -------------------------------------------------------------------
def serve_logs(node: ProcessNode, port: int, tls_dir: Path) -> None:
    """HTTPS ``GET /containerLogs/{ns}/{pod}/{container}`` (``follow``, ``tailLines``), CA-signed clients."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            query = urllib.parse.parse_qs(url.query)
            if (
                len(parts) != 4
                or parts[0] != "containerLogs"
                or not node.log_path(parts[1], parts[2]).exists()
            ):
                self.send_error(404)
                return
            path = node.log_path(parts[1], parts[2])
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            data = path.read_bytes()
            tail = query.get("tailLines", [None])[0]
            if tail is not None:
                data = b"".join(data.splitlines(keepends=True)[-int(tail) :]) if int(tail) > 0 else b""
            self.wfile.write(data)
            if query.get("follow", ["false"])[0] == "true":
                self.follow(path, len(path.read_bytes()) if tail is not None else len(data), parts)

        def follow(self, path: Path, offset: int, parts: list[str]) -> None:
            with path.open("rb") as f:
                f.seek(offset)
                while True:
                    chunk = f.read(65536)
                    if chunk:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    elif not node.is_running(parts[1], parts[2]):
                        self.wfile.write(f.read())
                        return
                    else:
                        time.sleep(0.1)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tls_dir / "ca.crt"))
    context.load_cert_chain(tls_dir / "procnode.crt", tls_dir / "procnode.key")
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


# -- helpers ------------------------------------------------------------------------------------------------
def _forever(name: str, loop: Any) -> None:
    """Run ``loop`` again after any error (a lost watch, a refused call): a kubelet does not give up."""
    while True:
        try:
            loop()
        except Exception as exc:
            print(f"process node: {name}: {type(exc).__name__}: {exc}; retrying", file=sys.stderr, flush=True)
            time.sleep(1)


def _watch_pods(core: Any, field_selector: str) -> Any:
    """Every pod event matching the selector, forever: list, then watch from there; relist on 410 Gone."""
    while True:
        listing = core.list_pod_for_all_namespaces(field_selector=field_selector)
        yield from listing.items
        version = listing.metadata.resource_version
        try:
            watcher: Any = watch.Watch()  # type: ignore[no-untyped-call]
            stream = watcher.stream(
                core.list_pod_for_all_namespaces,
                field_selector=field_selector,
                resource_version=version,
                timeout_seconds=300,
            )
            for event in stream:
                if event["type"] in ("ADDED", "MODIFIED"):
                    yield event["object"]
        except client.ApiException as exc:
            if exc.status != 410:
                raise


def _empty_dirs(pod: Any, pod_dir: Path) -> dict[str, Path]:
    """Mount path -> host directory for each emptyDir mounted by the first container."""
    empty = {v.name for v in pod.spec.volumes or [] if v.empty_dir is not None}
    mounts = {}
    for mount in pod.spec.containers[0].volume_mounts or []:
        if mount.name in empty:
            host = pod_dir / "volumes" / mount.name
            host.mkdir(parents=True, exist_ok=True)
            mounts[mount.mount_path.rstrip("/") or "/"] = host
    return mounts


def _remap(value: str, volumes: dict[str, Path]) -> str:
    """A path under an emptyDir mount, moved to the pod's host directory for that volume.

    The host's file system stands in for the image, so an absolute path naming a file that exists
    on the host is the image's file and stays as it is, even under a mount: a test's interpreter or
    script living in a temp dir (``/tmp/...``) while the pod mounts its emptyDir at ``/tmp``."""
    if value.startswith("/") and Path(value).is_file():
        return value
    for mount, host in sorted(volumes.items(), key=lambda kv: -len(kv[0])):
        if value == mount or value.startswith(mount + "/"):
            return str(host) + value[len(mount) :]
    return value


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` references (``$$`` escapes), left as written when VAR is undefined."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR_REF.sub(sub, value)


def _terminated(code: int, reason: str, started: str, message: str | None = None) -> dict[str, Any]:
    state = {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now()}
    return {"terminated": state | ({"message": message} if message else {})}


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc), whichever session or group it is in."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])  # the command may contain spaces and ")"
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _b64(value: str | bytes) -> str:
    return base64.b64decode(value).decode()


def _node_info() -> dict[str, str]:
    return {
        "machineID": "",
        "systemUUID": "",
        "bootID": "",
        "kernelVersion": os.uname().release,
        "osImage": "process node",
        "containerRuntimeVersion": "process://",
        "kubeletVersion": "v0.0.0",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", default="crucible-process-node")
    parser.add_argument(
        "--workdir", type=Path, required=True, help="one directory per pod: cwd, HOME, log, emptyDirs"
    )
    parser.add_argument("--log-port", type=int, default=16450)
    parser.add_argument("--tls-dir", type=Path, required=True, help="ca.crt, procnode.crt, procnode.key")
    parser.add_argument("--entrypoint", default="crucible", help="the command of a container that names none")
    args = parser.parse_args()
    api = config.new_client_from_config(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    node = ProcessNode(
        api,
        args.node,
        args.workdir,
        args.entrypoint,
        args.log_port,
    )
    node.register()
    threading.Thread(target=serve_logs, args=(node, args.log_port, args.tls_dir), daemon=True).start()
    threading.Thread(target=_forever, args=("binder", node.bind_forever), daemon=True).start()
    print(f"process node {args.node} ready", flush=True)
    _forever("runner", node.run_forever)


if __name__ == "__main__":
    main()
