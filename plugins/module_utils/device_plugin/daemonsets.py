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
    finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING
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
    problem = f"selects no node (0 pods desired) while {len(gpu_nodes)} node(s) look like GPU nodes"
    if not unserved:
        return finding(
            INFO,
            KIND_DAEMONSET_SELECTS_NO_NODE,
            subject,
            problem + ", all of them served by another plugin pod",
            "nothing to do when it is meant for other nodes (as GKE's DaemonSets per machine type); delete it if unused",
        )
    nodes_by_mismatch: dict[Mismatch, list[str]] = defaultdict(list)
    for node in unserved:
        for mismatch in placement_mismatches(node, daemonset["placement"]):
            nodes_by_mismatch[mismatch].append(node["name"])
    if not nodes_by_mismatch:
        remedy = (
            "check its nodeSelector/affinity against the GPU nodes' labels: they match, so the DaemonSet controller "
            f"has not placed its pods yet; {describe_command(daemonset)} shows why"
        )
        return finding(ERROR, KIND_DAEMONSET_SELECTS_NO_NODE, subject, problem, remedy)
    reasons = "; ".join(f"{m.text} ({len(nodes)} GPU node(s) lack it)" for m, nodes in nodes_by_mismatch.items())
    fixes = [
        fix for m, nodes in nodes_by_mismatch.items() for fix in mismatch_fixes([m], nodes, namespaced_name(daemonset))
    ]
    remedy = f"check its nodeSelector/affinity against the GPU nodes' labels: {reasons}. Fix: {'; '.join(fixes)}"
    return finding(ERROR, KIND_DAEMONSET_SELECTS_NO_NODE, subject, problem, remedy)


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
    describe = describe_command(daemonset)
    found = []
    generation, observed = daemonset["generation"], daemonset["observed_generation"]
    if generation is not None and (observed is None or observed < generation):
        found.append(
            finding(
                ERROR,
                KIND_DAEMONSET_NOT_OBSERVED,
                subject,
                f"status is stale: generation {generation}, observed generation {observed if observed is not None else 'none'}",
                "the DaemonSet controller has not processed the latest spec yet: run the check again in a minute; "
                "if it stays, check that kube-controller-manager is running and healthy",
            )
        )
    desired = daemonset["desired"]
    if desired == 0:
        if gpu_nodes:
            found.append(_selects_no_node(daemonset, gpu_nodes, unserved))
        return found
    if daemonset["current"] != desired:
        found.append(
            finding(
                ERROR,
                KIND_DAEMONSET_NOT_SCHEDULED,
                subject,
                f"{daemonset['current']} of {desired} pods scheduled",
                f"{describe} shows why pods are not created (events); the per-node findings name the nodes",
            )
        )
    if daemonset["updated"] != desired:
        found.append(
            finding(
                ERROR,
                KIND_DAEMONSET_NOT_UPDATED,
                subject,
                f"rollout incomplete: {daemonset['updated']} of {desired} pods run the current template",
                f"wait for the rollout: kubectl -n {daemonset['namespace']} rollout status daemonset {daemonset['name']}; "
                "with updateStrategy OnDelete, delete the old pods so that they are recreated",
            )
        )
    if daemonset["ready"] != desired:
        found.append(
            finding(
                ERROR,
                KIND_DAEMONSET_NOT_READY,
                subject,
                f"{daemonset['ready']} of {desired} pods Ready",
                "see the per-node findings for the pods that are not Ready and read their logs",
            )
        )
    elif daemonset["available"] != desired:
        found.append(
            finding(
                WARNING,
                KIND_DAEMONSET_NOT_AVAILABLE,
                subject,
                f"{daemonset['available']} of {desired} pods available",
                "pods are Ready but not yet available (minReadySeconds): run the check again shortly",
            )
        )
    if daemonset["misscheduled"]:
        found.append(
            finding(
                ERROR,
                KIND_DAEMONSET_MISSCHEDULED,
                subject,
                f"{daemonset['misscheduled']} pod(s) run on nodes the DaemonSet no longer selects",
                f"the controller removes them; if they stay, {describe} and compare the nodes' labels and taints "
                "with its nodeSelector, affinity and tolerations",
            )
        )
    return found


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
