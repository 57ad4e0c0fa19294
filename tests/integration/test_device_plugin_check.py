"""gpu_device_plugin_validate and the device_plugin_check role against the local cluster.

The fleet (tests/cluster/fleet.yaml) has a GPU node the device-plugin DaemonSet does not select (no
plugin pod, no capacity) and one with allocatable below capacity; its ACK nodes run ACK's static
device-plugin pod instead of the DaemonSet's. The expected findings are computed
from the fleet file, not from the module's code. The cluster is shared: every change a test makes to
a node is undone in a finalizer.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import LocalCluster, daemonset_selects, run_ansible_module, runs_device_plugin, wait_until
from conftest import ansible_env as shared_ansible_env

from tests.cluster import ack
from tests.cluster import fleet as fleet_file

pytestmark = [pytest.mark.cluster, pytest.mark.every_release]

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "playbooks" / "device_plugin_check.yml"
GPU = "nvidia.com/gpu"
DEFAULT_POD_SELECTORS = 5
GPU_LABEL_KEYS = (
    "nvidia.com/gpu.product",
    "aliyun.accelerator/nvidia_name",
    "cloud.google.com/gke-accelerator",
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.count",
    "aliyun.accelerator/nvidia_count",
)
HARDENED = (
    "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
    "accept-nvidia-visible-devices-as-volume-mounts = true\n"
)
UNHARDENED = "accept-nvidia-visible-devices-envvar-when-unprivileged = true\n"


def ansible_env(cluster: LocalCluster, **extra: str) -> dict[str, str]:
    return shared_ansible_env(cluster.kubeconfig, ANSIBLE_HOST_KEY_CHECKING="0", **extra)


def run_module(cluster: LocalCluster, args: dict[str, Any], *flags: str) -> tuple[bool, dict[str, Any]]:
    """Run the module through `ansible` as a user would: (succeeded, result)."""
    status, result, _done = run_ansible_module(cluster.kubeconfig, "gpu_device_plugin_validate", args, *flags)
    return status == "SUCCESS", result


def errors(result: dict[str, Any]) -> set[tuple[str | None, str]]:
    return {(f["node"], f["kind"]) for f in result["findings"] if f["severity"] == "error"}


# --- what the fleet file says ---------------------------------------------------------------------


def plugin_selector(cluster: LocalCluster) -> dict[str, str]:
    return cluster.fleet["device_plugin"]["node_selector"]


def gpu_specs(cluster: LocalCluster) -> list[dict[str, Any]]:
    return [
        s
        for s in cluster.fleet["nodes"]
        if s["gpus"] or any(s["labels"].get(k) not in (None, "", "false") for k in GPU_LABEL_KEYS)
    ]


def selected_by_plugin(cluster: LocalCluster, spec: dict[str, Any]) -> bool:
    """Whether the device-plugin DaemonSet selects the node."""
    return daemonset_selects(cluster.fleet, spec)


def served_by_plugin(cluster: LocalCluster, spec: dict[str, Any]) -> bool:
    """Whether a device-plugin pod serves the node: the DaemonSet's or ACK's static pod."""
    return runs_device_plugin(cluster.fleet, spec)


def expected_errors(cluster: LocalCluster) -> set[tuple[str | None, str]]:
    expected: set[tuple[str | None, str]] = set()
    for spec in gpu_specs(cluster):
        if not served_by_plugin(cluster, spec):
            expected.add((spec["name"], "no_device_plugin_pod"))
        if not spec["gpus"]:
            expected.add((spec["name"], "no_gpu_capacity"))
        elif spec["allocatable_gpus"] < spec["gpus"]:
            expected.add((spec["name"], "allocatable_below_capacity"))
    return expected


def broken_nodes(cluster: LocalCluster) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fleet's node no plugin serves, and its node with unhealthy GPUs."""
    specs = gpu_specs(cluster)
    unselected = next(s for s in specs if not served_by_plugin(cluster, s))
    unhealthy = next(s for s in specs if s["gpus"] and s["allocatable_gpus"] < s["gpus"])
    return unselected, unhealthy


# --- changing the cluster, and putting it back -------------------------------------------------------


def set_gpus(cluster: LocalCluster, node: str, capacity: int | None, allocatable: int | None) -> None:
    """Merge-patch a node's GPU capacity and allocatable (None removes the resource)."""
    body = {
        "status": {
            "capacity": {GPU: None if capacity is None else str(capacity)},
            "allocatable": {GPU: None if allocatable is None else str(allocatable)},
        }
    }
    cluster.patch(f"/api/v1/nodes/{node}/status", body)


def set_labels(cluster: LocalCluster, node: str, labels: dict[str, str | None]) -> None:
    cluster.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}})


def plugin_pods_on(cluster: LocalCluster, node: str) -> list[dict[str, Any]]:
    namespace = cluster.fleet["device_plugin"]["namespace"]
    pods = cluster.get(f"/api/v1/namespaces/{namespace}/pods?fieldSelector=spec.nodeName%3D{node}")["items"]
    return [p for p in pods if p["metadata"].get("labels", {}).get("name") == "nvidia-device-plugin-ds"]


def daemonset_path(cluster: LocalCluster) -> str:
    plugin = cluster.fleet["device_plugin"]
    return f"/apis/apps/v1/namespaces/{plugin['namespace']}/daemonsets/{plugin['name']}"


def wait_daemonset_settled(cluster: LocalCluster) -> None:
    """Wait until the DaemonSet's status counts every pod it wants as scheduled and Ready."""

    def settled() -> bool:
        status = cluster.get(daemonset_path(cluster))["status"]
        desired = status.get("desiredNumberScheduled", 0)
        return all(status.get(k, 0) == desired for k in ("currentNumberScheduled", "numberReady", "numberAvailable"))

    wait_until(settled, timeout=90, what="the device-plugin DaemonSet to settle")


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


@pytest.fixture
def fixed_fleet(cluster: LocalCluster, request: pytest.FixtureRequest):
    """Fix the fleet's broken nodes as an operator would, and undo it afterwards."""
    unselected, unhealthy = broken_nodes(cluster)

    def restore() -> None:
        set_labels(cluster, unselected["name"], {k: None for k in plugin_selector(cluster)})
        set_gpus(cluster, unselected["name"], unselected["gpus"], unselected["gpus"])
        set_gpus(cluster, unhealthy["name"], unhealthy["gpus"], unhealthy["allocatable_gpus"])
        wait_until(
            lambda: not plugin_pods_on(cluster, unselected["name"]),
            timeout=90,
            what=f"device-plugin pod on {unselected['name']} to go",
        )
        wait_daemonset_settled(cluster)

    request.addfinalizer(restore)
    set_labels(cluster, unselected["name"], dict(plugin_selector(cluster)))
    count = int(unselected["labels"].get("nvidia.com/gpu.count", "8"))
    set_gpus(cluster, unselected["name"], count, count)
    set_gpus(cluster, unhealthy["name"], unhealthy["gpus"], unhealthy["gpus"])
    wait_until(
        lambda: any(pod_ready(p) for p in plugin_pods_on(cluster, unselected["name"])),
        timeout=90,
        what=f"a Ready device-plugin pod on {unselected['name']}",
    )
    return unselected, unhealthy


# --- the module ---------------------------------------------------------------------------------------


def test_check_fails_on_the_broken_nodes_with_the_right_reasons(cluster: LocalCluster):
    succeeded, result = run_module(cluster, {})
    assert not succeeded
    assert result["healthy"] is False
    assert errors(result) == expected_errors(cluster)
    assert result["msg"] == "\n".join(result["report"])

    unselected, unhealthy = broken_nodes(cluster)
    by_kind = {(f["node"], f["kind"]): f for f in result["findings"]}
    remedy = by_kind[(unselected["name"], "no_device_plugin_pod")]["remedy"]
    for key, value in plugin_selector(cluster).items():
        assert f"kubectl label node {unselected['name']} {key}={value}" in remedy
    problem = by_kind[(unhealthy["name"], "allocatable_below_capacity")]["problem"]
    assert problem.startswith(f"allocatable {unhealthy['allocatable_gpus']} below capacity {unhealthy['gpus']}")
    for line in (f"node {unselected['name']}: no device-plugin pod", f"node {unhealthy['name']}: allocatable"):
        assert line in "\n".join(result["report"])


def test_daemonset_status_and_request_count(cluster: LocalCluster):
    succeeded, result = run_module(cluster, {"fail_on": "never"})
    assert succeeded and result["changed"] is False
    plugin = cluster.fleet["device_plugin"]
    [daemonset] = result["daemonsets"]
    selected = [s for s in gpu_specs(cluster) if selected_by_plugin(cluster, s)]
    assert (daemonset["namespace"], daemonset["name"]) == (plugin["namespace"], plugin["name"])
    assert daemonset["deployment"] == "nvidia-static"
    assert daemonset["desired"] == daemonset["ready"] == len(selected)
    assert daemonset["healthy"] is True
    dra_nodes = {s["name"] for s in fleet_file.dra_nodes(cluster.fleet)}
    assert {n["name"] for n in result["nodes"]} == {s["name"] for s in gpu_specs(cluster)} | dra_nodes
    # One list of DaemonSets, one of nodes, one of ResourceSlices, one per default pod selector and one
    # for the DRA driver's kubelet-plugin DaemonSet: not one call per node.
    assert result["api_requests"] == 3 + DEFAULT_POD_SELECTORS + len(result["dra_daemonsets"])


def test_ack_nodes_are_healthy_through_their_static_pods(cluster: LocalCluster):
    succeeded, result = run_module(cluster, {"fail_on": "never"})
    assert succeeded
    static_nodes = ack.static_nodes(cluster.fleet)
    assert static_nodes, "the fleet has ACK nodes with the static pod"
    nodes = {n["name"]: n for n in result["nodes"]}
    for name in static_nodes:
        node = nodes[name]
        assert node["healthy"] is True and node["plugin_ready"] is True, node
        assert node["plugin_pods"] == [
            {
                "pod": f"{ack.NAMESPACE}/{ack.mirror_pod_name(name)}",
                "ready": True,
                "phase": "Running",
                "reason": None,
                "restarts": 0,
                "static": True,
                "deployment": "ack-static",
            }
        ]
    deployments = {d["key"]: d for d in result["deployments"]}
    assert deployments["ack-static"]["static_pods"] == len(static_nodes)
    assert deployments["nvidia-static"]["daemonsets"] == [
        f"{cluster.fleet['device_plugin']['namespace']}/{cluster.fleet['device_plugin']['name']}"
    ]
    # Two deployments in one cluster, each on its own nodes: a warning, no node serves GPUs twice.
    assert ("cluster", "several_device_plugin_deployments") in {(f["subject"], f["kind"]) for f in result["findings"]}
    assert not any(f["kind"] == "several_device_plugin_pods" for f in result["findings"])


def test_check_mode_gives_the_same_verdict(cluster: LocalCluster):
    _code, normal = run_module(cluster, {"fail_on": "never"})
    succeeded, checked = run_module(cluster, {"fail_on": "never"}, "--check")
    assert succeeded and checked["changed"] is False
    assert errors(checked) == errors(normal) == expected_errors(cluster)


def test_named_daemonset_that_does_not_exist_is_an_error(cluster: LocalCluster):
    succeeded, result = run_module(
        cluster, {"fail_on": "never", "daemonsets": [{"namespace": "gpu-operator", "name": "absent"}]}
    )
    assert succeeded
    assert ("DaemonSet gpu-operator/absent", "daemonset_missing") in {
        (f["subject"], f["kind"]) for f in result["findings"]
    }


def test_bad_option_is_a_clear_message(cluster: LocalCluster):
    succeeded, result = run_module(cluster, {"daemonsets": [{"name": "x"}]})
    assert not succeeded
    assert result["msg"] == "daemonsets[0]: name 'x' needs a namespace"


def test_plugin_pod_not_ready_is_reported_on_that_node_only(cluster: LocalCluster, request: pytest.FixtureRequest):
    node = next(s["name"] for s in gpu_specs(cluster) if selected_by_plugin(cluster, s) and s["gpus"])

    def restore() -> None:
        cluster.set_plugin_pod_ready(node, True)
        wait_until(lambda: pod_ready(cluster.plugin_pod_on(node)), timeout=60, what=f"plugin pod on {node} Ready")
        wait_daemonset_settled(cluster)

    request.addfinalizer(restore)
    cluster.set_plugin_pod_ready(node, False)
    wait_until(lambda: not pod_ready(cluster.plugin_pod_on(node)), timeout=60, what=f"plugin pod on {node} not Ready")
    wait_until(
        lambda: (
            (status := cluster.get(daemonset_path(cluster))["status"])["numberReady"] < status["desiredNumberScheduled"]
        ),
        timeout=60,
        what="the DaemonSet to count the pod not Ready",
    )

    _code, result = run_module(cluster, {"fail_on": "never"})
    new = errors(result) - expected_errors(cluster)
    assert new == {(node, "device_plugin_not_ready"), (None, "daemonset_pods_not_ready")}
    finding = next(f for f in result["findings"] if f["kind"] == "device_plugin_not_ready")
    pod = cluster.plugin_pod_on(node)["metadata"]["name"]
    assert f"kubectl -n {cluster.fleet['device_plugin']['namespace']} logs {pod}" in finding["remedy"]


# --- the role, through the playbook ----------------------------------------------------------------------


def fake_gpu_host(tmp_path: Path, gpus: int, toolkit: str) -> tuple[Path, Path]:
    """A bin directory with an nvidia-smi that lists `gpus` H100s, and a toolkit config file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    rows = "\n".join(
        f"{i}, NVIDIA H100 80GB HBM3, GPU-{i:08d}-0000-0000-0000-000000000000, 81559, 550.54.15, 00000000:{i:02X}:00.0"
        for i in range(gpus)
    )
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncase \"$1\" in --query-gpu=*) cat <<'EOF'\n{rows}\nEOF\n;; esac\nexit 0\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    config = tmp_path / "config.toml"
    config.write_text(toolkit)
    return bin_dir, config


def printed_results(stdout: str, marker: str = " => ") -> list[dict[str, Any]]:
    """Every task result the minimal callback printed (`host | STATUS => {...}`), or those after
    `marker` (`| FAILED! => ` for the failed ones)."""
    decoder = json.JSONDecoder()
    results = []
    for part in stdout.split(marker)[1:]:
        try:
            value = decoder.raw_decode(part)[0]
        except ValueError:
            continue
        if isinstance(value, dict):
            results.append(value)
    return results


def run_playbook(
    cluster: LocalCluster, tmp_path: Path, hosts: dict[str, dict], extra: dict[str, Any], bin_dir: Path
) -> tuple[int, dict[str, Any], str, list[str]]:
    """Run playbooks/device_plugin_check.yml: (rc, the check task's result, the printed report, the
    messages of the tasks that failed). With retries, the check task's result is its last attempt's."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {
        "all": {
            "hosts": {"localhost": local},
            "children": {"gpu_hosts": {"hosts": {h: {**local, **v} for h, v in hosts.items()}}},
        }
    }
    inventory_file = tmp_path / "inventory.yml"
    inventory_file.write_text(yaml.safe_dump(inventory))
    env = ansible_env(
        cluster,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    command = [str(BIN / "ansible-playbook"), "-i", str(inventory_file), str(PLAYBOOK), "-e", json.dumps(extra)]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=600)
    results = printed_results(done.stdout)
    checks = [r for r in results if "findings" in r and "report" in r]
    reports = [r["msg"] for r in results if isinstance(r.get("msg"), list)]
    if not checks or not reports:
        pytest.fail(f"the check or its report did not run (rc {done.returncode}): {done.stdout[-4000:]}\n{done.stderr}")
    failures = [str(r.get("msg")) for r in printed_results(done.stdout, "| FAILED! => ")]
    return done.returncode, checks[-1], "\n".join(reports[-1]), failures


def test_role_fails_on_the_broken_fleet_and_host_and_passes_once_fixed(
    cluster: LocalCluster, tmp_path: Path, request: pytest.FixtureRequest
):
    healthy_host = next(
        s
        for s in gpu_specs(cluster)
        if served_by_plugin(cluster, s) and s["gpus"] and s["allocatable_gpus"] == s["gpus"]
    )
    bin_dir, config = fake_gpu_host(tmp_path, healthy_host["gpus"], UNHARDENED)
    hosts = {
        healthy_host["name"]: {},
        "unreachable-gpu": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1},
    }
    extra = {"device_plugin_check_require_hardening": True, "device_plugin_check_toolkit_config_paths": [str(config)]}

    rc, result, report, _failures = run_playbook(cluster, tmp_path, hosts, extra, bin_dir)
    assert rc != 0
    assert errors(result) == expected_errors(cluster) | {
        (healthy_host["name"], "toolkit_accepts_visible_devices_env"),
        ("unreachable-gpu", "host_facts_failed"),
    }
    host_view = next(n["host"] for n in result["nodes"] if n["name"] == healthy_host["name"])
    assert host_view["gpu_count"] == healthy_host["gpus"] and host_view["driver_working"] is True
    assert report.startswith("GPU device plugin check FAILED")
    assert f"[ERROR] host {healthy_host['name']}: {config}: accept-nvidia-visible-devices-envvar" in report

    request.getfixturevalue("fixed_fleet")
    config.write_text(HARDENED)
    # Retries give the DaemonSet controller time to count the new plugin pod.
    rc, result, report, _failures = run_playbook(
        cluster,
        tmp_path,
        {healthy_host["name"]: {}},
        {**extra, "device_plugin_check_retries": 10, "device_plugin_check_delay": 3},
        bin_dir,
    )
    assert result["healthy"] is True, report
    assert rc == 0
    assert errors(result) == set()
    assert report.startswith("GPU device plugin check PASSED")


def test_role_without_gpu_hosts_and_report_only(cluster: LocalCluster, tmp_path: Path):
    rc, result, report, _failures = run_playbook(
        cluster, tmp_path, {}, {"device_plugin_check_report_only": True}, tmp_path
    )
    assert rc == 0
    assert report.startswith("GPU device plugin check FAILED")
    assert result["healthy"] is False
    assert errors(result) == expected_errors(cluster)
    assert all(n["host"] is None for n in result["nodes"])


def test_role_with_retries_on_an_unhealthy_fleet_reports_and_fails_only_without_report_only(
    cluster: LocalCluster, tmp_path: Path
):
    retries = {"device_plugin_check_retries": 2, "device_plugin_check_delay": 1}

    report_only = {**retries, "device_plugin_check_report_only": True}
    rc, result, report, failures = run_playbook(cluster, tmp_path, {}, report_only, tmp_path)
    assert rc == 0, report
    assert failures == []
    assert result["attempts"] == 3, "the fleet stays unhealthy, so every retry ran"
    assert result["healthy"] is False
    assert report.startswith("GPU device plugin check FAILED")
    assert errors(result) == expected_errors(cluster)

    rc, result, report, failures = run_playbook(cluster, tmp_path, {}, retries, tmp_path)
    assert rc != 0
    assert result["attempts"] == 3 and not result.get("failed"), "the check itself must not fail, the assert does"
    assert report.startswith("GPU device plugin check FAILED")
    assert failures == [
        f"GPU device plugin check failed with {len(expected_errors(cluster))} error(s): "
        "the report above says which node, what is wrong and what to do"
    ]
