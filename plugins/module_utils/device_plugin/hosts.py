# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts on each GPU host, from gpu_host_facts results: the driver, the GPU count and the
NVIDIA container toolkit's hardening."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_DRIVER_MISSING,
    KIND_ENVVAR_ACCEPTED,
    KIND_HOST_FACTS_FAILED,
    KIND_HOST_GPU_COUNT_MISMATCH,
    KIND_HOST_GPUS_NOT_ADVERTISED,
    KIND_HOST_NOT_A_NODE,
    KIND_NVIDIA_SMI_FAILED,
    KIND_TOOLKIT_CONFIG_MISSING,
    KIND_TOOLKIT_CONFIG_UNREADABLE,
    KIND_VOLUME_MOUNTS_OFF,
    finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.nodes import why_no_plugin_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import gpu_count_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import MIG_RESOURCE_PATTERN
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import ENVVAR_KEY, VOLUME_MOUNTS_KEY
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    positive_int,
)

_HARDENING_REMEDY = (
    f"set {ENVVAR_KEY} = false and {VOLUME_MOUNTS_KEY} = true in the toolkit's config.toml, and run "
    "the device plugin with DEVICE_LIST_STRATEGY=volume-mounts (Helm: --set deviceListStrategy=volume-mounts; "
    "GPU Operator: toolkit env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false and device plugin env "
    "DEVICE_LIST_STRATEGY=volume-mounts), so that only GPUs the scheduler assigned reach a container"
)


@dataclass(frozen=True)
class HostContext:
    """What the host verdicts compare a host's facts with."""

    nodes: Mapping[str, Mapping[str, Any]]
    node_summaries: Mapping[str, dict[str, Any]]
    daemonsets: Sequence[Mapping[str, Any]]
    static_pods_seen: bool
    options: FleetOptions


def node_for_host(host: str, node_names: Iterable[str]) -> str | None:
    """The node named as the host, or else the one node with the same first DNS label."""
    names = list(node_names)
    if host in names:
        return host
    short = host.split(".", 1)[0]
    candidates = [n for n in names if n.split(".", 1)[0] == short]
    return candidates[0] if len(candidates) == 1 else None


def host_facts_of(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The gpu_host_facts return values in a registered task result (or its ansible_facts.gpu_host)."""
    if "driver_found" in result:
        return result
    facts = as_mapping(as_mapping(result.get("ansible_facts")).get("gpu_host"))
    return facts if "driver_found" in facts else None


def _task_failure(result: Mapping[str, Any]) -> str | None:
    if result.get("unreachable"):
        return f"host unreachable: {as_text(result.get('msg')) or 'no answer'}"
    if result.get("failed"):
        return f"gpu_host_facts failed: {as_text(result.get('msg')) or 'no message'}"
    if result.get("skipped"):
        return "gpu_host_facts was skipped on this host"
    return None


def driver_findings(subject: str, node: str, facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not facts.get("driver_found"):
        looked = ", ".join(str(x) for x in as_list(facts.get("looked_for"))) or "nvidia-smi, the kernel module"
        return [
            finding(
                ERROR,
                KIND_DRIVER_MISSING,
                subject,
                f"no NVIDIA driver found (looked for {looked})",
                "install the driver: on ACK a GPU node pool installs it (pin a version with the node-pool label "
                "ack.aliyun.com/nvidia-driver-version, or follow ACK's custom driver guide); with the GPU Operator "
                "check the nvidia-driver-daemonset pod on this node; elsewhere install NVIDIA's driver for the running "
                "kernel and load it (modprobe nvidia, or reboot)",
                node,
            )
        ]
    if facts.get("driver_working"):
        return []
    smi = as_mapping(facts.get("nvidia_smi"))
    version = as_text(facts.get("driver_version")) or "unknown version"
    if not smi.get("path"):
        problem = f"the driver is present ({version}) but nvidia-smi was not found"
        remedy = (
            "install the driver's utilities (nvidia-smi), or give gpu_host_facts its path (nvidia_smi); "
            "the GPU Operator's containerized driver keeps it under /run/nvidia/driver"
        )
    else:
        problem = f"the driver is present ({version}) but nvidia-smi fails: {as_text(smi.get('error')) or 'no output'}"
        remedy = (
            'run nvidia-smi on the host: "couldn\'t communicate with the NVIDIA driver" means the loaded '
            "kernel module does not match the installed driver (reboot after a driver upgrade, or reinstall "
            "the driver for the running kernel); on ACK follow the driver upgrade guide for the node"
        )
    return [finding(ERROR, KIND_NVIDIA_SMI_FAILED, subject, problem, remedy, node)]


def gpu_count_findings(
    subject: str, node: Mapping[str, Any], facts: Mapping[str, Any], options: FleetOptions
) -> list[dict[str, Any]]:
    host_count = positive_int(facts.get("gpu_count"))
    capacity = gpu_count_of(node, "capacity", options)
    uses_mig = any(r.startswith(MIG_RESOURCE_PATTERN.rstrip("*")) for r in node["capacity"])
    if not facts.get("driver_working") or capacity == 0 or capacity == host_count or uses_mig:
        return []
    text = (
        f"nvidia-smi lists {host_count} GPU(s), node {node['name']} has {options.primary_resource} capacity {capacity}"
    )
    if capacity < host_count:
        return [
            finding(
                ERROR,
                KIND_HOST_GPU_COUNT_MISMATCH,
                subject,
                text,
                "the device plugin has not registered every GPU: read its log for devices it skipped, and restart "
                "the device-plugin pod on this node",
                node["name"],
            )
        ]
    return [
        finding(
            WARNING,
            KIND_HOST_GPU_COUNT_MISMATCH,
            subject,
            text,
            "the node advertises more GPUs than the host has: time-slicing or MPS sharing is on (nvidia.com/gpu.replicas), "
            "so pods that ask for a whole GPU share one; turn sharing off in the device plugin's config for exclusive "
            "scheduling",
            node["name"],
        )
    ]


def hardening_findings(
    subject: str, node: str, facts: Mapping[str, Any], require_hardening: bool
) -> list[dict[str, Any]]:
    severity = ERROR if require_hardening else WARNING
    configs = [as_mapping(c) for c in as_list(as_mapping(facts.get("toolkit")).get("configs"))]
    present = [c for c in configs if c.get("exists")]
    if not present:
        looked = ", ".join(as_text(c.get("path")) for c in configs) or "the default paths"
        return [
            finding(
                severity,
                KIND_TOOLKIT_CONFIG_MISSING,
                subject,
                f"no NVIDIA Container Toolkit config found ({looked}): its defaults let unprivileged pods take GPUs "
                "through NVIDIA_VISIBLE_DEVICES",
                f"create the config with the toolkit (nvidia-ctk config --in-place) and {_HARDENING_REMEDY}",
                node,
            )
        ]
    found = []
    for config in present:
        path = as_text(config.get("path"))
        if config.get("error"):
            found.append(
                finding(
                    severity,
                    KIND_TOOLKIT_CONFIG_UNREADABLE,
                    subject,
                    f"{path} cannot be read: {config['error']}",
                    f"fix the file, then {_HARDENING_REMEDY}",
                    node,
                )
            )
        elif config.get("envvar_when_unprivileged") is not False:
            found.append(
                finding(
                    severity,
                    KIND_ENVVAR_ACCEPTED,
                    subject,
                    f"{path}: {ENVVAR_KEY} is not false, so unprivileged pods can take any GPU through "
                    "NVIDIA_VISIBLE_DEVICES, outside the scheduler",
                    _HARDENING_REMEDY,
                    node,
                )
            )
        elif config.get("volume_mounts") is not True:
            found.append(
                finding(
                    severity,
                    KIND_VOLUME_MOUNTS_OFF,
                    subject,
                    f"{path}: {VOLUME_MOUNTS_KEY} is not true, so the device plugin cannot hand out GPUs "
                    "as volume mounts",
                    _HARDENING_REMEDY,
                    node,
                )
            )
    return found


def host_summary(host: str, facts: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "host": host,
        "driver_found": bool(facts.get("driver_found")),
        "driver_working": bool(facts.get("driver_working")),
        "driver_version": facts.get("driver_version"),
        "gpu_count": positive_int(facts.get("gpu_count")),
        "toolkit_hardened": as_mapping(facts.get("toolkit")).get("hardened"),
    }


def one_host_findings(
    host: str, result: Mapping[str, Any], context: HostContext, require_hardening: bool
) -> list[dict[str, Any]]:
    node_name = node_for_host(host, context.nodes)
    subject = f"host {host}" if node_name in (None, host) else f"host {host} (node {node_name})"
    node = node_name or host
    failure = _task_failure(result)
    facts = host_facts_of(result)
    if failure or facts is None:
        return [
            finding(
                ERROR,
                KIND_HOST_FACTS_FAILED,
                subject,
                failure or "not a gpu_host_facts result",
                "make the host reachable for Ansible (ansible -m ansible.builtin.ping <host>) and run "
                "kubegpu.scheduling.gpu_host_facts on it",
                node,
            )
        ]
    found = driver_findings(subject, node, facts)
    found += hardening_findings(subject, node, facts, require_hardening)
    if node_name is None:
        found.append(
            finding(
                WARNING,
                KIND_HOST_NOT_A_NODE,
                subject,
                "no node of this name in the cluster",
                "name the host in the inventory as its node is named (or by the same short name), or check that "
                "it joined the cluster (kubectl get nodes)",
                node,
            )
        )
        return found
    if node_name in context.node_summaries:
        context.node_summaries[node_name]["host"] = host_summary(host, facts)
        found += gpu_count_findings(subject, context.nodes[node_name], facts, context.options)
    elif positive_int(facts.get("gpu_count")):
        found.append(
            finding(
                ERROR,
                KIND_HOST_GPUS_NOT_ADVERTISED,
                subject,
                f"the host has {facts['gpu_count']} GPU(s), but node {node_name} has no GPU labels and no "
                f"{context.options.primary_resource} capacity",
                why_no_plugin_pod(context.nodes[node_name], context.daemonsets, context.static_pods_seen),
                node,
            )
        )
    return found


def host_verdicts(host_facts: object, context: HostContext, require_hardening: bool) -> list[dict[str, Any]]:
    """Driver, GPU count and toolkit hardening per host, from `{host: gpu_host_facts result}`."""
    if host_facts is None:
        return []
    if not isinstance(host_facts, Mapping):
        raise OptionError(
            f"host_facts must be a dictionary of host name to gpu_host_facts result, got {type(host_facts).__name__}"
        )
    found = []
    for host, result in sorted(host_facts.items(), key=lambda item: str(item[0])):
        if not isinstance(result, Mapping):
            raise OptionError(
                f"host_facts[{host!r}] must be a gpu_host_facts result (a dictionary), got {type(result).__name__}"
            )
        found += one_host_findings(str(host), result, context, require_hardening)
    return found
