# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts on a device-plugin DaemonSet: rollout, readiness, and the GPU nodes it misses."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_DAEMONSET_MISSCHEDULED,
    KIND_DAEMONSET_NOT_AVAILABLE,
    KIND_DAEMONSET_NOT_OBSERVED,
    KIND_DAEMONSET_NOT_READY,
    KIND_DAEMONSET_NOT_SCHEDULED,
    KIND_DAEMONSET_NOT_UPDATED,
    KIND_DAEMONSET_SELECTS_NO_NODE,
    found,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import Mismatch, placement_mismatches
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name


def mismatch_fixes(mismatches: Iterable[Mismatch], nodes: Sequence[str], daemonset: str) -> list[str]:
    """Commands or steps that make the DaemonSet select the nodes."""
    fixes: list[str] = []
    names = " ".join(nodes)
    for mismatch in mismatches:
        if mismatch.label:
            fixes.append(f"kubectl label node {names} {mismatch.label} --overwrite")
        elif mismatch.taint:
            fixes.append(
                f"add a toleration for {mismatch.taint} to the DaemonSet {daemonset}, "
                f"or remove the taint: kubectl taint node {names} {mismatch.taint_removal}"
            )
        else:
            fixes.append(f"label the node(s) to match one term of the DaemonSet {daemonset}'s node affinity")
    return list(dict.fromkeys(fixes))


def describe_command(daemonset: Mapping[str, Any]) -> str:
    return f"kubectl -n {daemonset['namespace']} describe daemonset {daemonset['name']}"


def _selects_no_node(
    daemonset: Mapping[str, Any], gpu_nodes: Sequence[Mapping[str, Any]], unserved: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    subject = f"DaemonSet {namespaced_name(daemonset)}"
    fields = {"gpu_nodes": len(gpu_nodes), "describe": describe_command(daemonset)}
    if not unserved:
        return found(KIND_DAEMONSET_SELECTS_NO_NODE, subject, case="served", **fields)
    nodes_by_mismatch: dict[Mismatch, list[str]] = defaultdict(list)
    for node in unserved:
        for mismatch in placement_mismatches(node, daemonset["placement"]):
            nodes_by_mismatch[mismatch].append(node["name"])
    if not nodes_by_mismatch:
        return found(KIND_DAEMONSET_SELECTS_NO_NODE, subject, case="matching", **fields)
    reasons = "; ".join(f"{m.text} ({len(nodes)} GPU node(s) lack it)" for m, nodes in nodes_by_mismatch.items())
    fixes = [
        fix for m, nodes in nodes_by_mismatch.items() for fix in mismatch_fixes([m], nodes, namespaced_name(daemonset))
    ]
    return found(KIND_DAEMONSET_SELECTS_NO_NODE, subject, reasons=reasons, fixes="; ".join(fixes), **fields)


def _status_kinds(daemonset: Mapping[str, Any]) -> list[str]:
    """The kinds of the DaemonSet's status that differ from what it desires (some pods desired)."""
    desired = daemonset["desired"]
    kinds = []
    if daemonset["current"] != desired:
        kinds.append(KIND_DAEMONSET_NOT_SCHEDULED)
    if daemonset["updated"] != desired:
        kinds.append(KIND_DAEMONSET_NOT_UPDATED)
    if daemonset["ready"] != desired:
        kinds.append(KIND_DAEMONSET_NOT_READY)
    elif daemonset["available"] != desired:
        kinds.append(KIND_DAEMONSET_NOT_AVAILABLE)
    if daemonset["misscheduled"]:
        kinds.append(KIND_DAEMONSET_MISSCHEDULED)
    return kinds


def daemonset_findings(
    daemonset: Mapping[str, Any],
    gpu_nodes: Sequence[Mapping[str, Any]],
    unserved: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """observedGeneration current, desired == current == updated == ready == available, none misscheduled.

    `unserved` are the GPU nodes without any plugin pod: a DaemonSet that selects no node fails
    when there are any, and is only noted when every GPU node is served by another deployment.
    """
    subject = f"DaemonSet {namespaced_name(daemonset)}"
    fields = {**daemonset, "describe": describe_command(daemonset)}
    findings = []
    generation, observed = daemonset["generation"], daemonset["observed_generation"]
    if generation is not None and (observed is None or observed < generation):
        observed_text = observed if observed is not None else "none"
        findings.append(found(KIND_DAEMONSET_NOT_OBSERVED, subject, **{**fields, "observed": observed_text}))
    if daemonset["desired"] == 0:
        if gpu_nodes:
            findings.append(_selects_no_node(daemonset, gpu_nodes, unserved))
        return findings
    return findings + [found(kind, subject, **fields) for kind in _status_kinds(daemonset)]


def daemonset_summary(daemonset: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    keys = (
        "namespace",
        "name",
        "deployment",
        "generation",
        "observed_generation",
        "desired",
        "current",
        "updated",
        "ready",
        "available",
        "misscheduled",
    )
    summary = {key: daemonset[key] for key in keys}
    summary["node_selector"] = daemonset["placement"]["node_selector"]
    summary["healthy"] = not any(f["severity"] == ERROR for f in findings)
    summary["problems"] = [f["kind"] for f in findings]
    return summary
