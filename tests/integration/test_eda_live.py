"""The gpu_health event source and the collection's rulebook on the local control plane.

Four KWOK GPU nodes of a model of their own (the breaker's pool is theirs alone: 32 GPUs, at most 16
out at the 0.5 share), tainted so that no other pod lands on them. The real ansible-rulebook runs
kubegpu.scheduling.gpu_health from the collection on ANSIBLE_COLLECTIONS_PATH with acting on: a
health condition of the table (XidCriticalError) patched onto a node leads to that node quarantined by
the quarantine playbook (cordon, taint, the record naming the rulebook); with half of the pool out the
next failed node's event says the breaker holds, and the playbook holds it back; the condition cleared
for the hold time leads to the release after its proof pod. In process, the source gives no event for
heartbeats, and a watch resumed from a too-old resource version (410 Gone) leads to a relist that gives
each change made meanwhile once, the deleted node included; where DeviceTaintRules are served, a rule on a
DRA GPU of the fleet gives that device's transition and its removal the one back. Loaded with -S from the checkout, an API
server that cannot be reached is reported and tried again, the source still running. Every node made
here is deleted again, and the proof namespace when the release made it.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import datetime
import json
import os
import runpy
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import ANSIBLE_BIN, REPO_ROOT, LocalCluster, ansible_env, dra_resource_served, wait_until

from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    PROOF_NAMESPACE,
    SAMPLE_TOLERATIONS,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT_KEY,
    RECORD_ANNOTATION,
    read_record,
)
from tests.cluster import fleet as fleet_file

pytestmark = [pytest.mark.cluster]

MODEL = "NVIDIA-EDATEST-80GB"
TEST_TAINT = {"key": "kubegpu.test/eda", "value": "true", "effect": "NoSchedule"}
PROOF = {"tolerations": [*SAMPLE_TOLERATIONS, {"key": TEST_TAINT["key"], "operator": "Exists"}]}
SOURCE = REPO_ROOT / "extensions" / "eda" / "plugins" / "event_source" / "gpu_health.py"
CONDITION = "XidCriticalError"
BY = "kubegpu.scheduling.gpu_health"
# The playbooks run on the controller, with the Python that runs them (no interpreter discovery).
INVENTORY = {
    "all": {
        "hosts": {
            "localhost": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            }
        }
    }
}


def gpu_node(name: str) -> dict:
    spec = {"name": name, "cpu": "16", "memory": "64Gi", "labels": {"nvidia.com/gpu.product": MODEL}}
    return fleet_file.node_object({**spec, "taints": [TEST_TAINT], "gpus": 8, "allocatable_gpus": 8})


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def patch_status(cluster: LocalCluster, name: str, conditions: list[dict]) -> None:
    """Merge conditions into the node's status by type, as a health producer or the kubelet writes them."""
    status, reply = cluster.api.request(
        "PATCH",
        f"/api/v1/nodes/{name}/status",
        {"status": {"conditions": conditions}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 200, reply


def set_xid(cluster: LocalCluster, name: str, bad: bool) -> None:
    condition = {
        "type": CONDITION,
        "status": "True" if bad else "False",
        "reason": '{"79": 1}' if bad else "NoXidError",
        "message": "GPU has fallen off the bus" if bad else "no critical XID",
        "lastHeartbeatTime": now(),
        "lastTransitionTime": now(),
    }
    patch_status(cluster, name, [condition])


def heartbeat(cluster: LocalCluster, names: list[str]) -> None:
    """What a kubelet's status report changes when nothing else does: the heartbeat times."""
    for name in names:
        patch_status(cluster, name, [{"type": "Ready", "lastHeartbeatTime": now()}])


def node_of(cluster: LocalCluster, name: str) -> dict:
    return cluster.get(f"/api/v1/nodes/{name}")


def quarantined_by_us(cluster: LocalCluster, name: str) -> bool:
    node = node_of(cluster, name)
    record = read_record(node["metadata"].get("annotations", {}).get(RECORD_ANNOTATION))
    tainted = any(t["key"] == QUARANTINE_TAINT_KEY for t in node["spec"].get("taints", []))
    return bool(node["spec"].get("unschedulable")) and tainted and record is not None and record.by == BY


def released(cluster: LocalCluster, name: str) -> bool:
    node = node_of(cluster, name)
    tainted = any(t["key"] == QUARANTINE_TAINT_KEY for t in node["spec"].get("taints", []))
    annotations = node["metadata"].get("annotations", {})
    return not node["spec"].get("unschedulable") and not tainted and RECORD_ANNOTATION not in annotations


def settled(cluster: LocalCluster, name: str) -> bool:
    """Ready, and rid of the node lifecycle controller's not-ready taint (a health signal of the table)."""
    node = node_of(cluster, name)
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))
    return ready and not any(t["key"].startswith("node.kubernetes.io/") for t in node["spec"].get("taints", []))


@pytest.fixture(scope="module")
def pool(cluster: LocalCluster):
    """Four GPU nodes of their own model, Ready; deleted at the end, with the proof namespace if made here."""
    run = uuid.uuid4().hex[:6]
    names = [f"eda-{run}-{letter}" for letter in "abcd"]
    proof_namespace_there = cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 200
    try:
        for name in names:
            status, body = cluster.create("/api/v1/nodes", gpu_node(name))
            assert status == 201, body
        for name in names:
            wait_until(lambda n=name: settled(cluster, n), 60, 0.2, what=f"{name} Ready")
        yield names
    finally:
        for name in names:
            cluster.delete(f"/api/v1/nodes/{name}")
        if not proof_namespace_there:
            cluster.delete(f"/api/v1/namespaces/{PROOF_NAMESPACE}")
            wait_until(
                lambda: cluster.api.request("GET", f"/api/v1/namespaces/{PROOF_NAMESPACE}")[0] == 404,
                60,
                what="the proof namespace to go",
            )
        wait_until(
            lambda: all(cluster.api.request("GET", f"/api/v1/nodes/{n}")[0] == 404 for n in names), 60, what="nodes"
        )


# --- the real ansible-rulebook -------------------------------------------------------------------


class Rulebook:
    """ansible-rulebook as a user runs it, its output (events printed) in a file."""

    def __init__(self, workdir: Path, rulebook: str, env: dict[str, str], variables: dict, *flags: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "inventory.yml").write_text(json.dumps(INVENTORY))
        (workdir / "vars.yml").write_text(json.dumps(variables))
        self.output = workdir / "output.txt"
        command = [str(ANSIBLE_BIN / "ansible-rulebook"), "-r", rulebook, "-i", "inventory.yml", "--print-events"]
        command += ["--vars", "vars.yml", *flags]
        with self.output.open("w") as out:
            self.process = subprocess.Popen(command, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def events(self) -> list[dict]:
        """The events ansible-rulebook received, as it printed them (Python literals after "Event:")."""
        found, lines, collecting = [], [], False
        for line in self.text().splitlines():
            if line == "Event:":
                collecting, lines = True, []
            elif collecting and line.startswith("*"):
                found.append(ast.literal_eval("\n".join(lines)))
                collecting = False
            elif collecting:
                lines.append(line)
        return found

    def wait_event(self, what: str, timeout: float, **fields: Any) -> dict:
        def matching() -> dict | None:
            assert self.process.poll() is None, f"ansible-rulebook ended:\n{self.text()[-3000:]}"
            hits = [e for e in self.events() if all(e.get(k) == v for k, v in fields.items())]
            return hits[0] if hits else None

        return wait_until(matching, timeout, 0.2, what=what)  # type: ignore[return-value]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def collections_path(tmp: Path) -> Path:
    """A collections path that holds this checkout as kubegpu.scheduling, as an install would."""
    root = tmp / "collections"
    (root / "ansible_collections" / "kubegpu").mkdir(parents=True)
    (root / "ansible_collections" / "kubegpu" / "scheduling").symlink_to(REPO_ROOT)
    return root


def rulebook_env(cluster: LocalCluster, collections: Path) -> dict[str, str]:
    return ansible_env(
        cluster.kubeconfig,
        ANSIBLE_COLLECTIONS_PATH=str(collections),
        PATH=f"{ANSIBLE_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )


def test_a_failed_node_is_quarantined_the_breaker_holds_and_the_recovered_node_is_released_after_its_proof(
    cluster: LocalCluster, pool: list[str], tmp_path: Path
):
    a, b, c, _d = pool
    variables = {
        "kubegpu_eda_act": True,
        "kubegpu_eda_initial": False,
        "kubegpu_eda_release_hold": 3,
        "kubegpu_eda_release_proof": PROOF,
    }
    env = rulebook_env(cluster, collections_path(tmp_path))
    rulebook = Rulebook(tmp_path / "run", "kubegpu.scheduling.gpu_health", env, variables)
    try:
        rulebook.wait_event("the source watching", 30, type="source_status", status="watching")
        started = time.monotonic()
        set_xid(cluster, a, bad=True)
        event = rulebook.wait_event(f"{a} failed", 10, type="transition", node=a, to="failed")
        assert (event["from"], event["pool"], event["breaker_holds"], event["act"]) == (
            "healthy",
            f"model={MODEL}",
            False,
            True,
        )
        assert event["problems"][0]["kind"] == "gpu_health_condition"
        wait_until(lambda: quarantined_by_us(cluster, a), 30, 0.2, what=f"{a} quarantined")
        assert time.monotonic() - started < 30

        set_xid(cluster, b, bad=True)
        wait_until(lambda: quarantined_by_us(cluster, b), 30, 0.2, what=f"{b} quarantined")
        before = node_of(cluster, c)["spec"]
        set_xid(cluster, c, bad=True)
        event = rulebook.wait_event(f"{c} failed", 10, type="transition", node=c, to="failed")
        assert event["breaker_holds"] is True and "24 of its 32 GPUs" in event["breaker"], event
        assert (event["pool_gpus"], event["pool_gpus_out"]) == (32, 24)
        # The playbook runs and its own breaker holds the node back: the safety net.
        wait_until(lambda: f"held back by the breaker: {c}" in rulebook.text(), 30, 0.2, what="the breaker")
        assert node_of(cluster, c)["spec"] == before

        set_xid(cluster, a, bad=False)
        rulebook.wait_event(f"{a} healthy", 10, type="transition", node=a, to="healthy")
        held = rulebook.wait_event(f"{a} healthy for the hold", 15, type="healthy_for", node=a)
        assert held["healthy_for"] >= 3 and held["quarantined"] is True
        wait_until(lambda: released(cluster, a), 40, 0.3, what=f"{a} released after its proof")
        # The release's report: released after the proof pod (gone again) succeeded on the node.
        wait_until(lambda: f"released: {a}" in rulebook.text(), 10, 0.2, what="the release's report")
    finally:
        rulebook.stop()
    ours = [e for e in rulebook.events() if e.get("node") in pool]
    assert [(e["type"], e["node"], e["from"], e["to"]) for e in ours] == [
        ("transition", a, "healthy", "failed"),
        ("transition", b, "healthy", "failed"),
        ("transition", c, "healthy", "failed"),
        ("transition", a, "failed", "healthy"),
        ("healthy_for", a, "healthy", "healthy"),
    ]


# --- the source in process -----------------------------------------------------------------------


class InProcess:
    """The source's GpuHealthSource run on an event loop of its own thread; its events in a list."""

    def __init__(self, args: dict[str, Any]) -> None:
        module = runpy.run_path(str(SOURCE))
        self.events: list[dict] = []
        self.source = module["GpuHealthSource"](self, module["source_args"](args))

    async def put(self, event: dict) -> None:
        self.events.append(event)

    def start(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.task = self.loop.create_task(self.source.run())
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(10)
        self.loop.close()

    def about(self, names: list[str]) -> list[tuple]:
        return [(e["type"], e["node"], e["from"], e["to"], e["seen"]) for e in self.events if e.get("node") in names]


RULES = "/apis/resource.k8s.io/v1/devicetaintrules"


def device_taint_rule_round_trip(cluster: LocalCluster, source: InProcess) -> None:
    """Where DeviceTaintRules are served and the fleet has a DRA GPU: a rule that taints one device gives its
    device_transition to failed, and its removal the one back to healthy."""
    if not dra_resource_served("devicetaintrules"):
        return
    slices = cluster.get("/apis/resource.k8s.io/v1/resourceslices")["items"]
    found = [(s["spec"]["pool"]["name"], s["spec"]["devices"][0]["name"]) for s in slices if s["spec"].get("devices")]
    if not found:
        return
    pool_name, device = found[0]
    name = f"eda-{uuid.uuid4().hex[:6]}"
    selector = {"driver": slices[0]["spec"]["driver"], "pool": pool_name, "device": device}
    taint = {"key": "kubegpu.test/xid", "value": "79", "effect": "NoSchedule"}
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name}}
    status, reply = cluster.create(RULES, {**body, "spec": {"deviceSelector": selector, "taint": taint}})
    assert status == 201, reply

    def moved(to: str) -> bool:
        return any(
            e["type"] == "device_transition" and e["device"]["name"] == device and e["to"] == to for e in source.events
        )

    try:
        wait_until(lambda: moved("failed"), 10, 0.1, what=f"{device} failed")
    finally:
        cluster.delete(f"{RULES}/{name}")
    wait_until(lambda: moved("healthy"), 10, 0.1, what=f"{device} healthy again")


def test_heartbeats_give_no_event_and_an_expired_watch_repeats_nothing_and_loses_nothing(
    cluster: LocalCluster, pool: list[str]
):
    _a, _b, _c, d = pool
    extra = f"{pool[0][:-2]}-e"
    status, body = cluster.create("/api/v1/nodes", gpu_node(extra))
    assert status == 201, body
    watched = [*pool, extra]
    source = InProcess({"kubeconfig": str(cluster.kubeconfig), "initial": False, "watch_timeout": 20})
    try:
        wait_until(lambda: settled(cluster, extra), 60, 0.2, what=f"{extra} Ready")
        source.start()
        wait_until(lambda: any(e.get("status") == "watching" for e in source.events), 20, 0.1, what="watching")
        for _round in range(3):
            heartbeat(cluster, watched)
            time.sleep(0.3)
        set_xid(cluster, d, bad=True)
        wait_until(lambda: source.about([d]), 10, 0.1, what=f"{d} failed")
        # The heartbeats came before it on the same watch, and gave nothing.
        assert source.about(watched) == [("transition", d, "healthy", "failed", "watch")]
        device_taint_rule_round_trip(cluster, source)
        source.stop()

        # Meanwhile, with no watch: d recovers, the extra node goes, and a heartbeat.
        set_xid(cluster, d, bad=False)
        cluster.delete(f"/api/v1/nodes/{extra}")
        heartbeat(cluster, pool)
        source.events.clear()
        source.source.nodes.version = "1"  # far older than the API server's watch cache: 410 Gone
        source.start()
        wait_until(lambda: len(source.about(watched)) >= 2, 20, 0.1, what="the relist's transitions")
        time.sleep(1.0)
        assert source.about(watched) == [
            ("transition", d, "failed", "healthy", "relist"),
            ("transition", extra, "healthy", "deleted", "relist"),
        ]
        assert source.source.nodes.version not in (None, "1")
    finally:
        if source.thread.is_alive():
            source.stop()
        cluster.delete(f"/api/v1/nodes/{extra}")


def test_loaded_from_a_folder_an_unreachable_api_server_is_reported_and_tried_again(tmp_path: Path):
    rulebook = [
        {
            "name": "unreachable",
            "hosts": "localhost",
            "sources": [
                {
                    "gpu_health": {
                        "host": "https://127.0.0.1:9",
                        "api_key": "not-a-token",
                        "validate_certs": False,
                        "retry_max": 1,
                    }
                }
            ],
            "rules": [
                {
                    "name": "say it",
                    "condition": 'event.type == "source_status"',
                    "action": {"debug": {"msg": "SOURCE {{ event.status }}: {{ event.message }}"}},
                }
            ],
        }
    ]
    (tmp_path / "rulebook.yml").write_text(json.dumps(rulebook))
    env = dict(os.environ, PATH=f"{ANSIBLE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    folder = str(SOURCE.parent)
    run = Rulebook(tmp_path, str(tmp_path / "rulebook.yml"), env, {}, "-S", folder)
    try:
        event = run.wait_event("unreachable", 30, type="source_status", status="api_unreachable")
        assert "127.0.0.1:9" in event["message"] and event["retry_in"] <= 1
        # The rule's debug action prints after the event itself.
        wait_until(lambda: "SOURCE api_unreachable" in run.text(), 10, 0.2, what="the rule's message")
        time.sleep(2)  # tried again meanwhile, still running
        assert run.process.poll() is None
    finally:
        run.stop()
    assert "Traceback" not in run.text()
