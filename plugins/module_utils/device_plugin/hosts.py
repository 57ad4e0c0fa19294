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
    found,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.nodes import why_no_plugin_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import gpu_count_of
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.device_plugin import REQUIRED
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import MIG_RESOURCE_PATTERN
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    positive_int,
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
    """The case of host_facts_failed that the registered result is, if it is one of a failed task."""
    if result.get("unreachable"):
        return "unreachable"
    if result.get("failed"):
        return ""
    if result.get("skipped"):
        return "skipped"
    return None


def driver_findings(subject: str, node: str, facts: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not facts.get("driver_found"):
        looked = ", ".join(str(x) for x in as_list(facts.get("looked_for"))) or "nvidia-smi, the kernel module"
        return [found(KIND_DRIVER_MISSING, subject, node, looked=looked)]
    if facts.get("driver_working"):
        return []
    smi = as_mapping(facts.get("nvidia_smi"))
    version = as_text(facts.get("driver_version")) or "unknown version"
    error = as_text(smi.get("error")) or "no output"
    case = "" if smi.get("path") else "not_found"
    return [found(KIND_NVIDIA_SMI_FAILED, subject, node, case, version=version, error=error)]


def gpu_count_findings(
    subject: str, node: Mapping[str, Any], facts: Mapping[str, Any], options: FleetOptions
) -> list[dict[str, Any]]:
    host_count = positive_int(facts.get("gpu_count"))
    capacity = gpu_count_of(node, "capacity", options)
    uses_mig = any(r.startswith(MIG_RESOURCE_PATTERN.rstrip("*")) for r in node["capacity"])
    if not facts.get("driver_working") or capacity == 0 or capacity == host_count or uses_mig:
        return []
    case = "" if capacity < host_count else "shared"
    counts = {"host_count": host_count, "resource": options.primary_resource, "capacity": capacity}
    return [found(KIND_HOST_GPU_COUNT_MISMATCH, subject, node["name"], case, **counts)]


def _config_kind(config: Mapping[str, Any]) -> str | None:
    """What is wrong with one toolkit config file that exists, if anything."""
    if config.get("error"):
        return KIND_TOOLKIT_CONFIG_UNREADABLE
    if config.get("envvar_when_unprivileged") is not False:
        return KIND_ENVVAR_ACCEPTED
    if config.get("volume_mounts") is not True:
        return KIND_VOLUME_MOUNTS_OFF
    return None


def hardening_findings(
    subject: str, node: str, facts: Mapping[str, Any], require_hardening: bool
) -> list[dict[str, Any]]:
    case = REQUIRED if require_hardening else ""
    configs = [as_mapping(c) for c in as_list(as_mapping(facts.get("toolkit")).get("configs"))]
    present = [c for c in configs if c.get("exists")]
    if not present:
        looked = ", ".join(as_text(c.get("path")) for c in configs) or "the default paths"
        return [found(KIND_TOOLKIT_CONFIG_MISSING, subject, node, case, looked=looked)]
    findings = []
    for config in present:
        kind = _config_kind(config)
        if kind is not None:
            path = as_text(config.get("path"))
            findings.append(found(kind, subject, node, case, path=path, error=config.get("error")))
    return findings


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
    if failure is not None or facts is None:
        case = "not_facts" if failure is None else failure
        message = as_text(result.get("msg")) or ("no answer" if failure == "unreachable" else "no message")
        return [found(KIND_HOST_FACTS_FAILED, subject, node, case, msg=message)]
    findings = driver_findings(subject, node, facts)
    findings += hardening_findings(subject, node, facts, require_hardening)
    if node_name is None:
        return findings + [found(KIND_HOST_NOT_A_NODE, subject, node)]
    if node_name in context.node_summaries:
        context.node_summaries[node_name]["host"] = host_summary(host, facts)
        findings += gpu_count_findings(subject, context.nodes[node_name], facts, context.options)
    elif positive_int(facts.get("gpu_count")):
        why = why_no_plugin_pod(context.nodes[node_name], context.daemonsets, context.static_pods_seen)
        fields = {"gpu_count": facts["gpu_count"], "resource": context.options.primary_resource, "why": why}
        findings.append(found(KIND_HOST_GPUS_NOT_ADVERTISED, subject, node, **fields))
    return findings


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
