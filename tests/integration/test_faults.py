"""Faults a production run meets, against the local cluster: the API server stopped in the middle of
labeling, throttling by API Priority and Fairness, another writer changing the same nodes, and an
unreachable or misconfigured cluster.

The labeling tests work on extra Node objects made for the test (plain API objects with GPU model
labels, not managed by KWOK, selected by a label of their own) and delete them after, so the fleet
nodes other tests rely on are never labeled here. The API server that is stopped is a second
kube-apiserver of the local cluster (same etcd, another loopback port) that the test starts and
stops itself: the shared one keeps serving the other tests and sessions, whatever happens.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import CLUSTER_MODULE_CALLS, LocalCluster, ansible_env, local_cluster, wait_until, write_token_kubeconfig

from tests.cluster.cluster import make_ca

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

BIN = Path(sys.executable).parent
KEY = "accelerator"
OWNERSHIP = "kubegpu.io/managed-labels"
EXTRA = "kubegpu.io/fault-test"
FOREIGN_LABEL = "example.com/team"
FOREIGN_ANNOTATION = "example.com/owner"
FOREIGN_VALUE = "custom-model"
# Source label -> model: the extra nodes cycle through these (the value gpu_node_label must set).
MODELS = (
    ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
    ("aliyun.accelerator/nvidia_name", "Tesla-V100-SXM2-16GB"),
    ("cloud.google.com/gke-accelerator", "nvidia-l4"),
    ("nvidia.com/gpu.product", "Tesla-T4"),
)
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|MODULE FAILURE|module_stderr")
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
FLOWCONTROL_API = "/apis/flowcontrol.apiserver.k8s.io/v1"


# --- extra nodes ---------------------------------------------------------------------------------


@dataclass
class ExtraNodes:
    """Node objects made for one test: names, the value each must get, and what is not ours on them."""

    run: str
    expected: dict[str, str] = field(default_factory=dict)
    foreign_owned: set[str] = field(default_factory=set)
    created: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def selector(self) -> str:
        return f"{EXTRA}={self.run}"


def extra_node(name: str, run: str, index: int, foreign_accelerator: bool) -> dict[str, Any]:
    source, model = MODELS[index % len(MODELS)]
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        EXTRA: run,
        source: model,
        FOREIGN_LABEL: f"team-{index % 3}",
    }
    if foreign_accelerator:
        labels[KEY] = FOREIGN_VALUE
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {FOREIGN_ANNOTATION: f"owner-{index}"}},
        "spec": {"unschedulable": True},
    }


def parallel(function: Callable[[Any], Any], items: list[Any], workers: int = 8) -> list[Any]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, items))


def create_extra_nodes(cluster: LocalCluster, count: int, foreign: int = 0) -> ExtraNodes:
    nodes = ExtraNodes(uuid.uuid4().hex[:8])
    bodies = []
    for index in range(count):
        name = f"extra-{nodes.run}-{index:04d}"
        body = extra_node(name, nodes.run, index, foreign_accelerator=index < foreign)
        bodies.append(body)
        if index < foreign:
            nodes.foreign_owned.add(name)
        else:
            nodes.expected[name] = MODELS[index % len(MODELS)][1]

    def create(body: dict[str, Any]) -> None:
        status, reply = cluster.create("/api/v1/nodes", body)
        assert status == 201, f"creating node {body['metadata']['name']}: {status} {reply}"
        nodes.created[body["metadata"]["name"]] = body

    parallel(create, bodies)
    return nodes


def delete_extra_nodes(cluster: LocalCluster, nodes: ExtraNodes) -> None:
    parallel(lambda name: cluster.delete(f"/api/v1/nodes/{name}"), sorted(nodes.created))
    # Extra nodes of an earlier run that could not clean up (long gone, not of a run going on now).
    listed = cluster.get(f"/api/v1/nodes?labelSelector={EXTRA}")["items"]
    stale = time.time() - 3600
    old = [
        n["metadata"]["name"]
        for n in listed
        if datetime.fromisoformat(n["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp() < stale
    ]
    parallel(lambda name: cluster.delete(f"/api/v1/nodes/{name}"), old)


def listed_extra(cluster: LocalCluster, nodes: ExtraNodes) -> dict[str, dict[str, Any]]:
    items = cluster.get(f"/api/v1/nodes?labelSelector={nodes.selector}")["items"]
    return {n["metadata"]["name"]: n["metadata"] for n in items}


def assert_consistent(cluster: LocalCluster, nodes: ExtraNodes, *, complete: bool) -> set[str]:
    """Every node has the right value and its ownership record together, or neither; nodes whose
    value someone else set keep it; every label and annotation not ours is as created. Returns
    the labeled nodes."""
    current = listed_extra(cluster, nodes)
    assert set(current) == set(nodes.created)
    labeled = set()
    for name, metadata in current.items():
        labels, annotations = metadata.get("labels", {}), metadata.get("annotations", {})
        created = nodes.created[name]["metadata"]
        if name in nodes.foreign_owned:
            assert labels.get(KEY) == FOREIGN_VALUE, f"{name}: a value the collection does not own was changed"
            assert OWNERSHIP not in annotations, f"{name}: ownership claimed for a value set by someone else"
        else:
            has_label, has_record = KEY in labels, OWNERSHIP in annotations
            assert has_label == has_record, f"{name}: half-labeled: label {labels.get(KEY)!r}, record {has_record}"
            if has_label:
                assert labels[KEY] == nodes.expected[name], f"{name}: wrong value {labels[KEY]!r}"
                assert json.loads(annotations[OWNERSHIP]) == {KEY: nodes.expected[name]}, name
                labeled.add(name)
            elif complete:
                pytest.fail(f"{name} was not labeled")
        for key, value in created["labels"].items():
            if key != KEY:
                assert labels.get(key) == value, f"{name}: label {key} changed"
        for key, value in created["annotations"].items():
            assert annotations.get(key) == value, f"{name}: annotation {key} changed"
    return labeled


# --- running modules -----------------------------------------------------------------------------


@dataclass
class ModuleRun:
    rc: int
    status: str  # what ansible printed before the result: SUCCESS, CHANGED, FAILED!
    result: dict[str, Any]
    output: str

    @property
    def failed(self) -> bool:
        return self.status == "FAILED!" or bool(self.result.get("failed"))


def module_command(module: str, args: dict[str, Any]) -> list[str]:
    command = [str(BIN / "ansible"), "localhost", "-m", f"kubegpu.scheduling.{module}"]
    return command + (["-a", json.dumps(args)] if args else [])


def parse_run(rc: int, stdout: str, stderr: str) -> ModuleRun:
    marker = re.search(r"^localhost \| ([A-Z!]+) => ", stdout, re.MULTILINE)
    if not marker:
        pytest.fail(f"ansible printed no result (rc {rc}): {stdout[-4000:]}\n{stderr[-2000:]}")
    result = json.JSONDecoder().raw_decode(stdout[marker.end() :])[0]
    return ModuleRun(rc, marker.group(1), result, stdout + stderr)


def run_module(
    module: str, args: dict[str, Any], kubeconfig: Path | str, timeout: float = 300, **env: str
) -> ModuleRun:
    done = subprocess.run(
        module_command(module, args),
        env=ansible_env(kubeconfig, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return parse_run(done.returncode, done.stdout, done.stderr)


def brief(run: ModuleRun) -> str:
    """The run's result without its long node lists, and what it printed around it."""
    shown = {k: (v if not isinstance(v, list) or len(v) < 12 else f"[{len(v)} entries]") for k, v in run.result.items()}
    return f"rc {run.rc} {run.status}: {json.dumps(shown, indent=1)}\n{TRACEBACK.findall(run.output)}"


def assert_one_clear_message(run: ModuleRun, *fragments: str) -> str:
    assert run.failed, brief(run)
    assert not TRACEBACK.search(run.output), run.output[-6000:]
    assert "exception" not in run.result, run.result.get("exception")
    message = run.result.get("msg")
    assert isinstance(message, str) and message, run.result
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


# --- identities ----------------------------------------------------------------------------------


def admin_kubeconfig_with(cluster: LocalCluster, path: Path, **cluster_fields: str) -> Path:
    config = json.loads(Path(cluster.kubeconfig).read_text())
    config["clusters"][0]["cluster"].update(cluster_fields)
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def service_account_token(cluster: LocalCluster, namespace: str, name: str) -> str:
    status, reply = cluster.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )
    assert status == 201 and isinstance(reply, dict), reply
    return reply["status"]["token"]


@pytest.fixture
def labeler_account(cluster: LocalCluster, namespace: str) -> Iterator[tuple[str, str]]:
    """A ServiceAccount that may read and label nodes and list pods (what labeling and facts use)."""
    name = "labeler"
    role = f"kubegpu-faults-{namespace}"
    assert (
        cluster.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        )[0]
        == 201
    )
    rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]
    assert (
        cluster.create(
            f"{RBAC_API}/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": role},
                "rules": rules,
            },
        )[0]
        == 201
    )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    assert cluster.create(f"{RBAC_API}/clusterrolebindings", binding)[0] == 201
    try:
        yield namespace, name
    finally:
        cluster.delete(f"{RBAC_API}/clusterrolebindings/{role}")
        cluster.delete(f"{RBAC_API}/clusterroles/{role}")


# --- the API server stopped in the middle of labeling --------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnApiServer:
    """A second kube-apiserver of the local cluster (same etcd, same certificates, another loopback
    port), started and stopped by the test alone: stopping it takes nothing away from the shared
    cluster and the sessions that use it, while a client that talks to it sees its API server go."""

    def __init__(self, cluster: LocalCluster, folder: Path) -> None:
        layout = cluster.layout
        binary = Path(local_cluster.read_pids(layout)["kube-apiserver"]["binary"])
        self.port = free_port()
        argv = local_cluster.command_lines(layout, binary.parent)["kube-apiserver"]
        self.argv = [a for a in argv if not a.startswith(("--secure-port=", "--cert-dir="))]
        self.argv += [f"--secure-port={self.port}", f"--cert-dir={folder / 'apiserver-certs'}"]
        self.log = folder / "kube-apiserver.log"
        self.server = f"https://127.0.0.1:{self.port}"
        self.api = local_cluster.Api(layout)
        self.api.base = self.server
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 180) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while not local_cluster._is_ready(self.api):
            if self.process.poll() is not None:
                pytest.fail(f"the test's kube-apiserver exited ({self.process.returncode}); see {self.log}")
            if time.monotonic() > deadline:
                pytest.fail(f"the test's kube-apiserver was not ready within {timeout:g}s; see {self.log}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.mark.slow
def test_apiserver_stopped_while_labeling_leaves_no_half_label_and_a_rerun_converges(
    cluster: LocalCluster, tmp_path: Path
):
    apiserver = OwnApiServer(cluster, tmp_path)
    kubeconfig = admin_kubeconfig_with(cluster, tmp_path / "kubeconfig", server=apiserver.server)
    nodes = create_extra_nodes(cluster, 300, foreign=10)
    args = {"label_selectors": [nodes.selector], "parallelism": 1}
    process = None
    try:
        apiserver.start()
        process = subprocess.Popen(
            module_command("gpu_node_label", args),
            env=ansible_env(kubeconfig),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wanted = len(nodes.expected) // 5 + len(nodes.foreign_owned)

        def labeled_so_far() -> bool:
            status, listed = cluster.api.request("GET", f"/api/v1/nodes?labelSelector={nodes.selector},{KEY}")
            return status == 200 and isinstance(listed, dict) and len(listed["items"]) >= wanted

        wait_until(
            lambda: labeled_so_far() or process.poll() is not None, timeout=120, interval=0.05, what="labeling to start"
        )
        assert process.poll() is None, "labeling finished before the API server could be stopped"
        stopped_at = time.monotonic()
        apiserver.stop()
        stdout, stderr = process.communicate(timeout=180)
        failed_after = time.monotonic() - stopped_at
        run = parse_run(process.returncode, stdout, stderr)

        message = assert_one_clear_message(
            run,
            f"labeling stopped: connection refused by the API server at {apiserver.server}",
            "none is half-labeled; run again to converge",
        )
        assert "not attempted" in message, message
        assert run.result["counts"]["labeled"] > 0 and run.result["not_attempted"], run.result["counts"]
        labeled = assert_consistent(cluster, nodes, complete=False)
        # What the run says it changed, it changed; at most the patch in flight when the server
        # stopped may have been applied without the run hearing back.
        assert set(run.result["labeled"]) <= labeled
        assert len(labeled - set(run.result["labeled"])) <= args["parallelism"]
        assert labeled < set(nodes.expected), "every node was labeled: the API server stopped too late"

        apiserver.start()
        rerun = run_module("gpu_node_label", {"label_selectors": [nodes.selector]}, kubeconfig)
        assert not rerun.failed, brief(rerun)
        assert set(rerun.result["labeled"]) == set(nodes.expected) - labeled
        assert {c["node"] for c in rerun.result["conflicts"]} == nodes.foreign_owned
        assert assert_consistent(cluster, nodes, complete=True) == set(nodes.expected)

        third = run_module("gpu_node_label", {"label_selectors": [nodes.selector]}, kubeconfig)
        assert not third.failed, brief(third)
        assert third.result["changed"] is False and third.result["writes"] == 0
        print(
            f"\napiserver stopped after {len(labeled)} of {len(nodes.expected)} nodes; the run failed "
            f"{failed_after:.1f}s later; counts {run.result['counts']}"
        )
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        apiserver.stop()
        delete_extra_nodes(cluster, nodes)


# --- throttling by API Priority and Fairness -----------------------------------------------------


class Load:
    """Threads that send one request over and over as one identity, each on its own kept-alive
    connection and `pause` seconds apart, counting what the server answers."""

    def __init__(self, cluster: LocalCluster, token: str, threads: int, path: str, pause: float) -> None:
        self.path = path
        self.pause = pause
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.context = ssl.create_default_context(cafile=str(cluster.layout.pki / "ca.crt"))
        self.port = int(cluster.layout.server.rsplit(":", 1)[1])
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.answers: dict[int, int] = {}
        self.probe_rejects = 0
        self.threads = [threading.Thread(target=self._run, daemon=True) for _thread in range(threads)]

    def _send(self, connection: http.client.HTTPSConnection | None) -> tuple[int, http.client.HTTPSConnection | None]:
        if connection is None:
            connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)
        try:
            connection.request("GET", self.path, headers=self.headers)
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            connection.close()
            return 0, None
        if response.will_close:
            connection.close()
            return response.status, None
        return response.status, connection

    def _run(self) -> None:
        connection = None
        while not self.stop_event.is_set():
            status, connection = self._send(connection)
            with self.lock:
                self.answers[status] = self.answers.get(status, 0) + 1
            time.sleep(self.pause)
        if connection is not None:
            connection.close()

    def rejection_rate(self, seconds: float) -> float:
        """The share of 429s that one more client, sending one request at a time, meets now."""
        answers: list[int] = []
        connection = None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status, connection = self._send(connection)
            answers.append(status)
        if connection is not None:
            connection.close()
        self.probe_rejects += answers.count(429)
        return answers.count(429) / max(1, len(answers))

    def calibrate(self, low: float = 0.06, high: float = 0.25) -> float:
        """Set the pause so that one more client meets some 429s, but not so many that four
        retries in a row are likely: the machine decides how fast requests are served."""
        too_fast: float | None = None  # the longest pause met with too many 429s
        too_slow: float | None = None  # the shortest pause met with too few
        rate = self.rejection_rate(1.5)
        for _round in range(8):
            if low <= rate <= high:
                return rate
            if rate > high:
                too_fast = self.pause if too_fast is None else max(too_fast, self.pause)
            else:
                too_slow = self.pause if too_slow is None else min(too_slow, self.pause)
            # Halve the gap between the two (on a log scale) once both are known: doubling and halving
            # alone can swing across a narrow band for ever on a machine whose speed changes.
            if too_fast is not None and too_slow is not None:
                self.pause = (too_fast * too_slow) ** 0.5
            else:
                self.pause = self.pause * 2 if rate > high else self.pause / 2
            rate = self.rejection_rate(1.5)
        if rate < low and too_fast is not None:
            # Better too many 429s (the runs retry or rerun) than none (the test would prove nothing).
            self.pause = too_fast
            rate = self.rejection_rate(1.5)
        return rate

    def count(self, status: int) -> int:
        with self.lock:
            return self.answers.get(status, 0)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=20)


# Load threads: as many as the about three seats of the throttled priority level, so that a request
# of the module meets a full level now and then.
LOAD_THREADS = 3


def rejected_total(cluster: LocalCluster, flow_schema: str) -> int:
    """Requests API Priority and Fairness rejected (429) for this FlowSchema, from /metrics."""
    status, text = cluster.api.request("GET", "/metrics", timeout=30)
    assert status == 200 and isinstance(text, str)
    pattern = re.compile(
        r'^apiserver_flowcontrol_rejected_requests_total\{[^}]*flow_schema="'
        + re.escape(flow_schema)
        + r'"[^}]*\} (\S+)$',
        re.MULTILINE,
    )
    return sum(int(float(value)) for value in pattern.findall(text))


@dataclass
class Throttle:
    flow_schema: str
    uid: str

    def applies(self, cluster: LocalCluster, token: str) -> bool:
        """Whether the API server already classifies this token's requests with the FlowSchema."""
        context = ssl.create_default_context(cafile=str(cluster.layout.pki / "ca.crt"))
        request = urllib.request.Request(
            cluster.layout.server + "/api/v1/nodes?limit=1", headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                headers = response.headers
        except urllib.error.HTTPError as exc:
            headers = exc.headers
        return headers.get("X-Kubernetes-PF-FlowSchema-UID") == self.uid


@pytest.fixture
def throttled(cluster: LocalCluster, labeler_account: tuple[str, str]) -> Iterator[Throttle]:
    """Every request of the labeler ServiceAccount goes to a priority level of about three seats that
    rejects (429) what does not fit."""
    namespace, account = labeler_account
    name = f"kubegpu-throttled-{namespace}"
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": account}}
                    ],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                }
            ],
        },
    }
    assert cluster.create(f"{FLOWCONTROL_API}/prioritylevelconfigurations", level)[0] == 201
    try:
        status, created = cluster.create(f"{FLOWCONTROL_API}/flowschemas", schema)
        assert status == 201 and isinstance(created, dict), created
        yield Throttle(name, created["metadata"]["uid"])
    finally:
        cluster.delete(f"{FLOWCONTROL_API}/flowschemas/{name}")
        cluster.delete(f"{FLOWCONTROL_API}/prioritylevelconfigurations/{name}")


def until_converged(
    cluster: LocalCluster,
    module: str,
    args: dict[str, Any],
    kubeconfig: Path,
    reruns: list[str],
    nodes: ExtraNodes | None = None,
    attempts: int = 3,
) -> ModuleRun:
    """Run until the module succeeds; a run that gave up on 429s must say so clearly and leave no node
    half-labeled."""
    for _attempt in range(attempts):
        run = run_module(module, args, kubeconfig)
        if not run.failed:
            return run
        reruns.append(module)
        assert_one_clear_message(run, "throttled by the API server (429 Too Many Requests)", "gave up after 5 attempts")
        if nodes is not None:
            assert_consistent(cluster, nodes, complete=False)
    pytest.fail(f"{module} did not converge in {attempts} runs: {brief(run)}")


THROTTLE_ROUNDS = 3


@pytest.mark.slow
def test_throttled_runs_converge_with_bounded_retries(
    cluster: LocalCluster, labeler_account: tuple[str, str], throttled: Throttle, tmp_path: Path
):
    namespace, account = labeler_account
    token = service_account_token(cluster, namespace, account)
    kubeconfig = write_token_kubeconfig(tmp_path / "throttled.kubeconfig", cluster, token)
    nodes = create_extra_nodes(cluster, 40)
    try:
        wait_until(lambda: throttled.applies(cluster, token), timeout=60, what="the FlowSchema to apply")
        # One request at a time never meets the limit: what a run needs when nothing else runs.
        quiet = run_module("gpu_node_facts", {}, kubeconfig)
        assert not quiet.failed, brief(quiet)
        baseline = quiet.result["ansible_facts"]["gpu_fleet"]["api_requests"]
        assert rejected_total(cluster, throttled.flow_schema) == 0

        # The load makes the API server reject some of the identity's requests, not a set share of the
        # module's: a round in which every request of the module happened to pass proves nothing, and is
        # run again (at most THROTTLE_ROUNDS rounds) until the module met 429s.
        for _round in range(THROTTLE_ROUNDS):
            rejected_before = rejected_total(cluster, throttled.flow_schema)
            runs: dict[str, list[ModuleRun]] = {"facts": [], "label": []}
            reruns: list[str] = []
            timings: dict[str, float] = {}
            started = time.monotonic()
            with Load(cluster, token, LOAD_THREADS, "/api/v1/pods?limit=500", pause=0.01) as load:
                timings["rejection rate"] = load.calibrate()
                timings["calibrated"] = time.monotonic() - started
                for _run in range(2):
                    runs["facts"].append(until_converged(cluster, "gpu_node_facts", {}, kubeconfig, reruns))
                timings["facts"] = time.monotonic() - started
                label_args = {"label_selectors": [nodes.selector], "parallelism": 2}
                runs["label"] = [until_converged(cluster, "gpu_node_label", label_args, kubeconfig, reruns, nodes)]
                again = until_converged(cluster, "gpu_node_label", label_args, kubeconfig, reruns, nodes)
                timings["label"] = time.monotonic() - started
            load_answers = dict(load.answers)
            # What the API server rejected for the identity this round, less what the load and the calibration met.
            rejected = rejected_total(cluster, throttled.flow_schema) - rejected_before
            module_rejects = rejected - load_answers.get(429, 0) - load.probe_rejects
            if module_rejects > 0:
                break

        label = runs["label"][0]
        assert assert_consistent(cluster, nodes, complete=True) == set(nodes.expected)
        assert again.result["changed"] is False and again.result["writes"] == 0
        # The runs met 429s and retried them, at most four times per request.
        facts_requests = [r.result["ansible_facts"]["gpu_fleet"]["api_requests"] for r in runs["facts"]]
        assert module_rejects > 0, f"the module was never throttled (load: {load_answers})"
        assert sum(facts_requests) - baseline * len(facts_requests) <= module_rejects
        assert max(facts_requests) <= baseline * 5
        print(
            f"\nload answers {load_answers}; facts requests {facts_requests} (unthrottled {baseline}); label "
            f"writes {label.result['writes']}; 429s to the module in all {module_rejects}; reruns needed "
            f"{reruns}; timings {timings}"
        )
    finally:
        delete_extra_nodes(cluster, nodes)


# --- another writer on the same nodes ------------------------------------------------------------


def test_labeling_converges_while_another_writer_changes_the_same_nodes(cluster: LocalCluster):
    nodes = create_extra_nodes(cluster, 60, foreign=4)
    names = sorted(nodes.created)
    written: dict[str, str] = {}
    stop = threading.Event()
    writes = [0]

    def churn() -> None:
        # What another controller does: its own label on the same nodes, over and over, on one
        # kept-alive connection (with the admin certificate).
        port = int(cluster.layout.server.rsplit(":", 1)[1])
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=cluster.api.context, timeout=10)
        headers = {"Content-Type": "application/merge-patch+json", "Accept": "application/json"}
        try:
            while not stop.is_set():
                for name in names:
                    if stop.is_set():
                        return
                    value = f"v{writes[0]}"
                    body = json.dumps({"metadata": {"labels": {"example.com/churn": value}}})
                    connection.request("PATCH", f"/api/v1/nodes/{name}", body=body, headers=headers)
                    response = connection.getresponse()
                    response.read()
                    if response.status == 200:
                        written[name] = value
                        writes[0] += 1
        finally:
            connection.close()

    writer = threading.Thread(target=churn, daemon=True)
    try:
        writer.start()
        wait_until(lambda: len(written) == len(names), timeout=60, what="the other writer to touch every node")
        run = run_module("gpu_node_label", {"label_selectors": [nodes.selector], "parallelism": 4}, cluster.kubeconfig)
        stop.set()
        writer.join(timeout=30)
        assert not run.failed, brief(run)
        assert set(run.result["labeled"]) == set(nodes.expected)
        assert {c["node"] for c in run.result["conflicts"]} == nodes.foreign_owned
        labeled = set(nodes.expected)
        # Another writer's label is no precondition of the labeling patch: one patch per node.
        assert run.result["writes"] == len(labeled)
        assert assert_consistent(cluster, nodes, complete=True) == labeled
        current = listed_extra(cluster, nodes)
        for name, value in written.items():
            assert current[name]["labels"].get("example.com/churn") == value, f"{name}: the other writer's label"
        third = run_module("gpu_node_label", {"label_selectors": [nodes.selector]}, cluster.kubeconfig)
        assert not third.failed and third.result["writes"] == 0, brief(third)
        print(
            f"\nthe other writer patched {writes[0]} times; labeling sent {run.result['writes']} writes "
            f"for {len(labeled)} nodes"
        )
    finally:
        stop.set()
        writer.join(timeout=30)
        delete_extra_nodes(cluster, nodes)


# --- an unreachable or misconfigured cluster -----------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def service_account_jwt(cluster: LocalCluster, expires_in: float) -> str:
    """A token for the default ServiceAccount of `default`, signed with the cluster's own service
    account key as the API server signs them, valid for `expires_in` seconds (negative: expired)."""
    account = cluster.get("/api/v1/namespaces/default/serviceaccounts/default")
    issuer = "https://kubernetes.default.svc.cluster.local"
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": [issuer],
        "sub": "system:serviceaccount:default:default",
        "iat": now - 7200,
        "nbf": now - 7200,
        "exp": now + int(expires_in),
        "kubernetes.io": {
            "namespace": "default",
            "serviceaccount": {"name": "default", "uid": account["metadata"]["uid"]},
        },
    }
    signed = f"{b64url(json.dumps({'alg': 'RS256', 'typ': 'JWT'}).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = subprocess.run(
        ["openssl", "dgst", "-sha256", "-sign", str(cluster.layout.pki / "sa.key")],
        input=signed.encode(),
        capture_output=True,
        check=True,
    ).stdout
    return f"{signed}.{b64url(signature)}"


def status_with_token(cluster: LocalCluster, token: str) -> int:
    context = ssl.create_default_context(cafile=str(cluster.layout.pki / "ca.crt"))
    request = urllib.request.Request(
        cluster.layout.server + "/api/v1/nodes?limit=1", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def other_ca(folder: Path) -> Path:
    """A CA certificate that did not sign the API server's certificate."""
    return make_ca(folder, "/CN=not-the-cluster-ca", days=1, name="other-ca")


@pytest.fixture(scope="module")
def broken_configs(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, str]]:
    """Case -> (environment for the module, what its one message must say)."""
    folder = tmp_path_factory.mktemp("broken")
    port = free_port()
    expired = service_account_jwt(cluster, expires_in=-3600)
    # The same token, not expired, is accepted (and then forbidden): only the expiry is wrong.
    assert status_with_token(cluster, service_account_jwt(cluster, expires_in=3600)) == 403
    assert status_with_token(cluster, expired) == 401
    missing = folder / "no-such-dir" / "kubeconfig"
    admin = str(cluster.kubeconfig)
    refused = f"connection refused by the API server at https://127.0.0.1:{port}: is it running"
    rejected = "credentials rejected (401 Unauthorized) on GET /api/v1/nodes"
    return {
        "wrong host": (
            {
                "K8S_AUTH_KUBECONFIG": str(
                    admin_kubeconfig_with(cluster, folder / "wrong-host", server=f"https://127.0.0.1:{port}")
                )
            },
            refused,
        ),
        "bad CA": (
            {
                "K8S_AUTH_KUBECONFIG": str(
                    admin_kubeconfig_with(
                        cluster, folder / "bad-ca", **{"certificate-authority": str(other_ca(folder))}
                    )
                )
            },
            f"TLS certificate verification failed for the API server at {cluster.layout.server}",
        ),
        "expired token": (
            {"K8S_AUTH_KUBECONFIG": str(write_token_kubeconfig(folder / "expired", cluster, expired))},
            rejected,
        ),
        "invalid token": (
            {"K8S_AUTH_KUBECONFIG": str(write_token_kubeconfig(folder / "invalid", cluster, "not-a-token"))},
            rejected,
        ),
        "unknown context": (
            {"K8S_AUTH_KUBECONFIG": admin, "K8S_AUTH_CONTEXT": "no-such-context"},
            f'context "no-such-context" not found in kubeconfig {admin}; available contexts: kubegpu-local',
        ),
        "missing kubeconfig": (
            {"K8S_AUTH_KUBECONFIG": str(missing)},
            f"kubeconfig file not found: {missing}",
        ),
    }


def run_broken(module: str, args: dict[str, Any], env: dict[str, str]) -> ModuleRun:
    kubeconfig = env.pop("K8S_AUTH_KUBECONFIG")
    return run_module(module, args, kubeconfig, timeout=120, **env)


@pytest.mark.parametrize(
    "case", ["wrong host", "bad CA", "expired token", "invalid token", "unknown context", "missing kubeconfig"]
)
def test_a_broken_connection_gives_one_clear_message(broken_configs, case: str):
    env, expected = broken_configs[case]
    run = run_broken("gpu_node_facts", {}, dict(env))
    message = assert_one_clear_message(run, expected)
    assert "BEGIN" not in message and "not-a-token" not in message, "a credential reached the message"


# Every other module that talks to the cluster (gpu_node_facts has the test above).
MODULE_CALLS = {name: args for name, args in CLUSTER_MODULE_CALLS.items() if name != "gpu_node_facts"}


@pytest.mark.parametrize("case", ["bad CA", "expired token"])
@pytest.mark.parametrize("module", sorted(MODULE_CALLS))
def test_every_module_gives_one_clear_message(broken_configs, module: str, case: str):
    env, expected = broken_configs[case]
    run = run_broken(module, MODULE_CALLS[module], dict(env))
    # Messages name the request that failed; the part about the connection is the same for all.
    assert_one_clear_message(run, expected.split(" on GET ")[0])
