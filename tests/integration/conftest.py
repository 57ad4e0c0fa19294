"""Fixtures for tests against the local cluster (tests/cluster): a real control plane with
KWOK nodes.  The cluster is started once per session, or reused when already running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster import cluster as local_cluster
from tests.cluster import fleet as fleet_file

REPO_ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_BIN = Path(sys.executable).parent
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
    layout = local_cluster.Layout(local_cluster.state_dir())
    was_running = local_cluster.running(layout)
    fleet_path = local_cluster.HERE / "fleet.yaml"
    try:
        kubeconfig = local_cluster.up(fleet_path, timeout=300)
    except (local_cluster.ClusterStartError, fleet_file.FleetError) as exc:
        pytest.fail(f"local cluster did not start: {exc}")
    yield LocalCluster(kubeconfig, fleet_file.load(fleet_path), local_cluster.Api(layout), layout)
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
