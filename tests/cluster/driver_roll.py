"""What a GPU driver upgrade does to a KWOK node, played for the driver_upgrade live tests.

Host mode, as the host tasks of tests/integration/fixtures/driver_upgrade_host_tasks.yml run it
(`python -m tests.cluster.driver_roll install NODE TARGET NAMESPACE`): the driver unloads (the node's
nvidia.com/gpu capacity and allocatable go to 0 in its status), GFD labels the new version, two pods
admitted while the device plugin was away fail with `UnexpectedAdmissionError` (one owned by a
controller, one bare), and 2 s later, in the background, the device plugin publishes the GPUs again,
unless the node carries the label kubegpu.test/gpus-stay-away=true.

GPU Operator mode (`UpgradeController`, a thread of the test): the upgrade controller of
NVIDIA/k8s-operator-libs pkg/upgrade, reduced to its node labels: once the version is changed (a file
exists), every node of the test without the skip label and below the target walks the states of
`nvidia.com/gpu-driver-upgrade-state` one per tick (upgrade-required, cordon-required: cordon, or
record the node's own cordon in the initial-state annotation; pod-restart-required, validation-required,
uncordon-required: uncordon unless that annotation says the cordon was the node's own; upgrade-done
with GFD's version label at the target). A node labelled kubegpu.test/upgrade=fail goes to
upgrade-failed after cordon-required; kubegpu.test/upgrade=stuck stays at validation-required.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.cluster.cluster import Api, Layout, state_dir

GPU = "nvidia.com/gpu"
STATE = "nvidia.com/gpu-driver-upgrade-state"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"
INITIAL = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
VERSION = "nvidia.com/cuda.driver-version.full"
STAY_AWAY = "kubegpu.test/gpus-stay-away"
BEHAVIOUR = "kubegpu.test/upgrade"
OWNER = "roll-owner"
MERGE = "application/merge-patch+json"
WALK = ("upgrade-required", "cordon-required", "pod-restart-required", "validation-required", "uncordon-required")


def api() -> Api:
    return Api(Layout(state_dir()))


def patch(client: Api, path: str, body: dict[str, Any]) -> None:
    status, reply = client.request("PATCH", path, body, content_type=MERGE)
    if status != 200:
        raise RuntimeError(f"PATCH {path}: {status} {reply}")


def set_gpus(client: Api, node: str, count: str) -> None:
    patch(client, f"/api/v1/nodes/{node}/status", {"status": {"capacity": {GPU: count}, "allocatable": {GPU: count}}})


def admission_failed_pod(node: str, namespace: str, name: str, owner_uid: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"kubegpu.test/roll": "admission"}}
    if owner_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": OWNER, "uid": owner_uid, "controller": True}
        ]
    container = {"name": "work", "image": "busybox", "resources": {"limits": {GPU: "1"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [container]},
    }


def fail_admission(client: Api, node: str, namespace: str) -> None:
    """Two pods on the node, Failed with UnexpectedAdmissionError as the kubelet leaves them."""
    owner = client.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{OWNER}")[1]
    assert isinstance(owner, dict)
    for name, uid in ((f"owned-{node}", owner["metadata"]["uid"]), (f"bare-{node}", None)):
        status, reply = client.request(
            "POST", f"/api/v1/namespaces/{namespace}/pods", admission_failed_pod(node, namespace, name, uid)
        )
        if status != 201:
            raise RuntimeError(f"creating pod {name}: {status} {reply}")
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # KWOK marks it Running first; then the failure stays
            pod = client.request("GET", path)[1]
            if isinstance(pod, dict) and pod.get("status", {}).get("phase") == "Running":
                break
            time.sleep(0.2)
        failed = {
            "phase": "Failed",
            "reason": "UnexpectedAdmissionError",
            "message": "Allocate failed due to no healthy devices present",
        }
        patch(client, f"{path}/status", {"status": failed})


def install(node: str, target: str, namespace: str) -> None:
    client = api()
    item = client.request("GET", f"/api/v1/nodes/{node}")[1]
    assert isinstance(item, dict)
    gpus = item["status"]["capacity"].get(GPU, "0")
    set_gpus(client, node, "0")
    patch(client, f"/api/v1/nodes/{node}", {"metadata": {"labels": {VERSION: target}}})
    fail_admission(client, node, namespace)
    if item["metadata"]["labels"].get(STAY_AWAY) != "true":
        subprocess.Popen(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", "tests.cluster.driver_roll", "restore", node, gpus],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def quick(node: str, target: str) -> None:
    """The benchmark's install: GPUs withdrawn, the version labelled, the GPUs back half a second later."""
    client = api()
    item = client.request("GET", f"/api/v1/nodes/{node}")[1]
    assert isinstance(item, dict)
    set_gpus(client, node, "0")
    patch(client, f"/api/v1/nodes/{node}", {"metadata": {"labels": {VERSION: target}}})
    subprocess.Popen(  # noqa: S603 - this interpreter, this module
        [
            sys.executable,
            "-m",
            "tests.cluster.driver_roll",
            "restore",
            node,
            item["status"]["capacity"].get(GPU, "0"),
            "0.5",
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def restore(node: str, gpus: str, delay: float = 2.0) -> None:
    time.sleep(delay)
    set_gpus(api(), node, gpus)


class UpgradeController(threading.Thread):
    """The operator's upgrade controller over the nodes a label selector picks, once `started` exists."""

    def __init__(self, client: Api, selector: str, target: str, started: Path, tick: float = 0.3):
        super().__init__(daemon=True)
        self.client, self.selector, self.target, self.started, self.tick = client, selector, target, started, tick
        self.halt = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.halt.wait(self.tick):
            if not self.started.exists():
                continue
            try:
                listed = self.client.request("GET", f"/api/v1/nodes?labelSelector={self.selector}")[1]
                for node in listed["items"] if isinstance(listed, dict) else []:
                    self.step(node)
            except Exception as exc:  # noqa: BLE001 - kept for the test to show
                self.errors.append(str(exc))

    def step(self, node: dict[str, Any]) -> None:
        labels = node["metadata"].get("labels", {})
        annotations = node["metadata"].get("annotations", {})
        state = labels.get(STATE, "")
        if (
            labels.get(SKIP) == "true"
            or labels.get(VERSION) == self.target
            or state in ("upgrade-done", "upgrade-failed")
        ):
            return
        behaviour = labels.get(BEHAVIOUR, "")
        path = f"/api/v1/nodes/{node['metadata']['name']}"
        if state == "validation-required" and behaviour == "stuck":
            return
        if state == "cordon-required" and behaviour == "fail":
            patch(self.client, path, {"metadata": {"labels": {STATE: "upgrade-failed"}}})
            return
        following = "upgrade-done" if state == WALK[-1] else WALK[WALK.index(state) + 1] if state else WALK[0]
        body: dict[str, Any] = {"metadata": {"labels": {STATE: following}}}
        if state == "upgrade-required":
            if node["spec"].get("unschedulable"):
                body["metadata"]["annotations"] = {INITIAL: "true"}
            else:
                body["spec"] = {"unschedulable": True}
        if state == "uncordon-required":
            body["metadata"]["labels"] = {STATE: "upgrade-done", VERSION: self.target}
            if annotations.get(INITIAL) == "true":
                body["metadata"]["annotations"] = {INITIAL: None}
            else:
                body["spec"] = {"unschedulable": None}
        patch(self.client, path, body)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=5)


if __name__ == "__main__":
    if sys.argv[1] == "install":
        install(*sys.argv[2:5])
    elif sys.argv[1] == "quick":
        quick(*sys.argv[2:4])
    elif sys.argv[1] == "restore":
        restore(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 2.0)
    else:
        raise SystemExit(f"unknown action {sys.argv[1]}")
