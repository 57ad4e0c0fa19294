"""Start and stop the local GPU cluster: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK, every one on 127.0.0.1, with the simulated fleet of fleet.yaml.

    python -m tests.cluster up      # prints the admin kubeconfig path as its last line
    python -m tests.cluster down
    python -m tests.cluster status
    python -m tests.cluster build   # the binaries, when not in the cache yet
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import ack, build, custom_resources, dra, fleet, gpu_operator, versions

HERE = Path(__file__).resolve().parent
LOOPBACK = "127.0.0.1"
ETCD_PORT = int(os.environ.get("KUBEGPU_ETCD_PORT", "32379"))
APISERVER_PORT = int(os.environ.get("KUBEGPU_APISERVER_PORT", "36443"))
KWOK_PORT = int(os.environ.get("KUBEGPU_KWOK_PORT", "30250"))
PROCESS_ORDER = ("etcd", "kube-apiserver", "kwok", "kube-controller-manager", "kube-scheduler")


class ClusterStartError(RuntimeError):
    pass


def state_dir() -> Path:
    return Path(os.environ.get("KUBEGPU_CLUSTER_DIR", versions.cache_root() / "cluster"))


@dataclass(frozen=True)
class Layout:
    root: Path
    # Another instance runs with its own KUBEGPU_CLUSTER_DIR and ports (KUBEGPU_*_PORT); a test that
    # started one reaches it through a Layout with its state directory and API server port.
    apiserver_port: int = APISERVER_PORT

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pids(self) -> Path:
        return self.root / "pids.json"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def component_kubeconfig(self, name: str) -> Path:
        return self.root / f"{name}.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.apiserver_port}"


# --- certificates -----------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(pki: Path, name: str, subject: str, *, server_sans: str = "", client: bool = True) -> None:
    usages = ["clientAuth"] if client else []
    if server_sans:
        usages.insert(0, "serverAuth")
    ext = [
        "basicConstraints=CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={','.join(usages)}",
    ]
    if server_sans:
        ext.append(f"subjectAltName={server_sans}")
    (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
    _openssl(
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        subject,
        cwd=pki,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "3650",
        "-sha256",
        "-extfile",
        f"{name}.ext",
        "-out",
        f"{name}.crt",
        cwd=pki,
    )


def make_ca(folder: Path, subject: str, days: int, name: str = "ca") -> Path:
    """A self-signed CA in `folder` (<name>.crt and <name>.key); its certificate's path."""
    folder.mkdir(parents=True, exist_ok=True)
    key, cert = f"{name}.key", f"{name}.crt"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        str(days),
        "-subj",
        subject,
        cwd=folder,
    )
    return folder / cert


def make_pki(pki: Path) -> None:
    """A CA and one certificate per identity; all serving names are loopback."""
    if (pki / "done").exists():
        return
    make_ca(pki, "/CN=kubegpu-local-ca", days=3650)
    sans = (
        "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
        "DNS:kubernetes.default.svc.cluster.local"
    )
    _issue(pki, "apiserver", "/CN=kube-apiserver", server_sans=sans, client=False)
    _issue(pki, "admin", "/O=system:masters/CN=kubegpu-admin")
    _issue(pki, "apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client")
    _issue(pki, "kube-controller-manager", "/CN=system:kube-controller-manager")
    _issue(pki, "kube-scheduler", "/CN=system:kube-scheduler")
    _issue(pki, "kwok", "/O=system:masters/CN=kwok-controller", server_sans="IP:127.0.0.1,DNS:localhost")
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    (pki / "done").write_text("")


def write_kubeconfig(path: Path, layout: Layout, cert: str) -> None:
    pki = layout.pki
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubegpu-local",
                "cluster": {"server": layout.server, "certificate-authority": str(pki / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": cert,
                "user": {"client-certificate": str(pki / f"{cert}.crt"), "client-key": str(pki / f"{cert}.key")},
            }
        ],
        "contexts": [{"name": "kubegpu-local", "context": {"cluster": "kubegpu-local", "user": cert}}],
        "current-context": "kubegpu-local",
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)


# --- a minimal API client (no dependency beyond the standard library) -------------------


class Api:
    def __init__(self, layout: Layout):
        self.base = layout.server
        self.context = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))
        self.context.load_cert_chain(str(layout.pki / "admin.crt"), str(layout.pki / "admin.key"))

    def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> tuple[int, dict | str]:
        """request_with_warnings (the same arguments) without the warnings."""
        status, reply, _warnings = self.request_with_warnings(method, path, *args, **kwargs)
        return status, reply

    def request_with_warnings(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        content_type: str = "application/json",
        timeout: float = 10,
    ) -> tuple[int, dict | str, list[str]]:
        """The status, the reply and the API server's Warning headers (admission warnings among them)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": content_type, "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=timeout) as resp:
                status, raw, headers = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as exc:
            status, raw, headers = exc.code, exc.read(), exc.headers
        warnings = headers.get_all("Warning") or []
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text), warnings
        except ValueError:
            return status, text, warnings

    def ensure(self, path: str, body: dict) -> None:
        """Create an object; an existing one is left as it is."""
        status, reply = self.request("POST", path, body)
        if status not in (200, 201, 409):
            raise ClusterStartError(f"creating {body['kind']} {body['metadata']['name']} failed: {status} {reply}")


# --- processes ---------------------------------------------------------------------------


def command_lines(layout: Layout, bins: Path) -> dict[str, list[str]]:
    pki = layout.pki
    etcd_url = f"http://{LOOPBACK}:{ETCD_PORT}"
    peer_url = f"http://{LOOPBACK}:{ETCD_PORT + 1}"
    return {
        "etcd": [
            str(bins / "etcd"),
            "--name=kubegpu",
            f"--data-dir={layout.root / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=kubegpu={peer_url}",
            "--listen-metrics-urls=",
            "--unsafe-no-fsync",
            "--quota-backend-bytes=4294967296",
            "--auto-compaction-retention=1",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(bins / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={APISERVER_PORT}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-key-file={pki / 'sa.key'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--endpoint-reconciler-type=none",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            "--profiling=false",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            f"--cert-dir={layout.root / 'apiserver-certs'}",
        ],
        "kwok": [
            str(bins / "kwok"),
            f"--kubeconfig={layout.component_kubeconfig('kwok')}",
            f"--config={layout.root / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={fleet.FAKE_NODE_ANNOTATION}=fake",
            f"--node-ip={LOOPBACK}",
            "--node-name=localhost",
            f"--node-port={KWOK_PORT}",
            f"--server-address={LOOPBACK}:{KWOK_PORT}",
            "--node-lease-duration-seconds=40",
            f"--tls-cert-file={pki / 'kwok.crt'}",
            f"--tls-private-key-file={pki / 'kwok.key'}",
        ],
        "kube-controller-manager": [
            str(bins / "kube-controller-manager"),
            f"--kubeconfig={layout.component_kubeconfig('kube-controller-manager')}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            "--secure-port=0",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=true",
        ],
        "kube-scheduler": [
            str(bins / "kube-scheduler"),
            f"--kubeconfig={layout.component_kubeconfig('kube-scheduler')}",
            f"--authentication-kubeconfig={layout.component_kubeconfig('kube-scheduler')}",
            f"--authorization-kubeconfig={layout.component_kubeconfig('kube-scheduler')}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            "--secure-port=0",
        ],
    }


KWOK_OPTIONS = {
    "cidr": "10.0.0.0/16",
    "podPlayStageParallelism": 4,
    "nodePlayStageParallelism": 4,
    "nodeLeaseParallelism": 4,
    "podsOnNodeSyncParallelism": 1,
    "enablePodsOnNodeSyncListPager": True,
    "enableDebuggingHandlers": True,
}


def write_kwok_config(layout: Layout) -> None:
    """KWOK's options, the sample workload's log (served through the API server, for the sample pod and the
    release's proof pods), and the stages."""
    log_file = layout.root / "sample-workload.log"
    log_file.write_text((HERE / "logs" / "tensorflow-mnist.log").read_text())
    documents = [
        {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration", "options": KWOK_OPTIONS},
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "sample-workload"},
            "spec": {
                "selector": {"matchNames": ["tensorflow-mnist"]},
                "logs": [{"logsFile": str(log_file), "follow": False}],
            },
        },
        # The proof pods of gpu_node_release run the same sample, in their default namespace.
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "release-proof"},
            "spec": {
                "selector": {"matchNamespaces": ["kubegpu-release-proof"]},
                "logs": [{"logsFile": str(log_file), "follow": False}],
            },
        },
    ]
    documents += [yaml.safe_load(path.read_text()) for path in sorted((HERE / "kwok-stages").glob("*.yaml"))]
    (layout.root / "kwok.yaml").write_text(yaml.safe_dump_all(documents))


def _proc_folder(pid: int) -> Path | None:
    """The /proc folder of the process that this process knows as `pid`. In a pid namespace whose
    /proc was not mounted anew (some sandboxes and CI runners), /proc numbers the processes of an
    outer namespace; each status file's NSpid line then gives every namespace's pid, ours last."""
    try:
        if os.readlink("/proc/self") == str(os.getpid()):
            return Path(f"/proc/{pid}")
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    for folder in Path("/proc").iterdir():
        if not folder.name.isdigit():
            continue
        try:
            nspid = next(line.split()[1:] for line in (folder / "status").open() if line.startswith("NSpid:"))
            if nspid[-1] == str(pid) and os.readlink(folder / "ns" / "pid") == namespace:
                return folder
        except (OSError, StopIteration, IndexError):
            continue
    return None


def _alive(pid: int, binary: str) -> bool:
    """The process is running and is still the binary we started (pids get reused)."""
    folder = _proc_folder(pid)
    try:
        cmdline = (folder / "cmdline").read_bytes().split(b"\0")[0].decode() if folder else ""
    except OSError:
        return False
    return Path(cmdline).name == Path(binary).name


def read_pids(layout: Layout) -> dict[str, dict]:
    try:
        return json.loads(layout.pids.read_text())
    except (OSError, ValueError):
        return {}


def start_process(layout: Layout, name: str, argv: list[str], started: dict[str, subprocess.Popen]) -> None:
    with (layout.logs / f"{name}.log").open("ab") as log:
        started[name] = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=layout.root,
        )
    pids = {n: {"pid": proc.pid, "binary": proc.args[0]} for n, proc in started.items()}
    layout.pids.write_text(json.dumps(pids, indent=2))


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def check_started(started: dict[str, subprocess.Popen], layout: Layout) -> None:
    """Stop waiting as soon as a process we started has exited, and say how and why."""
    for name, proc in started.items():
        status = proc.poll()
        if status is not None:
            how = f"killed by signal {-status}" if status < 0 else f"exited with status {status}"
            log = layout.logs / f"{name}.log"
            raise ClusterStartError(f"{name} {how}; last lines of {log}:\n{log_tail(log)}")


def wait_for(what: str, check, timeout: float, layout: Layout, started: dict[str, subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        check_started(started, layout)
        time.sleep(0.5)
    raise ClusterStartError(f"timed out after {timeout:.0f}s waiting for {what}; logs in {layout.logs}")


def _get(api: Api, path: str) -> dict:
    try:
        status, body = api.request("GET", path, timeout=3)
    except (OSError, ssl.SSLError):
        return {}
    return body if status == 200 and isinstance(body, dict) else {}


def _is_ready(api: Api) -> bool:
    try:
        status = api.request("GET", "/readyz", timeout=3)[0]
    except (OSError, ssl.SSLError):
        return False
    return status == 200


def served_version(api: Api) -> str | None:
    """The gitVersion the API server reports (/version), None when it does not answer."""
    version = _get(api, "/version").get("gitVersion")
    return version if isinstance(version, str) else None


def _node_ready(node: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions", [])
    )


RESOURCE_API = f"/apis/{dra.RESOURCE_API}"


def apply_fleet(api: Api, spec: dict) -> None:
    plugin, driver = spec["device_plugin"], spec["dra_driver"]
    namespaces = {plugin["namespace"], spec["pod_namespace"]} | ({driver["namespace"]} if driver else set())
    for namespace in sorted(namespaces):
        api.ensure("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    if driver:
        for device_class in dra.device_classes():
            api.ensure(f"{RESOURCE_API}/deviceclasses", device_class)
    for node in spec["nodes"]:
        api.ensure("/api/v1/nodes", fleet.node_object(node))
        uid = _get(api, f"/api/v1/nodes/{node['name']}").get("metadata", {}).get("uid")
        if node["dra"]:
            api.ensure(f"{RESOURCE_API}/resourceslices", dra.resource_slice(node["name"], node["dra"], uid))
        if node["ack_static_device_plugin"]:
            # The mirror pod of the node's static device-plugin pod, as ACK's kubelet shows it.
            api.ensure(f"/api/v1/namespaces/{ack.NAMESPACE}/pods", ack.mirror_pod(node["name"], uid))
    api.ensure(f"/apis/apps/v1/namespaces/{plugin['namespace']}/daemonsets", fleet.device_plugin_daemonset(plugin))
    if driver:
        api.ensure(f"/apis/apps/v1/namespaces/{driver['namespace']}/daemonsets", dra.kubelet_plugin_daemonset(driver))
    for collection, obj in gpu_operator.objects(spec["gpu_operator"]):
        api.ensure(collection, obj)


def apply_fleet_pods(api: Api, spec: dict, layout: Layout, started: dict[str, subprocess.Popen]) -> None:
    namespace = spec["pod_namespace"]
    wait_for(
        f"the default service account in {namespace}",
        lambda: bool(_get(api, f"/api/v1/namespaces/{namespace}/serviceaccounts/default")),
        60,
        layout,
        started,
    )
    for pod in spec["pods"]:
        template = fleet.fleet_claim_template(pod, namespace)
        if template:
            api.ensure(f"{RESOURCE_API}/namespaces/{namespace}/resourceclaimtemplates", template)
        api.ensure(f"/api/v1/namespaces/{namespace}/pods", fleet.fleet_pod(pod, namespace))


def _daemonset_ready(api: Api, namespace: str, name: str) -> bool:
    status = _get(api, f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}").get("status", {})
    desired = status.get("desiredNumberScheduled")
    return bool(desired) and status.get("numberReady") == desired


def _pod_settled(pod: dict, pending: bool) -> bool:
    """Running, or, for a pod meant to stay Pending, turned down by the scheduler."""
    status = pod.get("status", {})
    if not pending:
        return status.get("phase") == "Running"
    scheduled = next((c for c in status.get("conditions", []) if c.get("type") == "PodScheduled"), {})
    return status.get("phase") == "Pending" and scheduled.get("status") == "False"


def fleet_settled(api: Api, spec: dict) -> bool:
    nodes = _get(api, "/api/v1/nodes").get("items", [])
    wanted = {n["name"] for n in spec["nodes"]}
    ready = {n["metadata"]["name"] for n in nodes if _node_ready(n)}
    if not wanted <= ready:
        return False
    if any(
        t.get("key", "").startswith("node.kubernetes.io/") for n in nodes for t in n.get("spec", {}).get("taints", [])
    ):
        return False
    daemonsets = [
        spec["device_plugin"],
        *([spec["dra_driver"]] if spec["dra_driver"] else []),
        *gpu_operator.daemonsets(spec["gpu_operator"]),
    ]
    if not all(_daemonset_ready(api, d["namespace"], d["name"]) for d in daemonsets):
        return False
    system_pods = {
        p["metadata"]["name"]: p for p in _get(api, f"/api/v1/namespaces/{ack.NAMESPACE}/pods").get("items", [])
    }
    if not all(_pod_settled(system_pods.get(ack.mirror_pod_name(n), {}), False) for n in ack.static_nodes(spec)):
        return False
    pods = {
        p["metadata"]["name"]: p for p in _get(api, f"/api/v1/namespaces/{spec['pod_namespace']}/pods").get("items", [])
    }
    return len(pods) == len(spec["pods"]) and all(
        p["name"] in pods and _pod_settled(pods[p["name"]], p["pending"]) for p in spec["pods"]
    )


# The ports the cluster listens on, by the variable that moves each (etcd's peer port is the next one).
PORTS = (
    ("KUBEGPU_ETCD_PORT", ETCD_PORT),
    ("KUBEGPU_ETCD_PORT + 1", ETCD_PORT + 1),
    ("KUBEGPU_APISERVER_PORT", APISERVER_PORT),
    ("KUBEGPU_KWOK_PORT", KWOK_PORT),
)


def ports_in_use(ports: tuple[tuple[str, int], ...]) -> list[tuple[str, int]]:
    """The (variable, port) pairs whose port cannot be bound on the loopback address."""
    taken = []
    for variable, port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # As the servers bind: a port whose last connections are closing (TIME_WAIT) is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                taken.append((variable, port))
    return taken


def ports_message(taken: list[tuple[str, int]]) -> str:
    return (
        "in use on 127.0.0.1 by another program or another local cluster: "
        + ", ".join(f"port {port} ({variable})" for variable, port in taken)
        + "; stop it, or give this cluster other ports with those variables (and its own KUBEGPU_CLUSTER_DIR)"
    )


def running(layout: Layout) -> bool:
    pids = read_pids(layout)
    return bool(pids) and all(
        name in pids and _alive(pids[name]["pid"], pids[name]["binary"]) for name in PROCESS_ORDER
    )


def up(fleet_file: Path, timeout: float) -> Path:
    layout = Layout(state_dir())
    spec = fleet.load(fleet_file)
    release = versions.kubernetes()
    if running(layout) and layout.kubeconfig.exists() and _is_ready(Api(layout)):
        serving = served_version(Api(layout))
        if serving and serving != release:
            raise ClusterStartError(
                f"the cluster running in {layout.root} is Kubernetes {serving}, not {release} (KUBEGPU_KUBERNETES): "
                "stop it with `make cluster-down`, or give this one its own KUBEGPU_CLUSTER_DIR and ports"
            )
        print(f"cluster already running (state in {layout.root}); reusing it", file=sys.stderr)
        return layout.kubeconfig
    if read_pids(layout):
        print("a previous cluster is partly running; stopping it first", file=sys.stderr)
        down()
    bins = build.build()
    taken = ports_in_use(PORTS)
    if taken:
        raise ClusterStartError(ports_message(taken))
    build.say(
        f"starting the local cluster at Kubernetes {release} (etcd, kube-apiserver, kwok, kube-controller-manager, "
        f"kube-scheduler; state and logs in {layout.root}) and applying the fleet {fleet_file}"
    )
    for note in spec["left_out"]:
        build.say(f"  {note}")
    began = time.monotonic()
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.logs.mkdir(exist_ok=True)
    subprocess.run(["rm", "-rf", str(layout.root / "etcd")], check=True)
    make_pki(layout.pki)
    write_kubeconfig(layout.kubeconfig, layout, "admin")
    for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
        write_kubeconfig(layout.component_kubeconfig(name), layout, name)
    write_kwok_config(layout)
    argv = command_lines(layout, bins)
    api = Api(layout)
    started: dict[str, subprocess.Popen] = {}
    try:
        start_process(layout, "etcd", argv["etcd"], started)
        start_process(layout, "kube-apiserver", argv["kube-apiserver"], started)
        wait_for("kube-apiserver /readyz", lambda: _is_ready(api), timeout, layout, started)
        # KWOK first, so that it sees every node and pod from its start.
        start_process(layout, "kwok", argv["kwok"], started)
        start_process(layout, "kube-controller-manager", argv["kube-controller-manager"], started)
        start_process(layout, "kube-scheduler", argv["kube-scheduler"], started)
        apply_fleet(api, spec)
        apply_fleet_pods(api, spec, layout, started)
        wait_for(
            "the fleet's nodes, device-plugin and DRA kubelet-plugin pods and fleet pods",
            lambda: fleet_settled(api, spec),
            timeout,
            layout,
            started,
        )
        custom_resources.apply(
            api.ensure,
            lambda path: _get(api, path),
            lambda what, check: wait_for(what, check, timeout, layout, started),
        )
    except BaseException:
        down()
        raise
    print(f"cluster up in {time.monotonic() - began:.1f}s; logs in {layout.logs}", file=sys.stderr)
    return layout.kubeconfig


def down() -> list[str]:
    """Stop the processes this tool started (by recorded pid and binary), and nothing else."""
    layout = Layout(state_dir())
    pids = read_pids(layout)
    stopped = []
    for name in reversed(PROCESS_ORDER):
        entry = pids.get(name)
        if entry and _alive(entry["pid"], entry["binary"]):
            os.kill(entry["pid"], signal.SIGTERM)
            stopped.append(name)
    deadline = time.monotonic() + 15
    for name in stopped:
        entry = pids[name]
        while _alive(entry["pid"], entry["binary"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(entry["pid"], entry["binary"]):
            os.kill(entry["pid"], signal.SIGKILL)
    layout.pids.unlink(missing_ok=True)
    return stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.cluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=("up", "down", "status", "build"))
    parser.add_argument("--fleet", type=Path, default=Path(os.environ.get("KUBEGPU_FLEET", HERE / "fleet.yaml")))
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build.build())
        elif args.command == "up":
            print(up(args.fleet, args.timeout))
        elif args.command == "down":
            stopped = down()
            print(f"stopped: {', '.join(stopped)}" if stopped else "no cluster processes were running")
        else:
            layout = Layout(state_dir())
            print(f"running, kubeconfig {layout.kubeconfig}" if running(layout) else "not running")
            return 0 if running(layout) else 3
    except (fleet.FleetError, ClusterStartError, versions.UnknownRelease) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
