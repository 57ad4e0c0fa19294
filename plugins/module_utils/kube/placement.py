# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the scheduler may place a pod: node selectors, required node affinity and taints, as
plain-dict predicates, each unmet term described in words."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    string_map,
)

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


@dataclass(frozen=True)
class Mismatch:
    """One reason a DaemonSet places no pod on a node, with what fixes it where that is a label or a taint:
    `label` is the `key=value` to add, `taint` the taint to tolerate or remove (`key[=value]:effect`)."""

    text: str
    label: str | None = None
    taint: str | None = None
    taint_removal: str | None = None


def selector_expression(raw: object) -> dict[str, Any] | None:
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
        terms.append([e for e in map(selector_expression, as_list(term.get("matchExpressions"))) if e is not None])
    return terms


def _toleration(raw: object) -> dict[str, str]:
    toleration = as_mapping(raw)
    return {key: as_text(toleration.get(key)) for key in ("key", "operator", "value", "effect")}


def node_taints(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A node's taints that have a key: key, value and effect (None where missing)."""
    taints = []
    for taint in map(as_mapping, as_list(spec.get("taints"))):
        if isinstance(taint.get("key"), str):
            taints.append({"key": taint["key"], "value": taint.get("value"), "effect": taint.get("effect")})
    return taints


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


def label_fix(expression: Mapping[str, Any]) -> str | None:
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


def taint_text(taint: Mapping[str, Any]) -> str:
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
        fixes = [label_fix(e) for e in unmet]
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
        text = taint_text(taint)
        removal = f"{taint.get('key')}:{taint.get('effect')}-"
        mismatches.append(Mismatch(f"it does not tolerate the node's taint {text}", taint=text, taint_removal=removal))
    return mismatches
