"""Fixtures for tests against the local cluster (tests/cluster): a real control plane with
KWOK nodes.  The cluster is started once per session, or reused when already running.

The tests run on a cluster that may have been used: `make site` labels the GPU nodes and leaves
its sample pod running, as a user wants it to. Expectations are the fleet file plus what the
cluster holds beyond it (`LocalCluster.unlisted_pods`), and the session checks at its end that the
tests left the cluster as they found it (`ClusterState`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import ack, gpu_operator, versions
from tests.cluster import cluster as local_cluster
from tests.cluster import fleet as fleet_file
from tests.cluster import prometheus as local_prometheus

REPO_ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_BIN = Path(sys.executable).parent
GPU = "nvidia.com/gpu"
ACCELERATOR = "accelerator"
OWNERSHIP = "kubegpu.io/managed-labels"
# Every module that talks to the cluster, with arguments that would otherwise work.
CLUSTER_MODULE_CALLS: dict[str, dict[str, Any]] = {
    "gpu_node_facts": {},
    "gpu_node_label": {},
    "gpu_device_plugin_validate": {},
    "gpu_pod_validate": {"live": True},
    "gpu_cluster_info": {},
    # Removal of what is not there: reads only, so a working connection changes nothing.
    "gpu_admission_policy": {"state": "absent"},
    "gpu_alert_rules": {"state": "absent", "namespace": "kubegpu-never-made"},
    "gpu_device_plugin": {"state": "absent", "namespace": "kubegpu-never-made"},
    "gpu_placement_info": {},
    "gpu_driver_info": {},
    # The plan of a roll on a node that does not exist: reads only.
    "gpu_driver_upgrade": {"target_version": "570.133.20", "names": ["never-created"]},
    # A node that does not exist: reads only.
    "gpu_node_quarantine": {"names": ["never-created"], "reason": "connection check"},
    # Release of a device no rule names: reads only.
    "gpu_device_quarantine": {
        "devices": [{"driver": "gpu.nvidia.com", "pool": "never", "device": "none"}],
        "state": "absent",
    },
    "gpu_pod": {
        "definition": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "never-created", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
    },
}

# The label keys that name a node's GPU model, in the order the modules read them by default.
MODEL_LABEL_KEYS = (
    "nvidia.com/gpu.product",
    "aliyun.accelerator/nvidia_name",
    "cloud.google.com/gke-accelerator",
    "eks.amazonaws.com/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-name",
    "k8s.amazonaws.com/accelerator",
    "accelerator",
)


@dataclass
class LocalCluster:
    kubeconfig: Path
    fleet: dict
    api: local_cluster.Api
    layout: local_cluster.Layout

    def get(self, path: str) -> dict:
        status, body = self.api.request("GET", path)
        assert status == 200, f"GET {path}: {status} {body}"
        assert isinstance(body, dict)
        return body

    def create(self, path: str, body: dict) -> tuple[int, dict | str]:
        return self.api.request("POST", path, body)

    def patch(self, path: str, body: dict) -> dict:
        status, reply = self.api.request("PATCH", path, body, content_type="application/merge-patch+json")
        assert status == 200, f"PATCH {path}: {status} {reply}"
        assert isinstance(reply, dict)
        return reply

    def delete(self, path: str) -> int:
        status = self.api.request("DELETE", path)[0]
        return status

    def plugin_pod_on(self, node: str) -> dict:
        plugin = self.fleet["device_plugin"]
        pods = self.get(f"/api/v1/namespaces/{plugin['namespace']}/pods?fieldSelector=spec.nodeName%3D{node}")
        owned = [
            p
            for p in pods["items"]
            if any(o.get("name") == plugin["name"] for o in p["metadata"].get("ownerReferences", []))
        ]
        assert len(owned) == 1, f"expected one device-plugin pod on {node}, found {len(owned)}"
        return owned[0]

    def set_plugin_pod_ready(self, node: str, ready: bool) -> None:
        """Make the device-plugin pod on one node not Ready (KWOK stage), or Ready again."""
        pod = self.plugin_pod_on(node)
        path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
        self.patch(path, {"metadata": {"annotations": {fleet_file.NOT_READY_ANNOTATION: None if ready else "true"}}})

    def unlisted_pods(self) -> list[UnlistedPod]:
        """The pods bound to a node that hold it (not finished) and that the fleet file does not
        describe: the sample pod `make site` leaves running, or any other workload of the cluster's
        users. Neither the fleet's pods nor those of its DaemonSets."""
        listed = {f"{self.fleet['pod_namespace']}/{p['name']}" for p in self.fleet["pods"]}
        # The mirror pods of the ACK nodes' static device-plugin pods are the fleet's too.
        listed |= {f"{ack.NAMESPACE}/{ack.mirror_pod_name(n)}" for n in ack.static_nodes(self.fleet)}
        # The fleet's DaemonSets: the device plugin's, the DRA driver's and the GPU Operator's operands.
        daemonsets = {
            (d["namespace"], d["name"]) for d in (self.fleet["device_plugin"], self.fleet.get("dra_driver")) if d
        } | {(d["namespace"], d["name"]) for d in gpu_operator.daemonsets(self.fleet.get("gpu_operator"))}
        found = []
        for pod in self.get("/api/v1/pods")["items"]:
            metadata, spec = pod["metadata"], pod["spec"]
            ref = f"{metadata['namespace']}/{metadata['name']}"
            owned = any(
                o.get("kind") == "DaemonSet" and (metadata["namespace"], o.get("name")) in daemonsets
                for o in metadata.get("ownerReferences", [])
            )
            finished = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
            if ref in listed or owned or finished or not spec.get("nodeName"):
                continue
            found.append(UnlistedPod(ref, spec["nodeName"], pod_gpus(spec), visible_devices(spec)))
        return found

    def node_labeling(self) -> dict[str, tuple[str | None, str | None]]:
        """Per node: the accelerator label and the ownership record gpu_node_label keeps with it."""
        return {
            n["metadata"]["name"]: (
                n["metadata"].get("labels", {}).get(ACCELERATOR),
                n["metadata"].get("annotations", {}).get(OWNERSHIP),
            )
            for n in self.get("/api/v1/nodes")["items"]
        }

    def set_node_labeling(self, wanted: dict[str, tuple[str | None, str | None]]) -> None:
        """Give these nodes this accelerator label and ownership record (None: none), where they differ."""
        current = self.node_labeling()
        for name, (label, record) in wanted.items():
            if name in current and current[name] != (label, record):
                self.patch(
                    f"/api/v1/nodes/{name}",
                    {"metadata": {"labels": {ACCELERATOR: label}, "annotations": {OWNERSHIP: record}}},
                )


def dra_resource_served(resource: str) -> bool:
    """Whether the local cluster's Kubernetes release serves this resource of resource.k8s.io/v1 by default
    (tests/cluster/versions.py): DeviceTaintRules are not served before 1.37."""
    return resource != "devicetaintrules" or versions.serves(versions.DEVICE_TAINT_RULES)


def daemonset_selects(fleet: dict, spec: dict) -> bool:
    """Whether the fleet's device-plugin DaemonSet selects this node of the fleet file."""
    return all(spec["labels"].get(k) == v for k, v in fleet["device_plugin"]["node_selector"].items())


def runs_device_plugin(fleet: dict, spec: dict) -> bool:
    """Whether a device-plugin pod serves this node: the DaemonSet's, or ACK's static pod."""
    return daemonset_selects(fleet, spec) or spec["ack_static_device_plugin"]


@dataclass(frozen=True)
class UnlistedPod:
    """A pod on a node that the fleet file does not describe."""

    ref: str  # namespace/name
    node: str
    gpus: int
    # The literal NVIDIA_VISIBLE_DEVICES values its containers set.
    visible_devices: tuple[str, ...]


def pod_gpus(spec: dict) -> int:
    """The GPUs a pod spec holds: its containers' limits together, or its largest init container's."""

    def limit(container: dict) -> int:
        return int(container.get("resources", {}).get("limits", {}).get(GPU, 0))

    return max(
        sum(limit(c) for c in spec.get("containers", [])),
        max((limit(c) for c in spec.get("initContainers", [])), default=0),
    )


def visible_devices(spec: dict) -> tuple[str, ...]:
    return tuple(
        env["value"]
        for container in spec.get("containers", []) + spec.get("initContainers", [])
        for env in container.get("env", [])
        if env.get("name") == "NVIDIA_VISIBLE_DEVICES" and "value" in env
    )


# --- the cluster as the session found it ------------------------------------------------------

# Objects whose presence is compared (being deleted counts as gone): cluster-scoped ones by name,
# namespaced ones by namespace/name in the namespaces that are there before and after.
CLUSTER_SCOPED = {
    "Namespace": "/api/v1/namespaces",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "RuntimeClass": "/apis/node.k8s.io/v1/runtimeclasses",
    "FlowSchema": "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
    "PriorityLevelConfiguration": "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
}
NAMESPACED = {
    "Role": "/apis/rbac.authorization.k8s.io/v1/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "ConfigMap": "/api/v1/configmaps",
    "Secret": "/api/v1/secrets",
    "DaemonSet": "/apis/apps/v1/daemonsets",
    "Deployment": "/apis/apps/v1/deployments",
    "ReplicaSet": "/apis/apps/v1/replicasets",
    "StatefulSet": "/apis/apps/v1/statefulsets",
    "Job": "/apis/batch/v1/jobs",
    "CronJob": "/apis/batch/v1/cronjobs",
}
# Node annotations and taints that the control plane itself manages.
CONTROLLER_ANNOTATIONS = {"node.alpha.kubernetes.io/ttl"}
CONTROLLER_TAINT_PREFIX = "node.kubernetes.io/"


@dataclass
class ClusterState:
    """What the tests must leave as they found it: every node's labels, annotations, taints and GPUs;
    every pod (by uid, with its node, labels and annotations); and which objects exist."""

    nodes: dict[str, dict]
    pods: dict[str, dict]
    objects: dict[str, set[str]]

    @classmethod
    def read(cls, cluster: LocalCluster) -> ClusterState:
        nodes = {}
        for node in cluster.get("/api/v1/nodes")["items"]:
            metadata, status = node["metadata"], node.get("status", {})
            nodes[metadata["name"]] = {
                "labels": metadata.get("labels", {}),
                "annotations": {
                    k: v for k, v in metadata.get("annotations", {}).items() if k not in CONTROLLER_ANNOTATIONS
                },
                "taints": [
                    t for t in node["spec"].get("taints", []) if not t["key"].startswith(CONTROLLER_TAINT_PREFIX)
                ],
                "unschedulable": node["spec"].get("unschedulable", False),
                "gpus": (status.get("capacity", {}).get(GPU), status.get("allocatable", {}).get(GPU)),
            }
        pods = {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": {
                "uid": p["metadata"]["uid"],
                "node": p["spec"].get("nodeName"),
                "labels": p["metadata"].get("labels", {}),
                "annotations": p["metadata"].get("annotations", {}),
            }
            for p in cluster.get("/api/v1/pods")["items"]
            if "deletionTimestamp" not in p["metadata"]
        }
        objects = {
            kind: {
                "/".join(filter(None, (i["metadata"].get("namespace"), i["metadata"]["name"])))
                for i in cluster.get(path)["items"]
                if "deletionTimestamp" not in i["metadata"]
            }
            for kind, path in (CLUSTER_SCOPED | NAMESPACED).items()
        }
        return cls(nodes, pods, objects)

    def changes(self, now: ClusterState) -> list[str]:
        """What differs in `now`, in words. Objects in namespaces that were made or deleted
        meanwhile are left out: the namespace itself is reported."""
        kept = self.objects["Namespace"] & now.objects["Namespace"]

        def compared(refs: Iterable[str]) -> set[str]:
            return {ref for ref in refs if ref.split("/", 1)[0] in kept}

        found = []
        for what, before_all, after_all, refs in (
            ("node", self.nodes, now.nodes, self.nodes.keys() | now.nodes.keys()),
            ("pod", self.pods, now.pods, compared(self.pods) | compared(now.pods)),
        ):
            for ref in sorted(refs):
                before, after = before_all.get(ref), after_all.get(ref)
                if before is None or after is None:
                    found.append(f"{what} {ref} {'was left behind' if before is None else 'is gone'}")
                else:
                    found += [f"{what} {ref}: {change}" for change in field_changes(before, after)]
        for kind in CLUSTER_SCOPED | NAMESPACED:
            before, after = self.objects[kind], now.objects[kind]
            if kind in NAMESPACED:
                before, after = compared(before), compared(after)
            found += [f"{kind} {ref} is gone" for ref in sorted(before - after)]
            found += [f"{kind} {ref} was left behind" for ref in sorted(after - before)]
        return found


def field_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The fields that differ, in words; for a mapping field (labels, annotations), its keys."""
    changes = []
    for field in sorted(before.keys() | after.keys()):
        old, new = before.get(field), after.get(field)
        if isinstance(old, dict) and isinstance(new, dict):
            changes += [
                f"{field} {key}: {old.get(key)!r} -> {new.get(key)!r}"
                for key in sorted(old.keys() | new.keys())
                if old.get(key) != new.get(key)
            ]
        elif old != new:
            changes.append(f"{field}: {old!r} -> {new!r}")
    return changes


def ansible_env(kubeconfig: Path, **extra: str) -> dict[str, str]:
    """The environment for ansible commands against a cluster, without colour or inventory warnings."""
    env = dict(
        os.environ,
        K8S_AUTH_KUBECONFIG=str(kubeconfig),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        **extra,
    )
    env.pop("KUBECONFIG", None)
    return env


def write_token_kubeconfig(path: Path, cluster: LocalCluster, token: str, ca: Path | None = None) -> Path:
    """A kubeconfig that authenticates with a bearer token (a ServiceAccount's, say)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": cluster.layout.server,
                    "certificate-authority": str(ca or cluster.layout.pki / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "token", "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "token"}}],
        "current-context": "local",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def run_ansible_module(
    kubeconfig: Path, module: str, args: dict | None = None, *flags: str, env: dict[str, str] | None = None
) -> tuple[str, dict, subprocess.CompletedProcess]:
    """Run a module of this collection through `ansible`, as a user would: (status, result, process),
    status being SUCCESS, CHANGED or FAILED!."""
    command = [str(ANSIBLE_BIN / "ansible"), "localhost", "-m", f"kubegpu.scheduling.{module}", *flags]
    if args:
        command += ["-a", json.dumps(args)]
    environment = env or ansible_env(kubeconfig)
    environment["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.oneline"
    done = subprocess.run(command, check=False, env=environment, capture_output=True, text=True, timeout=180)
    status, _arrow, payload = done.stdout.partition(" => ")
    try:
        result = json.loads(payload)
    except ValueError:
        pytest.fail(f"ansible printed no result (rc {done.returncode}): {done.stdout}\n{done.stderr}")
    return status.rsplit("|", 1)[-1].strip(), result, done


def fleet_facts(result: dict) -> dict:
    """The facts in gpu_node_facts' result: it returns them once, as `ansible_facts.gpu_fleet`, and nothing else
    but `changed` (always false) and `api_requests` (the facts' own count, as every module returns it)."""
    assert result["changed"] is False
    known = {"changed", "api_requests", "ansible_facts", "invocation", "warnings", "deprecations"}
    assert set(result) - known == set(), sorted(result)
    facts = dict(result["ansible_facts"]["gpu_fleet"])
    assert result["api_requests"] == facts["api_requests"]
    return facts


def wait_until(predicate: Callable[[], object], timeout: float = 60, interval: float = 0.5, what: str = "") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def cluster() -> LocalCluster:
    """The local cluster, started or reused; at the end of the session, an error names whatever
    the tests left changed on it."""
    layout = local_cluster.Layout(local_cluster.state_dir())
    was_running = local_cluster.running(layout)
    fleet_path = local_cluster.HERE / "fleet.yaml"
    try:
        kubeconfig = local_cluster.up(fleet_path, timeout=300)
    except (local_cluster.ClusterStartError, fleet_file.FleetError) as exc:
        pytest.fail(f"local cluster did not start: {exc}")
    shared = LocalCluster(kubeconfig, fleet_file.load(fleet_path), local_cluster.Api(layout), layout)
    try:
        found = ClusterState.read(shared)
        yield shared
        changes = found.changes(ClusterState.read(shared))
        if changes:
            pytest.fail("the tests left the cluster changed:\n  " + "\n  ".join(changes), pytrace=False)
    finally:
        if not was_running:
            local_cluster.down()


@pytest.fixture
def namespace(cluster: LocalCluster) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    status, body = cluster.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert status == 201, body
    wait_until(
        lambda: cluster.api.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] == 200,
        what=f"default service account in {name}",
    )
    yield name
    # The namespace first, so that no controller can create pods in it again; then its pods
    # (KWOK removes them at once), so that the next test finds the GPUs free.
    cluster.delete(f"/api/v1/namespaces/{name}")
    cluster.api.request("DELETE", f"/api/v1/namespaces/{name}/pods")
    wait_until(
        lambda: not cluster.get(f"/api/v1/namespaces/{name}/pods")["items"], timeout=60, what=f"pods of {name} to go"
    )


@pytest.fixture
def node_labeling_kept(cluster: LocalCluster):
    """Each node's accelerator label and ownership record, put back after the test: after one that runs the site
    playbook (which labels the GPU nodes) on a cluster `make site` has not labeled yet, or one that unlabels them."""
    found = cluster.node_labeling()
    yield cluster
    cluster.set_node_labeling(found)


@pytest.fixture
def unlabeled_nodes(node_labeling_kept: LocalCluster):
    """Every node without the accelerator label and its ownership record, as before the first
    labeling run; afterwards each node gets back the label and record it had (`make site` labels
    the GPU nodes)."""
    cluster = node_labeling_kept
    cluster.set_node_labeling({name: (None, None) for name in cluster.node_labeling()})
    return cluster


# --- Prometheus scraping simulated DCGM exporters (tests/cluster/prometheus.py) ------------------


# The window of the recording rules the session's Prometheus evaluates (those gpu_alert_rules renders for the
# facts' read with prometheus.recorded), and the window the live tests read the metrics in.
DCGM_WINDOW = "8s"


@pytest.fixture(scope="session")
def dcgm_prometheus_server(tmp_path_factory: pytest.TempPathFactory):
    """The simulated DCGM exporters and a real Prometheus scraping them, with the recording rules of
    the facts' read for DCGM_WINDOW, started on first use and stopped at the end of the session; tests
    take `dcgm_prometheus`, which leaves it clean."""
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_promql import recording_group

    rules = tmp_path_factory.mktemp("dcgm-rules") / "recording.yml"
    rules.write_text(json.dumps({"groups": [recording_group(DCGM_WINDOW)]}))
    harness = local_prometheus.DcgmPrometheus.start(rule_files=[rules])
    yield harness
    harness.stop()


@pytest.fixture
def dcgm_prometheus(dcgm_prometheus_server: local_prometheus.DcgmPrometheus):
    """The session's exporters and Prometheus (`.exporter`, `.prometheus`), with no nodes, no targets
    and no samples at the start of the test; whatever the test set is gone after it."""
    dcgm_prometheus_server.reset_if_used()
    yield dcgm_prometheus_server
    dcgm_prometheus_server.reset_if_used()


@pytest.fixture(scope="session")
def dcgm_prometheus_tls_server():
    """Its own exporters and Prometheus, serving HTTPS only, with basic auth and a client certificate
    required (--web.config.file)."""
    harness = local_prometheus.DcgmPrometheus.start(tls=True)
    yield harness
    harness.stop()


@pytest.fixture
def dcgm_prometheus_tls(dcgm_prometheus_tls_server: local_prometheus.DcgmPrometheus):
    """The TLS variant: `.url`, `.ca`, `.client_cert`, `.client_key`, `.username`, `.password`, and
    `.exporter` and `.prometheus` as in dcgm_prometheus; clean at the start of each test."""
    dcgm_prometheus_tls_server.reset_if_used()
    yield dcgm_prometheus_tls_server
    dcgm_prometheus_tls_server.reset_if_used()
