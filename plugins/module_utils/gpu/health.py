# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How healthy a GPU node is, judged from what the node list, the pod list and the DRA objects
already say of it: the health signals of the table (gpu/health_table.py), GPUs the device plugin
withdrew (capacity above allocatable), fewer GPUs than expected, a plugin pod that is not Ready,
and DRA devices tainted by their slice or a DeviceTaintRule.

Pure: the verdict is the worst severity among the node's problems, each problem a kind (declared
with its texts in findings/kinds/health.py), its severity and the fields its texts are written with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dcgm_signals import METRIC_KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    keeps_pods_away,
    taint_text,
    tainted_device_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import (
    DEGRADED,
    FAILED,
    HEALTH_STATUSES,
    HEALTHY,
    HealthTable,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import count_label

GPU_HEALTH_CONDITION = "gpu_health_condition"
GPU_HEALTH_TAINT = "gpu_health_taint"
GPUS_WITHDRAWN = "gpus_withdrawn"
GPUS_BELOW_EXPECTED = "gpus_below_expected"
GPU_PLUGIN_NOT_READY = "gpu_plugin_not_ready"
GPU_DEVICES_TAINTED = "gpu_devices_tainted"
HEALTH_KINDS = (
    GPU_HEALTH_CONDITION,
    GPU_HEALTH_TAINT,
    GPUS_WITHDRAWN,
    GPUS_BELOW_EXPECTED,
    GPU_PLUGIN_NOT_READY,
    GPU_DEVICES_TAINTED,
    *METRIC_KINDS,
)
DEVICE_PLUGIN = "device plugin"
DRA_KUBELET_PLUGIN = "DRA kubelet plugin"


@dataclass(frozen=True)
class HealthProblem:
    kind: str
    severity: str  # the health status it gives the node: degraded, failed, or unknown
    fields: Mapping[str, Any] = field(default_factory=dict)


def worst(severities: Sequence[str]) -> str:
    """The worst of the severities, healthy when there are none."""
    return max(severities, key=HEALTH_STATUSES.index, default=HEALTHY)


def signal_problems(node: Mapping[str, Any], table: HealthTable) -> Iterator[HealthProblem]:
    """The table's conditions at their bad status, and the table's taints, on the node."""
    for condition in node.get("conditions", ()):
        signal = table.conditions.get(condition["type"])
        if signal is not None and condition["status"] == signal.bad_status:
            fields = {
                "condition": condition["type"],
                "status": condition["status"],
                "reason": condition.get("reason") or "no reason given",
                "message": condition.get("message") or "no message",
                "producer": signal.producer,
            }
            yield HealthProblem(GPU_HEALTH_CONDITION, signal.severity, fields)
    for taint in node.get("taints", ()):
        signal = table.taints.get(taint["key"])
        if signal is not None:
            yield HealthProblem(
                GPU_HEALTH_TAINT, signal.severity, {"taint": taint_text(taint), "producer": signal.producer}
            )


def withdrawn_problems(resources: Mapping[str, Mapping[str, int]]) -> Iterator[HealthProblem]:
    """Per GPU resource of the device plugin, GPUs registered but not allocatable: failed when none is left."""
    for name, counts in sorted(resources.items()):
        withdrawn = counts["capacity"] - counts["allocatable"]
        if withdrawn > 0:
            severity = FAILED if counts["allocatable"] <= 0 else DEGRADED
            fields = {"resource": name, "withdrawn": withdrawn, **{k: counts[k] for k in ("capacity", "allocatable")}}
            yield HealthProblem(GPUS_WITHDRAWN, severity, fields)


def expected_gpus(facts: Mapping[str, Any], labels: Mapping[str, str], table: HealthTable) -> tuple[int, str] | None:
    """The GPUs the node should have and who says so: the option's count for its model, else its count label."""
    for model in (facts.get("model"), facts.get("model_label_value")):
        if model and model in table.expected_gpus:
            return table.expected_gpus[model], f"health.expected_gpus for {model}"
    found = count_label(labels)
    return (found[1], f"label {found[0]}") if found else None


def below_expected_problems(
    facts: Mapping[str, Any], labels: Mapping[str, str], table: HealthTable
) -> Iterator[HealthProblem]:
    expected = expected_gpus(facts, labels, table)
    if expected is not None and facts["capacity"] < expected[0]:
        severity = FAILED if facts["capacity"] <= 0 else DEGRADED
        fields = {"expected": expected[0], "expected_source": expected[1], "capacity": facts["capacity"]}
        yield HealthProblem(GPUS_BELOW_EXPECTED, severity, fields)


def plugin_problems(facts: Mapping[str, Any]) -> Iterator[HealthProblem]:
    """A plugin pod on the node, none of them Ready: the kubelet cannot hand out its GPUs."""
    dra = facts.get("dra") or {}
    for plugin, pods, ready in (
        (DEVICE_PLUGIN, facts.get("device_plugin_pods") or [], facts.get("device_plugin_ready")),
        (DRA_KUBELET_PLUGIN, dra.get("kubelet_plugin_pods") or [], dra.get("kubelet_plugin_ready")),
    ):
        if pods and not ready:
            yield HealthProblem(GPU_PLUGIN_NOT_READY, FAILED, {"plugin": plugin, "pods": ", ".join(pods)})


def device_health(device: Mapping[str, Any]) -> str:
    """A DRA device: failed when a taint keeps pods away, degraded when its taints only report (effect None)."""
    if keeps_pods_away(device):
        return FAILED
    return DEGRADED if device["taints"] else HEALTHY


def device_problems(devices: Sequence[Mapping[str, Any]], dra_counts: Mapping[str, int]) -> Iterator[HealthProblem]:
    """DRA devices with a taint (NoSchedule, NoExecute, or None that only reports): degraded, failed when no
    GPU of the node's devices is left allocatable."""
    tainted = [d for d in devices if d.get("taints")]
    if not tainted:
        return
    unhealthy = [tainted_device_text(d) for d in tainted]
    none_left = dra_counts.get("capacity", 0) > 0 and dra_counts.get("allocatable", 0) <= 0
    yield HealthProblem(
        GPU_DEVICES_TAINTED, FAILED if none_left else DEGRADED, {"count": len(tainted), "devices": "; ".join(unhealthy)}
    )


def judge_node(node: Mapping[str, Any], facts: Mapping[str, Any], table: HealthTable) -> list[HealthProblem]:
    """The health problems of one GPU node: ``node`` as gpu/nodes.py projects it (labels, taints, the
    table's conditions), ``facts`` the node's GPU facts (resources, capacity, model, plugin pods and
    DRA devices, with every tainted device listed, as fleet/facts.py gives them)."""
    dra = facts.get("dra") or {}
    return [
        *signal_problems(node, table),
        *withdrawn_problems(facts.get("resources") or {}),
        *below_expected_problems(facts, node.get("labels") or {}, table),
        *plugin_problems(facts),
        *device_problems(dra.get("devices") or [], (facts.get("by_source") or {}).get("dra") or {}),
    ]
