"""The health judge of one GPU node: every verdict, healthy, degraded and failed, from each signal."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import (
    DEVICE_PLUGIN,
    DRA_KUBELET_PLUGIN,
    GPU_DEVICES_TAINTED,
    GPU_HEALTH_CONDITION,
    GPU_HEALTH_TAINT,
    GPU_PLUGIN_NOT_READY,
    GPUS_BELOW_EXPECTED,
    GPUS_WITHDRAWN,
    device_health,
    judge_node,
    worst,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import (
    BUILTIN_TABLE,
    DEGRADED,
    FAILED,
    HEALTHY,
    health_table_from_option,
)


def compact(conditions=(), taints=(), labels=None):
    return {"conditions": tuple(conditions), "taints": list(taints), "labels": labels or {}}


def gpu_facts(
    capacity=8, allocatable=None, model="NVIDIA-H100-80GB-HBM3", plugin_pods=("kube-system/dp-a",), ready=True
):
    allocatable = capacity if allocatable is None else allocatable
    return {
        "model": model,
        "model_label_value": model,
        "capacity": capacity,
        "resources": {"nvidia.com/gpu": {"capacity": capacity, "allocatable": allocatable, "allocated": 0}},
        "device_plugin_pods": list(plugin_pods),
        "device_plugin_ready": ready,
        "by_source": {"dra": {"capacity": 0, "allocatable": 0, "allocated": 0, "free": 0}},
        "dra": {"kubelet_plugin_pods": [], "kubelet_plugin_ready": False, "devices": []},
    }


def dra_facts(devices, capacity, allocatable, plugin_pods=("dra/kp-a",), ready=True):
    facts = gpu_facts(capacity=0, plugin_pods=())
    facts["capacity"] = capacity
    facts["resources"] = {}
    facts["by_source"]["dra"] = {"capacity": capacity, "allocatable": allocatable, "allocated": 0, "free": 0}
    facts["dra"] = {"kubelet_plugin_pods": list(plugin_pods), "kubelet_plugin_ready": ready, "devices": devices}
    return facts


def device(name, *effects):
    return {"name": name, "taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": e} for e in effects]}


def verdict(node, facts, table=BUILTIN_TABLE):
    problems = judge_node(node, facts, table)
    return worst([p.severity for p in problems]), [(p.kind, p.severity) for p in problems], problems


def condition(kind, status, reason="", message=""):
    return {"type": kind, "status": status, "reason": reason, "message": message}


def test_a_node_with_nothing_wrong_is_healthy():
    status, problems = verdict(
        compact([condition("AcceleratedHardwareReady", "True"), condition("XidCriticalError", "False")]), gpu_facts()
    )[:2]
    assert (status, problems) == (HEALTHY, [])


@pytest.mark.parametrize(
    "kind, status",
    [
        ("AcceleratedHardwareReady", "False"),
        ("XidCriticalError", "True"),
        ("GpuMemWatch", "True"),
        ("SysLogsXIDError", "True"),
    ],
)
def test_a_producers_condition_at_its_bad_status_fails_the_node(kind, status):
    node = compact([condition(kind, status, "NvidiaXID79Error", "GPU fell off the bus")])
    result, problems, found = verdict(node, gpu_facts())
    assert (result, problems) == (FAILED, [(GPU_HEALTH_CONDITION, FAILED)])
    assert found[0].fields["condition"] == kind
    assert found[0].fields["reason"] == "NvidiaXID79Error"
    assert found[0].fields["message"] == "GPU fell off the bus"


def test_a_condition_the_table_does_not_know_or_at_its_good_status_is_no_problem():
    node = compact([condition("GpuMemWatch", "False"), condition("AcceleratedHardwareReady", "Unknown")])
    assert verdict(node, gpu_facts())[:2] == (HEALTHY, [])
    assert verdict(compact([condition("MyGpuBroken", "True")]), gpu_facts())[:2] == (HEALTHY, [])


def test_a_user_row_with_severity_degraded_degrades_the_node():
    table = health_table_from_option({"signals": [{"condition": "MyGpuBroken", "severity": "degraded"}]})
    node = compact([condition("MyGpuBroken", "True")])
    assert verdict(node, gpu_facts(), table)[:2] == (DEGRADED, [(GPU_HEALTH_CONDITION, DEGRADED)])


def test_a_producers_taint_fails_the_node_whatever_its_effect():
    node = compact(taints=[{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "PreferNoSchedule"}])
    status, problems, found = verdict(node, gpu_facts())
    assert (status, problems) == (FAILED, [(GPU_HEALTH_TAINT, FAILED)])
    assert found[0].fields == {
        "taint": "nvidia.com/gpu-xid-error=true:PreferNoSchedule",
        "producer": "NVIDIA NVSentinel",
    }
    other = compact(taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert verdict(other, gpu_facts())[:2] == (HEALTHY, [])


@pytest.mark.parametrize(
    ("key", "effect"), [("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")]
)
def test_a_node_whose_kubelet_is_not_ready_or_unreachable_is_failed(key, effect):
    """The node lifecycle controller's taints for Ready False or Unknown: the node's GPUs take no work."""
    status, problems, found = verdict(compact(taints=[{"key": key, "effect": effect}]), gpu_facts())
    assert (status, problems) == (FAILED, [(GPU_HEALTH_TAINT, FAILED)])
    assert found[0].fields == {"taint": f"{key}:{effect}", "producer": "Kubernetes node lifecycle controller"}


def test_some_gpus_withdrawn_degrade_and_all_withdrawn_fail():
    status, problems, found = verdict(compact(), gpu_facts(capacity=8, allocatable=5))
    assert (status, problems) == (DEGRADED, [(GPUS_WITHDRAWN, DEGRADED)])
    assert found[0].fields == {"resource": "nvidia.com/gpu", "withdrawn": 3, "capacity": 8, "allocatable": 5}
    assert verdict(compact(), gpu_facts(capacity=8, allocatable=0))[:2] == (FAILED, [(GPUS_WITHDRAWN, FAILED)])


def test_fewer_gpus_than_the_count_label_degrade_and_none_fail():
    labels = {"nvidia.com/gpu.count": "8"}
    status, problems, found = verdict(compact(labels=labels), gpu_facts(capacity=6))
    assert (status, problems) == (DEGRADED, [(GPUS_BELOW_EXPECTED, DEGRADED)])
    assert found[0].fields == {"expected": 8, "expected_source": "label nvidia.com/gpu.count", "capacity": 6}
    assert verdict(compact(labels=labels), gpu_facts(capacity=8))[:2] == (HEALTHY, [])
    assert verdict(compact(labels=labels), gpu_facts(capacity=12))[:2] == (HEALTHY, [])
    none_left = verdict(compact(labels=labels), gpu_facts(capacity=0, plugin_pods=()))
    assert none_left[:2] == (FAILED, [(GPUS_BELOW_EXPECTED, FAILED)])


def test_the_per_model_expectation_beats_the_count_label():
    table = health_table_from_option({"expected_gpus": {"NVIDIA-H100-80GB-HBM3": 8}})
    labels = {"nvidia.com/gpu.count": "7"}
    status, problems, found = verdict(compact(labels=labels), gpu_facts(capacity=7), table)
    assert (status, problems) == (DEGRADED, [(GPUS_BELOW_EXPECTED, DEGRADED)])
    assert found[0].fields["expected_source"] == "health.expected_gpus for NVIDIA-H100-80GB-HBM3"
    other_model = gpu_facts(capacity=7, model="Tesla-T4")
    assert verdict(compact(labels=labels), other_model, table)[:2] == (HEALTHY, [])


def test_a_device_plugin_pod_not_ready_fails_the_node_and_a_missing_one_is_not_judged_here():
    status, problems, found = verdict(compact(), gpu_facts(ready=False))
    assert (status, problems) == (FAILED, [(GPU_PLUGIN_NOT_READY, FAILED)])
    assert found[0].fields == {"plugin": DEVICE_PLUGIN, "pods": "kube-system/dp-a"}
    assert verdict(compact(), gpu_facts(plugin_pods=()))[:2] == (HEALTHY, [])


def test_a_dra_kubelet_plugin_not_ready_fails_the_node():
    facts = dra_facts([device("gpu-0")], capacity=1, allocatable=1, ready=False)
    status, problems, found = verdict(compact(), facts)
    assert (status, problems) == (FAILED, [(GPU_PLUGIN_NOT_READY, FAILED)])
    assert found[0].fields["plugin"] == DRA_KUBELET_PLUGIN


def test_one_tainted_dra_device_degrades_and_all_tainted_fail():
    devices = [device("gpu-0", "NoExecute"), device("gpu-1")]
    status, problems, found = verdict(compact(), dra_facts(devices, capacity=2, allocatable=1))
    assert (status, problems) == (DEGRADED, [(GPU_DEVICES_TAINTED, DEGRADED)])
    assert found[0].fields == {"count": 1, "devices": "gpu-0 (gpu.nvidia.com/xid=79:NoExecute)"}
    every = [device("gpu-0", "NoSchedule"), device("gpu-1", "NoExecute")]
    assert verdict(compact(), dra_facts(every, capacity=2, allocatable=0))[:2] == (
        FAILED,
        [(GPU_DEVICES_TAINTED, FAILED)],
    )


def test_a_taint_that_only_reports_degrades_the_node_and_its_device():
    devices = [device("gpu-0", "None")]
    assert verdict(compact(), dra_facts(devices, capacity=1, allocatable=1))[:2] == (
        DEGRADED,
        [(GPU_DEVICES_TAINTED, DEGRADED)],
    )
    assert device_health(device("gpu-0", "None")) == DEGRADED
    assert device_health(device("gpu-0", "NoExecute", "None")) == FAILED
    assert device_health(device("gpu-0")) == HEALTHY


def test_the_node_takes_the_worst_of_its_problems():
    node = compact([condition("XidCriticalError", "True")], labels={"nvidia.com/gpu.count": "8"})
    status, problems = verdict(node, gpu_facts(capacity=8, allocatable=6))[:2]
    assert status == FAILED
    assert problems == [(GPU_HEALTH_CONDITION, FAILED), (GPUS_WITHDRAWN, DEGRADED)]
    assert worst([]) == HEALTHY
    assert worst([DEGRADED, HEALTHY]) == DEGRADED
