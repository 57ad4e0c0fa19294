# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts on the GPU device plugin and the driver: is every GPU node able to hand out its GPUs?

The verdicts are pure functions over plain dicts: the device-plugin DaemonSets (or ACK's static
pods), the plugin pod on every GPU node, the node's GPU capacity, and what `gpu_host_facts`
found on each GPU host. Each finding names the node (or object), what is wrong and what to do.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu_models import (
    COUNT_LABEL_KEYS,
    label_gpu_count,
    looks_like_gpu_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_facts import (
    MIG_RESOURCE_PATTERN,
    FactsOptionError,
    FleetOptions,
    options_from_params,
    parse_label_selector,
    project_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plain import as_list, as_mapping, as_text, string_map

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)

# A plugin pod restarting this often is unstable even when it is Ready right now.
RESTART_WARNING_THRESHOLD = 5

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
ACK_STATIC_MANIFEST = "/etc/kubernetes/manifests/nvidia-device-plugin.yml"
REGISTERED_LOG_LINE = "Registered device plugin for 'nvidia.com/gpu' with Kubelet"

# Taints the DaemonSet controller tolerates on every DaemonSet pod it creates.
DAEMONSET_TOLERATED_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
    }
)

KIND_NO_DEVICE_PLUGIN = "no_device_plugin_deployed"
KIND_DAEMONSET_MISSING = "daemonset_missing"
KIND_DAEMONSET_NOT_OBSERVED = "daemonset_generation_not_observed"
KIND_DAEMONSET_SELECTS_NO_NODE = "daemonset_selects_no_node"
KIND_DAEMONSET_NOT_SCHEDULED = "daemonset_pods_not_scheduled"
KIND_DAEMONSET_NOT_UPDATED = "daemonset_rollout_incomplete"
KIND_DAEMONSET_NOT_READY = "daemonset_pods_not_ready"
KIND_DAEMONSET_NOT_AVAILABLE = "daemonset_pods_not_available"
KIND_DAEMONSET_MISSCHEDULED = "daemonset_pods_misscheduled"
KIND_SEVERAL_DEPLOYMENTS = "several_device_plugin_deployments"
KIND_NO_GPU_NODES = "no_gpu_nodes"
KIND_NODE_NOT_READY = "node_not_ready"
KIND_NO_PLUGIN_POD = "no_device_plugin_pod"
KIND_SEVERAL_PLUGIN_PODS = "several_device_plugin_pods"
KIND_PLUGIN_NOT_READY = "device_plugin_not_ready"
KIND_PLUGIN_RESTARTING = "device_plugin_restarting"
KIND_NO_CAPACITY = "no_gpu_capacity"
KIND_UNHEALTHY_GPUS = "allocatable_below_capacity"
KIND_LABEL_COUNT_MISMATCH = "gpu_count_differs_from_labels"
KIND_HOST_FACTS_FAILED = "host_facts_failed"
KIND_HOST_NOT_A_NODE = "host_not_a_node"
KIND_HOST_GPUS_NOT_ADVERTISED = "host_gpus_not_advertised"
KIND_DRIVER_MISSING = "driver_not_found"
KIND_NVIDIA_SMI_FAILED = "nvidia_smi_failed"
KIND_HOST_GPU_COUNT_MISMATCH = "host_gpu_count_differs_from_capacity"
KIND_TOOLKIT_CONFIG_MISSING = "toolkit_config_not_found"
KIND_TOOLKIT_CONFIG_UNREADABLE = "toolkit_config_unreadable"
KIND_ENVVAR_ACCEPTED = "toolkit_accepts_visible_devices_env"
KIND_VOLUME_MOUNTS_OFF = "toolkit_volume_mounts_disabled"


class PluginCheckError(ValueError):
    """An option value the check cannot use; the message names the option."""


# --- plain-dict access ----------------------------------------------------------------------


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _optional_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(
        as_mapping(c).get("type") == kind and as_mapping(c).get("status") == "True"
        for c in as_list(status.get("conditions"))
    )


def finding(
    severity: str, kind: str, subject: str, problem: str, remedy: str, node: str | None = None
) -> dict[str, Any]:
    return {"severity": severity, "kind": kind, "node": node, "subject": subject, "problem": problem, "remedy": remedy}


# --- which deployment of the plugin ---------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    key: str
    title: str
    selector: str


NVIDIA_STATIC = Deployment("nvidia-static", "NVIDIA device plugin, static DaemonSet", "name=nvidia-device-plugin-ds")
NVIDIA_HELM = Deployment(
    "nvidia-helm", "NVIDIA device plugin, Helm chart", "app.kubernetes.io/name=nvidia-device-plugin"
)
GPU_OPERATOR = Deployment("gpu-operator", "NVIDIA GPU Operator", "app=nvidia-device-plugin-daemonset")
ACK_MANAGED = Deployment("ack-managed", "ACK ack-nvidia-device-plugin (DaemonSet)", "component=nvidia-device-plugin")
ACK_STATIC = Deployment("ack-static", f"ACK static pods ({ACK_STATIC_MANIFEST})", "component=nvidia-device-plugin")
GKE = Deployment("gke", "Google's nvidia-gpu-device-plugin (GKE, Kubespray)", "k8s-app=nvidia-gpu-device-plugin")
CUSTOM = Deployment("custom", "device plugin found by the given selectors", "")

DAEMONSET_DEPLOYMENTS: tuple[Deployment, ...] = (NVIDIA_STATIC, NVIDIA_HELM, GPU_OPERATOR, ACK_MANAGED, GKE)
DEPLOYMENTS_BY_KEY = {d.key: d for d in (*DAEMONSET_DEPLOYMENTS, ACK_STATIC, CUSTOM)}
_DEPLOYMENT_SELECTORS = tuple((d, parse_label_selector(d.selector)) for d in DAEMONSET_DEPLOYMENTS)


def deployment_of(labels: Mapping[str, str], static: bool = False) -> Deployment:
    """The known deployment whose pod labels these are (a static pod's can only be ACK's)."""
    for deployment, selector in _DEPLOYMENT_SELECTORS:
        if selector.matches(labels):
            return ACK_STATIC if static and deployment is ACK_MANAGED else deployment
    return CUSTOM


def is_static_pod(annotations: Mapping[str, str], owner_kinds: Iterable[str]) -> bool:
    """A mirror pod of a static pod the kubelet runs from a manifest file."""
    return (
        MIRROR_POD_ANNOTATION in annotations
        or annotations.get(CONFIG_SOURCE_ANNOTATION) == "file"
        or "Node" in owner_kinds
    )


# --- node placement: nodeSelector, required node affinity, taints ---------------------------


@dataclass(frozen=True)
class Mismatch:
    """One reason a DaemonSet places no pod on a node, with what fixes it where that is a label or a taint:
    `label` is the `key=value` to add, `taint` the taint to tolerate or remove (`key[=value]:effect`)."""

    text: str
    label: str | None = None
    taint: str | None = None
    taint_removal: str | None = None


def _expression(raw: object) -> dict[str, Any] | None:
    expression = as_mapping(raw)
    key, operator = expression.get("key"), expression.get("operator")
    if not isinstance(key, str) or not isinstance(operator, str):
        return None
    return {
        "key": key,
        "operator": operator,
        "values": [v for v in as_list(expression.get("values")) if isinstance(v, str)],
    }


def _affinity_terms(pod_spec: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    node_affinity = as_mapping(as_mapping(pod_spec.get("affinity")).get("nodeAffinity"))
    required = as_mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = []
    for term in map(as_mapping, as_list(required.get("nodeSelectorTerms"))):
        terms.append([e for e in map(_expression, as_list(term.get("matchExpressions"))) if e is not None])
    return terms


def _toleration(raw: object) -> dict[str, str]:
    toleration = as_mapping(raw)
    return {key: as_text(toleration.get(key)) for key in ("key", "operator", "value", "effect")}


def placement_of(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    """What decides which nodes a DaemonSet's pod template may run on."""
    return {
        "node_selector": string_map(pod_spec.get("nodeSelector")),
        "affinity_terms": _affinity_terms(pod_spec),
        "tolerations": [_toleration(t) for t in as_list(pod_spec.get("tolerations"))],
    }


def placement_label_keys(placements: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    keys: set[str] = set()
    for placement in placements:
        keys.update(placement["node_selector"])
        keys.update(e["key"] for term in placement["affinity_terms"] for e in term)
    return frozenset(keys)


def expression_met(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression["values"]
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and len(values) == 1 and values[0].lstrip("-").isdigit():
        current = labels.get(key, "")
        if not current.lstrip("-").isdigit():
            return False
        return int(current) > int(values[0]) if operator == "Gt" else int(current) < int(values[0])
    return False


def describe_expression(expression: Mapping[str, Any]) -> str:
    key, operator, values = expression["key"], expression["operator"], expression["values"]
    if operator == "In":
        return f"{key}={values[0]}" if len(values) == 1 else f"{key} in ({', '.join(values)})"
    if operator == "NotIn":
        return f"{key} notin ({', '.join(values)})"
    if operator == "Exists":
        return f"{key} (any value)"
    if operator == "DoesNotExist":
        return f"no label {key}"
    if operator in ("Gt", "Lt"):
        return f"{key} {'>' if operator == 'Gt' else '<'} {', '.join(values)}"
    return f"{key} {operator} {values}"


def _label_fix(expression: Mapping[str, Any]) -> str | None:
    if expression["operator"] == "In" and len(expression["values"]) == 1:
        return f"{expression['key']}={expression['values'][0]}"
    return None


def tolerates(toleration: Mapping[str, str], taint: Mapping[str, Any]) -> bool:
    """The scheduler's rule: effect and key must match unless empty; Exists ignores the value."""
    if toleration["effect"] and toleration["effect"] != taint.get("effect"):
        return False
    if toleration["key"] and toleration["key"] != taint.get("key"):
        return False
    if toleration["operator"] == "Exists":
        return True
    return toleration["value"] == (taint.get("value") or "")


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def untolerated_taints(
    taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, str]]
) -> list[Mapping[str, Any]]:
    """The taints that keep a DaemonSet's pod off a node."""
    return [
        taint
        for taint in taints
        if taint.get("effect") in ("NoSchedule", "NoExecute")
        and taint.get("key") not in DAEMONSET_TOLERATED_TAINT_KEYS
        and not any(tolerates(t, taint) for t in tolerations)
    ]


def _node_selector_mismatches(labels: Mapping[str, str], node_selector: Mapping[str, str]) -> list[Mismatch]:
    mismatches = []
    for key, value in sorted(node_selector.items()):
        if labels.get(key) == value:
            continue
        has = f" (the node has {key}={labels[key]})" if key in labels else ""
        mismatches.append(Mismatch(f"its nodeSelector requires {key}={value}{has}", label=f"{key}={value}"))
    return mismatches


def _term_met(term: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    # A node selector term without expressions selects no node.
    return bool(term) and all(expression_met(e, labels) for e in term)


def _affinity_mismatches(labels: Mapping[str, str], terms: Sequence[Sequence[Mapping[str, Any]]]) -> list[Mismatch]:
    """Required node affinity: the terms are alternatives, the expressions of a term all apply."""
    if not terms or any(_term_met(term, labels) for term in terms):
        return []
    if len(terms) == 1 and terms[0]:
        unmet = [e for e in terms[0] if not expression_met(e, labels)]
        fixes = [_label_fix(e) for e in unmet]
        label = " ".join(f for f in fixes if f) if all(fixes) else None
        return [Mismatch(f"its node affinity requires {' and '.join(map(describe_expression, unmet))}", label=label)]
    alternatives = " | ".join(" and ".join(map(describe_expression, term)) or "(an empty term)" for term in terms)
    return [Mismatch(f"its node affinity requires one of: {alternatives}")]


def placement_mismatches(node: Mapping[str, Any], placement: Mapping[str, Any]) -> list[Mismatch]:
    """Why a DaemonSet with this placement puts no pod on the node; empty when it selects it."""
    labels = node["labels"]
    mismatches = _node_selector_mismatches(labels, placement["node_selector"])
    mismatches += _affinity_mismatches(labels, placement["affinity_terms"])
    for taint in untolerated_taints(node["taints"], placement["tolerations"]):
        text = _taint_text(taint)
        removal = f"{taint.get('key')}:{taint.get('effect')}-"
        mismatches.append(Mismatch(f"it does not tolerate the node's taint {text}", taint=text, taint_removal=removal))
    return mismatches


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


# --- projections: keep only what the verdicts need ------------------------------------------


def selector_text(selector: object) -> str | None:
    """A metav1.LabelSelector as a selector string, or None when it selects nothing usable."""
    raw = as_mapping(selector)
    terms = [f"{k}={v}" for k, v in sorted(string_map(raw.get("matchLabels")).items())]
    for expression in filter(None, map(_expression, as_list(raw.get("matchExpressions")))):
        key, operator, values = expression["key"], expression["operator"], ",".join(expression["values"])
        terms.append(
            {
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
                "Exists": key,
                "DoesNotExist": f"!{key}",
            }.get(operator, "")
        )
    if not terms or not all(terms):
        return None
    return ",".join(terms)


def project_daemonset(daemonset: object) -> dict[str, Any] | None:
    """The fields of a DaemonSet the verdicts need, or None for something that is not one."""
    metadata = as_mapping(as_mapping(daemonset).get("metadata"))
    spec = as_mapping(as_mapping(daemonset).get("spec"))
    status = as_mapping(as_mapping(daemonset).get("status"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
        return None
    template = as_mapping(spec.get("template"))
    template_labels = string_map(as_mapping(template.get("metadata")).get("labels"))
    return {
        "namespace": namespace,
        "name": name,
        "deployment": deployment_of(template_labels).key,
        "labels": string_map(metadata.get("labels")),
        "template_labels": template_labels,
        "pod_selector": selector_text(spec.get("selector")),
        "generation": _optional_int(metadata.get("generation")),
        "observed_generation": _optional_int(status.get("observedGeneration")),
        "desired": _count(status.get("desiredNumberScheduled")),
        "current": _count(status.get("currentNumberScheduled")),
        "updated": _count(status.get("updatedNumberScheduled")),
        "ready": _count(status.get("numberReady")),
        "available": _count(status.get("numberAvailable")),
        "misscheduled": _count(status.get("numberMisscheduled")),
        "placement": placement_of(as_mapping(template.get("spec"))),
    }


def _first_problem_reason(status: Mapping[str, Any]) -> str | None:
    for container in map(
        as_mapping, as_list(status.get("initContainerStatuses")) + as_list(status.get("containerStatuses"))
    ):
        state = as_mapping(container.get("state"))
        for phase in ("waiting", "terminated"):
            reason = as_mapping(state.get(phase)).get("reason")
            if isinstance(reason, str) and reason:
                return reason
    reason = status.get("reason")
    return reason if isinstance(reason, str) and reason else None


def _restarts(status: Mapping[str, Any]) -> int:
    return sum(_count(as_mapping(c).get("restartCount")) for c in as_list(status.get("containerStatuses")))


def project_plugin_pod(pod: object) -> dict[str, Any] | None:
    """The fields of a device-plugin pod the verdicts need; None unless it is bound and not finished."""
    metadata = as_mapping(as_mapping(pod).get("metadata"))
    spec = as_mapping(as_mapping(pod).get("spec"))
    status = as_mapping(as_mapping(pod).get("status"))
    node, name = spec.get("nodeName"), metadata.get("name")
    if not isinstance(node, str) or not node or not isinstance(name, str) or not name:
        return None
    if status.get("phase") in ("Succeeded", "Failed"):
        return None
    owners = [as_mapping(o) for o in as_list(metadata.get("ownerReferences"))]
    static = is_static_pod(string_map(metadata.get("annotations")), (as_text(o.get("kind")) for o in owners))
    return {
        "namespace": as_text(metadata.get("namespace")),
        "name": name,
        "node": node,
        "ready": _condition_true(status, "Ready"),
        "phase": as_text(status.get("phase")) or "Unknown",
        "reason": _first_problem_reason(status),
        "restarts": _restarts(status),
        "static": static,
        "daemonset": next((as_text(o.get("name")) for o in owners if o.get("kind") == "DaemonSet"), None),
        "deployment": deployment_of(string_map(metadata.get("labels")), static).key,
    }


def gpu_count_of(node: Mapping[str, Any], field: str, options: FleetOptions) -> int:
    return sum(count for resource, count in node[field].items() if options.counts(resource))


def compact_node(node: object, options: FleetOptions, extra_label_keys: Iterable[str] = ()) -> dict[str, Any] | None:
    """node_facts' compact node, keeping also the labels the DaemonSets' placement reads."""
    compact = project_node(node, options)
    if compact is None:
        return None
    wanted = options.label_keys | frozenset(extra_label_keys)
    labels = string_map(as_mapping(as_mapping(node).get("metadata")).get("labels"))
    compact["labels"] = {k: v for k, v in labels.items() if k in wanted}
    return compact


def is_gpu_node(node: Mapping[str, Any], options: FleetOptions) -> bool:
    return looks_like_gpu_node(node["labels"], node["capacity"], options.counts, options.model_label_keys)


def pod_ref(pod: Mapping[str, Any]) -> str:
    return f"{pod['namespace']}/{pod['name']}"


def ds_ref(daemonset: Mapping[str, Any]) -> str:
    return f"{daemonset['namespace']}/{daemonset['name']}"


# --- DaemonSet verdicts -----------------------------------------------------------------------


def _describe_command(daemonset: Mapping[str, Any]) -> str:
    return f"kubectl -n {daemonset['namespace']} describe daemonset {daemonset['name']}"


def _selects_no_node(
    daemonset: Mapping[str, Any], gpu_nodes: Sequence[Mapping[str, Any]], unserved: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    subject = f"DaemonSet {ds_ref(daemonset)}"
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
            f"has not placed its pods yet; {_describe_command(daemonset)} shows why"
        )
        return finding(ERROR, KIND_DAEMONSET_SELECTS_NO_NODE, subject, problem, remedy)
    reasons = "; ".join(f"{m.text} ({len(nodes)} GPU node(s) lack it)" for m, nodes in nodes_by_mismatch.items())
    fixes = [fix for m, nodes in nodes_by_mismatch.items() for fix in mismatch_fixes([m], nodes, ds_ref(daemonset))]
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
    subject = f"DaemonSet {ds_ref(daemonset)}"
    describe = _describe_command(daemonset)
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


# --- per-node verdicts ------------------------------------------------------------------------


def restart_hint(pod: Mapping[str, Any]) -> str:
    if pod["static"]:
        return (
            f"restart the static pod: on the node move {ACK_STATIC_MANIFEST} out of /etc/kubernetes/manifests, "
            "wait until the pod is gone, and move it back"
        )
    return f"restart it: kubectl -n {pod['namespace']} delete pod {pod['name']}"


_DEPLOY_PLUGIN_REMEDY = (
    "deploy one: on ACK install the ack-nvidia-device-plugin component from the cluster's add-ons; "
    "elsewhere NVIDIA's device plugin (kubectl create -f "
    "https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/v0.17.0/deployments/static/nvidia-device-plugin.yml, "
    "or its Helm chart nvdp/nvidia-device-plugin) or the NVIDIA GPU Operator"
)


def _why_no_plugin_pod(node: Mapping[str, Any], daemonsets: Sequence[Mapping[str, Any]], static_pods_seen: bool) -> str:
    name = node["name"]
    excluded: list[str] = []
    for daemonset in daemonsets:
        mismatches = placement_mismatches(node, daemonset["placement"])
        if not mismatches:
            return (
                f"the DaemonSet {ds_ref(daemonset)} selects this node but has no running pod on it: "
                f"{_describe_command(daemonset)} (events) and "
                f"kubectl -n {daemonset['namespace']} get pods -o wide --field-selector spec.nodeName={name} show why"
            )
        reasons = "; ".join(m.text for m in mismatches)
        fixes = "; ".join(mismatch_fixes(mismatches, [name], ds_ref(daemonset)))
        excluded.append(f"the DaemonSet {ds_ref(daemonset)} does not select this node: {reasons}. Fix: {fixes}")
    if excluded:
        return " / ".join(excluded)
    if static_pods_seen:
        return (
            f"this cluster runs the plugin as ACK static pods, and this node has none: restore {ACK_STATIC_MANIFEST} "
            "on the node (as on its other GPU nodes), or install the ack-nvidia-device-plugin component "
            "and label the node ack.node.gpu.schedule=default"
        )
    return "no device plugin is deployed for this node: " + _DEPLOY_PLUGIN_REMEDY


def _pod_state(pod: Mapping[str, Any]) -> str:
    parts = [pod["phase"]]
    if pod["reason"]:
        parts.append(pod["reason"])
    if pod["restarts"]:
        parts.append(f"{pod['restarts']} restarts")
    return ", ".join(parts)


def _several_pods_remedy(pods: Sequence[Mapping[str, Any]]) -> str:
    if any(p["static"] for p in pods) and any(not p["static"] for p in pods):
        return (
            "ACK clusters upgraded to 1.32 can run both the static pod and the ack-nvidia-device-plugin DaemonSet: "
            f"on the node move {ACK_STATIC_MANIFEST} out of /etc/kubernetes/manifests so that only the DaemonSet's "
            "pod serves the GPUs"
        )
    owners = sorted({p["daemonset"] or pod_ref(p) for p in pods})
    return (
        f"two deployments of the device plugin serve the same GPUs ({', '.join(owners)}): keep one, and delete the "
        "other or change its nodeSelector so that it no longer selects this node"
    )


def plugin_pod_findings(
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    static_pods_seen: bool,
) -> list[dict[str, Any]]:
    """Exactly one device-plugin pod on the node, Ready and not restarting over and over."""
    name = node["name"]
    subject = f"node {name}"
    if not pods:
        return [
            finding(
                ERROR,
                KIND_NO_PLUGIN_POD,
                subject,
                "no device-plugin pod runs on this GPU node",
                _why_no_plugin_pod(node, daemonsets, static_pods_seen),
                name,
            )
        ]
    if len(pods) > 1:
        listed = ", ".join(f"{pod_ref(p)} ({'static' if p['static'] else p['deployment']})" for p in pods)
        return [
            finding(
                ERROR,
                KIND_SEVERAL_PLUGIN_PODS,
                subject,
                f"{len(pods)} device-plugin pods: {listed}",
                _several_pods_remedy(pods),
                name,
            )
        ]
    pod = pods[0]
    if not pod["ready"]:
        remedy = (
            f"read its log: kubectl -n {pod['namespace']} logs {pod['name']} (a healthy plugin logs "
            f'"{REGISTERED_LOG_LINE}"); check the driver on the node with nvidia-smi; '
            '"Failed to initialize NVML: Unknown Error" after systemctl daemon-reload (Ubuntu 22.04, RHEL 9.3) '
            f"goes away when the pod restarts; {restart_hint(pod)}"
        )
        return [
            finding(
                ERROR,
                KIND_PLUGIN_NOT_READY,
                subject,
                f"device-plugin pod {pod_ref(pod)} is not Ready ({_pod_state(pod)})",
                remedy,
                name,
            )
        ]
    if pod["restarts"] >= RESTART_WARNING_THRESHOLD:
        return [
            finding(
                WARNING,
                KIND_PLUGIN_RESTARTING,
                subject,
                f"device-plugin pod {pod_ref(pod)} has restarted {pod['restarts']} times",
                f"read the log of its previous run: kubectl -n {pod['namespace']} logs {pod['name']} --previous; "
                "repeated NVML or driver errors there point at the driver on the node (check nvidia-smi)",
                name,
            )
        ]
    return []


def capacity_findings(
    node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], options: FleetOptions
) -> list[dict[str, Any]]:
    """Capacity above zero, allocatable equal to capacity, and the count the labels state."""
    name, resource = node["name"], options.primary_resource
    plugin_ready = len(pods) == 1 and bool(pods[0]["ready"])
    restart = restart_hint(pods[0]) if len(pods) == 1 else "restart the device-plugin pod"
    subject = f"node {name}"
    capacity = gpu_count_of(node, "capacity", options)
    allocatable = gpu_count_of(node, "allocatable", options)
    if capacity == 0:
        if plugin_ready:
            remedy = (
                f"the plugin runs but has not registered GPUs with the kubelet: its log should show "
                f'"{REGISTERED_LOG_LINE}"; "No devices found" or NVML errors there mean the driver is not '
                "usable (check nvidia-smi on the node); right after a kubelet restart capacity stays 0 until the "
                "plugin registers again, so run the check again in a minute"
            )
        else:
            remedy = (
                "fix the device-plugin pod on this node first (see its finding); capacity appears once it registers"
            )
        return [finding(ERROR, KIND_NO_CAPACITY, subject, f"no {resource} capacity", remedy, name)]
    found = []
    if allocatable < capacity:
        found.append(
            finding(
                ERROR,
                KIND_UNHEALTHY_GPUS,
                subject,
                f"allocatable {allocatable} below capacity {capacity}: {capacity - allocatable} GPU(s) marked unhealthy",
                'the device plugin marks a GPU unhealthy after XID or ECC errors (its log: "XidCriticalError ... marking '
                'device as unhealthy"); find the GPU with nvidia-smi -q on the node (on ACK, ack-node-problem-detector '
                f"events name it) and repair or replace it; a GPU stays unhealthy until the plugin restarts, so then "
                f"{restart}",
                name,
            )
        )
    stated = label_gpu_count(node["labels"])
    uses_mig = any(r.startswith(MIG_RESOURCE_PATTERN.rstrip("*")) for r in node["capacity"])
    if stated is not None and stated != capacity and not uses_mig:
        key = next(k for k in COUNT_LABEL_KEYS if node["labels"].get(k, "").isdigit())
        found.append(
            finding(
                WARNING,
                KIND_LABEL_COUNT_MISMATCH,
                subject,
                f"labels state {stated} GPU(s) ({key}), capacity is {capacity}",
                "nvidia-smi -L on the node lists the GPUs the driver sees: a GPU missing there needs a hardware check; "
                f"if all are listed, the plugin has not registered them all: {restart}",
                name,
            )
        )
    return found


def node_findings(
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    static_pods_seen: bool,
    options: FleetOptions,
) -> list[dict[str, Any]]:
    found = []
    if not node["ready"]:
        found.append(
            finding(
                WARNING,
                KIND_NODE_NOT_READY,
                f"node {node['name']}",
                "node is not Ready",
                "its kubelet does not report: check it on the node (systemctl status kubelet; journalctl -u kubelet)",
                node["name"],
            )
        )
    found += plugin_pod_findings(node, pods, daemonsets, static_pods_seen)
    found += capacity_findings(node, pods, options)
    return found


def node_summary(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], options: FleetOptions) -> dict[str, Any]:
    return {
        "name": node["name"],
        "ready": node["ready"],
        "capacity": gpu_count_of(node, "capacity", options),
        "allocatable": gpu_count_of(node, "allocatable", options),
        "label_gpu_count": label_gpu_count(node["labels"]),
        "plugin_pods": [
            {
                "pod": pod_ref(p),
                "ready": p["ready"],
                "phase": p["phase"],
                "reason": p["reason"],
                "restarts": p["restarts"],
                "static": p["static"],
                "deployment": p["deployment"],
            }
            for p in pods
        ],
        "plugin_ready": len(pods) == 1 and pods[0]["ready"],
        "host": None,
        "healthy": True,
        "problems": [],
    }


# --- options --------------------------------------------------------------------------------

_DNS_NAME = re.compile(r"^[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class DaemonSetTarget:
    """A DaemonSet to check by name, or the DaemonSets a label selector finds (in a namespace or all)."""

    namespace: str | None
    name: str | None
    label_selector: str | None

    @property
    def text(self) -> str:
        if self.name:
            return f"DaemonSet {self.namespace}/{self.name}"
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"DaemonSets matching {self.label_selector!r}{where}"


def _optional_name(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _DNS_NAME.match(value) or len(value) > 253:
        raise PluginCheckError(f"{where}.{key}: {value!r} is not a valid Kubernetes name")
    return value


def daemonset_targets(value: object) -> list[DaemonSetTarget] | None:
    """The `daemonsets` option: None or an empty list means discover every known deployment."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise PluginCheckError(f"daemonsets must be a list of {{namespace, name}} or {{label_selector}}, got {value!r}")
    targets = []
    for index, raw in enumerate(value):
        where = f"daemonsets[{index}]"
        if not isinstance(raw, Mapping):
            raise PluginCheckError(f"{where} must be a dictionary, got {raw!r}")
        namespace, name = _optional_name(raw, "namespace", where), _optional_name(raw, "name", where)
        selector = raw.get("label_selector") or None
        if selector is not None:
            try:
                parse_label_selector(selector)
            except FactsOptionError as exc:
                raise PluginCheckError(f"{where}.label_selector: {exc}") from None
        if name and not namespace:
            raise PluginCheckError(f"{where}: name {name!r} needs a namespace")
        if name and selector:
            raise PluginCheckError(f"{where}: give either name or label_selector, not both")
        if not name and not selector:
            raise PluginCheckError(f"{where}: give a namespace and name, or a label_selector")
        targets.append(DaemonSetTarget(namespace, name, selector))
    return targets


def check_options(resource_name: object, device_plugin: object) -> FleetOptions:
    if not isinstance(resource_name, str) or not resource_name.strip():
        raise PluginCheckError(f"resource_name must be a non-empty string, got {resource_name!r}")
    try:
        return options_from_params(resource_names=[resource_name.strip()], device_plugin=device_plugin)
    except FactsOptionError as exc:
        raise PluginCheckError(str(exc)) from None


def plugin_pod_queries(options: FleetOptions, daemonsets: Iterable[Mapping[str, Any]]) -> list[tuple[str | None, str]]:
    """(namespace or None for all, label selector) pairs that find every plugin pod: one per configured
    selector (per configured namespace), and one per checked DaemonSet's own pod selector."""
    namespaces: list[str | None] = [*sorted(options.plugin_namespaces)] or [None]
    queries = [(namespace, s.text) for s in options.plugin_selectors for namespace in namespaces]
    queries += [
        (d["namespace"], d["pod_selector"])
        for d in daemonsets
        if d["pod_selector"] and (None, d["pod_selector"]) not in queries
    ]
    return list(dict.fromkeys(queries))


def is_plugin_daemonset(daemonset: Mapping[str, Any], options: FleetOptions) -> bool:
    """Whether a DaemonSet's pods are device-plugin pods, by the device_plugin selectors."""
    if options.plugin_namespaces and daemonset["namespace"] not in options.plugin_namespaces:
        return False
    return any(s.matches(daemonset["template_labels"]) for s in options.plugin_selectors)


def target_matches(target: DaemonSetTarget, daemonset: Mapping[str, Any]) -> bool:
    """A named DaemonSet, or one whose own labels or pod template labels match the selector."""
    if target.namespace and daemonset["namespace"] != target.namespace:
        return False
    if target.name:
        return bool(daemonset["name"] == target.name)
    selector = parse_label_selector(target.label_selector)
    return selector.matches(daemonset["labels"]) or selector.matches(daemonset["template_labels"])


def daemonset_list_namespaces(targets: Sequence[DaemonSetTarget] | None, options: FleetOptions) -> list[str] | None:
    """The namespaces to list DaemonSets in, or None for all of them."""
    if targets is None:
        return sorted(options.plugin_namespaces) or None
    if all(t.namespace for t in targets):
        return sorted({t.namespace for t in targets if t.namespace})
    return None


def select_daemonsets(
    daemonsets: Iterable[Mapping[str, Any]], targets: Sequence[DaemonSetTarget] | None, options: FleetOptions
) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """The DaemonSets to check, and a finding for each target that matched none."""
    listed = list(daemonsets)
    if targets is None:
        return [d for d in listed if is_plugin_daemonset(d, options)], []
    selected: dict[str, Mapping[str, Any]] = {}
    missing = []
    for target in targets:
        matched = [d for d in listed if target_matches(target, d)]
        if not matched:
            missing.append(missing_target_finding(target))
        selected.update((ds_ref(d), d) for d in matched)
    return list(selected.values()), missing


def missing_target_finding(target: DaemonSetTarget) -> dict[str, Any]:
    if target.name:
        problem, remedy = (
            "not found",
            (
                "deploy the device plugin there, or correct namespace and name in the daemonsets option "
                "(kubectl get daemonsets -A | grep -i device-plugin lists the candidates)"
            ),
        )
    else:
        problem, remedy = (
            "no DaemonSet found",
            (
                "check the selector against the DaemonSets' labels and pod template labels "
                "(kubectl get daemonsets -A --show-labels); "
                "leave the daemonsets option unset to find the known deployments by their pod labels"
            ),
        )
    return finding(ERROR, KIND_DAEMONSET_MISSING, target.text, problem, remedy)


# --- per-host verdicts: the driver and the toolkit, from gpu_host_facts results -----------------

TOOLKIT_ENVVAR_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
TOOLKIT_VOLUME_MOUNTS_KEY = "accept-nvidia-visible-devices-as-volume-mounts"
_HARDENING_REMEDY = (
    f"set {TOOLKIT_ENVVAR_KEY} = false and {TOOLKIT_VOLUME_MOUNTS_KEY} = true in the toolkit's config.toml, and run "
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
    host_count = _count(facts.get("gpu_count"))
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
                    f"{path}: {TOOLKIT_ENVVAR_KEY} is not false, so unprivileged pods can take any GPU through "
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
                    f"{path}: {TOOLKIT_VOLUME_MOUNTS_KEY} is not true, so the device plugin cannot hand out GPUs "
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
        "gpu_count": _count(facts.get("gpu_count")),
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
    elif _count(facts.get("gpu_count")):
        found.append(
            finding(
                ERROR,
                KIND_HOST_GPUS_NOT_ADVERTISED,
                subject,
                f"the host has {facts['gpu_count']} GPU(s), but node {node_name} has no GPU labels and no "
                f"{context.options.primary_resource} capacity",
                _why_no_plugin_pod(context.nodes[node_name], context.daemonsets, context.static_pods_seen),
                node,
            )
        )
    return found


def host_verdicts(host_facts: object, context: HostContext, require_hardening: bool) -> list[dict[str, Any]]:
    """Driver, GPU count and toolkit hardening per host, from `{host: gpu_host_facts result}`."""
    if host_facts is None:
        return []
    if not isinstance(host_facts, Mapping):
        raise PluginCheckError(
            f"host_facts must be a dictionary of host name to gpu_host_facts result, got {type(host_facts).__name__}"
        )
    found = []
    for host, result in sorted(host_facts.items(), key=lambda item: str(item[0])):
        if not isinstance(result, Mapping):
            raise PluginCheckError(
                f"host_facts[{host!r}] must be a gpu_host_facts result (a dictionary), got {type(result).__name__}"
            )
        found += one_host_findings(str(host), result, context, require_hardening)
    return found


# --- the whole verdict ----------------------------------------------------------------------

MAX_REPORTED_PER_KIND = 10


def _severity_rank(item: Mapping[str, Any]) -> int:
    return SEVERITIES.index(item["severity"]) if item["severity"] in SEVERITIES else len(SEVERITIES)


def _plugin_pods_by_node(plugin_pods: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    by_node: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in sorted(plugin_pods, key=pod_ref):
        by_node[pod["node"]].append(pod)
    return by_node


def deployments_found(
    daemonsets: Sequence[Mapping[str, Any]], plugin_pods: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Which deployments of the plugin run: by DaemonSet, plus ACK static pods."""
    found: dict[str, dict[str, Any]] = {}
    for daemonset in daemonsets:
        entry = found.setdefault(daemonset["deployment"], {"daemonsets": [], "static_pods": 0})
        entry["daemonsets"].append(ds_ref(daemonset))
    for pod in plugin_pods:
        if pod["static"]:
            found.setdefault(ACK_STATIC.key, {"daemonsets": [], "static_pods": 0})["static_pods"] += 1
    return [{"key": key, "title": DEPLOYMENTS_BY_KEY[key].title, **entry} for key, entry in sorted(found.items())]


def cluster_findings(
    gpu_nodes: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    plugin_pods: Sequence[Mapping[str, Any]],
    deployments: Sequence[Mapping[str, Any]],
    options: FleetOptions,
) -> list[dict[str, Any]]:
    found = []
    if not gpu_nodes:
        found.append(
            finding(
                INFO,
                KIND_NO_GPU_NODES,
                "cluster",
                f"no node looks like a GPU node (no GPU model or count labels, no {options.primary_resource} capacity)",
                "nothing to check on nodes; if GPU nodes were expected, check that they joined the cluster and carry "
                "their provider's GPU labels",
            )
        )
    elif not daemonsets and not plugin_pods:
        found.append(
            finding(
                ERROR,
                KIND_NO_DEVICE_PLUGIN,
                "cluster",
                f"no device plugin found ({len(gpu_nodes)} GPU node(s), no device-plugin DaemonSet or pod)",
                _DEPLOY_PLUGIN_REMEDY,
            )
        )
    if len(deployments) > 1:
        titles = "; ".join(
            f"{d['title']} ({', '.join(d['daemonsets']) or str(d['static_pods']) + ' pods'})" for d in deployments
        )
        found.append(
            finding(
                WARNING,
                KIND_SEVERAL_DEPLOYMENTS,
                "cluster",
                f"several deployments of the device plugin: {titles}",
                "keep one per node: two plugins on one node advertise the same GPUs twice (the per-node findings "
                "name any node that runs two)",
            )
        )
    return found


def evaluate(
    daemonsets: Sequence[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    plugin_pods: Sequence[Mapping[str, Any]],
    options: FleetOptions,
    host_facts: Mapping[str, Any] | None = None,
    require_hardening: bool = False,
    missing_daemonsets: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Every verdict, from projected DaemonSets, compact nodes and projected plugin pods."""
    all_nodes = {n["name"]: n for n in nodes}
    gpu_nodes = sorted((n for n in all_nodes.values() if is_gpu_node(n, options)), key=lambda n: n["name"])
    pods_by_node = _plugin_pods_by_node(plugin_pods)
    static_seen = any(p["static"] for p in plugin_pods)
    deployments = deployments_found(daemonsets, plugin_pods)

    findings = cluster_findings(gpu_nodes, daemonsets, plugin_pods, deployments, options)
    findings += [dict(f) for f in missing_daemonsets]
    unserved = [n for n in gpu_nodes if not pods_by_node.get(n["name"])]
    daemonset_summaries = []
    for daemonset in sorted(daemonsets, key=ds_ref):
        own = daemonset_findings(daemonset, gpu_nodes, unserved)
        daemonset_summaries.append(daemonset_summary(daemonset, own))
        findings += own
    node_summaries = {}
    for node in gpu_nodes:
        pods = pods_by_node.get(node["name"], [])
        node_summaries[node["name"]] = node_summary(node, pods, options)
        findings += node_findings(node, pods, daemonsets, static_seen, options)
    findings += host_verdicts(
        host_facts, HostContext(all_nodes, node_summaries, daemonsets, static_seen, options), require_hardening
    )
    for item in findings:
        summary = node_summaries.get(item["node"] or "")
        if summary is not None:
            summary["problems"].append(item["kind"])
            summary["healthy"] = summary["healthy"] and item["severity"] != ERROR

    findings.sort(key=_severity_rank)
    result = {
        "healthy": not any(f["severity"] == ERROR for f in findings),
        "deployments": deployments,
        "daemonsets": daemonset_summaries,
        "nodes": list(node_summaries.values()),
        "findings": findings,
        "counts": {
            "gpu_nodes": len(gpu_nodes),
            "daemonsets": len(daemonsets),
            "plugin_pods": len(plugin_pods),
            **{severity: sum(f["severity"] == severity for f in findings) for severity in SEVERITIES},
        },
    }
    result["report"] = render_report(result)
    return result


# --- the readable report --------------------------------------------------------------------


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _daemonset_line(summary: Mapping[str, Any]) -> str:
    title = DEPLOYMENTS_BY_KEY.get(summary["deployment"], CUSTOM).title
    counts = ", ".join(f"{key} {summary[key]}" for key in ("desired", "current", "updated", "ready", "available"))
    state = "ok" if summary["healthy"] else "NOT HEALTHY"
    return (
        f"  DaemonSet {summary['namespace']}/{summary['name']} ({title}): {counts}, "
        f"misscheduled {summary['misscheduled']}: {state}"
    )


def _finding_lines(item: Mapping[str, Any]) -> list[str]:
    return [
        f"  [{item['severity'].upper()}] {item['subject']}: {item['problem']}",
        f"      what to do: {item['remedy']}",
    ]


def render_report(result: Mapping[str, Any]) -> str:
    """Which node, what is wrong, what to do; errors first."""
    counts = result["counts"]
    verdict = "PASSED" if result["healthy"] else "FAILED"
    headline = (
        f"GPU device plugin check {verdict}: {_plural(counts[ERROR], 'error')}, {_plural(counts[WARNING], 'warning')} "
        f"({_plural(counts['gpu_nodes'], 'GPU node')}, {_plural(counts['daemonsets'], 'DaemonSet')}, "
        f"{_plural(counts['plugin_pods'], 'plugin pod')})"
    )
    lines = [headline]
    deployments = result["deployments"]
    lines.append("Deployment: " + ("; ".join(d["title"] for d in deployments) if deployments else "none found"))
    lines += [_daemonset_line(s) for s in result["daemonsets"]]
    healthy_nodes = [n["name"] for n in result["nodes"] if not n["problems"]]
    if healthy_nodes:
        lines.append(f"Nodes without findings ({len(healthy_nodes)}): {', '.join(healthy_nodes)}")
    if not result["findings"]:
        return "\n".join(lines)
    lines.append("Findings:")
    shown: dict[str, int] = defaultdict(int)
    hidden: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for item in result["findings"]:
        key = f"{item['severity']}:{item['kind']}"
        if shown[key] < MAX_REPORTED_PER_KIND:
            shown[key] += 1
            lines += _finding_lines(item)
        else:
            hidden[key].append(item)
    for items in hidden.values():
        names = ", ".join(str(i["node"] or i["subject"]) for i in items)
        lines.append(f'  ... and {len(items)} more with "{items[0]["problem"]}" or alike: {names}')
    return "\n".join(lines)
