# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin brought to the cluster: everything read and decided first, refused as a whole
when an object of its name is someone else's or another device plugin serves its nodes, then only the
objects that would change applied (server-side apply) and the rollout waited for; or the
collection's objects removed. In check mode nothing is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import plugin_finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import describe_expression
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy import reads
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import (
    DeployOptions,
    device_plugin_daemonset,
    object_key,
    plugin_placement,
    pod_selector,
    removable_objects,
    rendered_objects,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.plan import (
    ObjectPlan,
    expected_capacity,
    plan_absent,
    plan_present,
    served_hits,
    targeted_nodes,
)


@dataclass
class Outcome:
    """A run's result (the module's return values), the diffs, and the findings that fail it."""

    result: dict[str, Any]
    diffs: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def findings_of(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    return [plugin_finding(KINDS.finding(hit)) for hit in hits]


def _placement_text(placement: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in sorted(placement["node_selector"].items())]
    parts += [" and ".join(map(describe_expression, term)) for term in placement["affinity_terms"]]
    return "; ".join(parts)


def _write(client: KubeClient, plans: Sequence[ObjectPlan], check_mode: bool) -> None:
    for plan in plans:
        if check_mode or not plan.writes:
            continue
        if plan.desired is not None:
            reads.apply_object(client, dict(plan.desired))
        elif plan.live is not None:
            reads.delete_object(client, plan.live)


def _rollout(
    client: KubeClient, options: DeployOptions, summary: Mapping[str, Any] | None, timeout: float
) -> tuple[dict[str, Any], list[Hit], list[dict[str, Any]]]:
    daemonset = device_plugin_daemonset(options)
    waiting, nodes = reads.wait_rollout(client, daemonset, plugin_placement(options), summary, timeout)
    hits = []
    if waiting:
        metadata = daemonset["metadata"]
        fields = {
            "timeout": int(timeout),
            "count": len(waiting),
            "waiting": "; ".join(waiting[:10]),
            "describe": f"kubectl -n {metadata['namespace']} describe daemonset {metadata['name']}",
            "namespace": metadata["namespace"],
            "selector": pod_selector(daemonset),
        }
        hits.append(Hit("deploy_rollout_incomplete", fields, {"subject": object_key(daemonset)}))
    return {"done": not waiting, "waiting": waiting}, hits, nodes


def present(
    client: KubeClient,
    options: DeployOptions,
    summary: Mapping[str, Any] | None,
    plugin_pods: Callable[[], list[dict[str, Any]]],
    check_mode: bool,
    wait_timeout: float | None,
) -> Outcome:
    """state=present. ``plugin_pods`` reads the device-plugin pods the device-plugin check finds;
    ``wait_timeout`` None: no wait for the rollout."""
    reads.require_namespace(client, options.namespace)
    desired = rendered_objects(options)
    plans, hits = plan_present(desired, reads.read_objects(client, desired))
    placement = plugin_placement(options)
    targeted = targeted_nodes(reads.read_nodes(client), placement)
    names = [n["name"] for n in targeted]
    daemonset = device_plugin_daemonset(options)["metadata"]["name"]
    hits += served_hits(names, plugin_pods(), options.namespace, daemonset)
    result: dict[str, Any] = {
        "changed": False,
        "changes": [],
        "objects": [object_key(o) for o in desired],
        "release": options.release.version,
        "image": options.release.image,
        "targeted_nodes": names,
    }
    if hits:
        return Outcome(dict(result, writes=client.write_count), failures=findings_of(hits))
    warnings = []
    if not targeted:
        label = ",".join(f"{k}={v}" for k, v in sorted(options.node_selector.items()))
        hit = Hit("deploy_no_target_nodes", {"placement": _placement_text(placement), "label": label})
        warnings = [f["problem"] for f in findings_of([hit])]
    _write(client, plans, check_mode)
    changes = [p for p in plans if p.writes]
    result.update(changed=bool(changes), changes=[p.key for p in changes])
    failures: list[dict[str, Any]] = []
    if wait_timeout is not None and not check_mode:
        result["rollout"], rollout_hits, targeted = _rollout(client, options, summary, wait_timeout)
        failures = findings_of(rollout_hits)
    result["capacity"] = [expected_capacity(n, summary) for n in targeted]
    result["writes"] = client.write_count
    return Outcome(result, [p.diff() for p in changes], failures, warnings)


def absent(client: KubeClient, namespace: str, check_mode: bool) -> Outcome:
    """state=absent: the collection's objects in the namespace deleted; anyone else's left, and named."""
    plans = plan_absent(reads.read_objects(client, removable_objects(namespace)))
    _write(client, plans, check_mode)
    removed = [p for p in plans if p.writes]
    left = [p.key for p in plans if not p.writes]
    result = {
        "changed": bool(removed),
        "changes": [p.key for p in removed],
        "left_alone": left,
        "writes": client.write_count,
    }
    warnings = [f"{key} was not made by this collection: left as it is" for key in left]
    return Outcome(result, [p.diff() for p in removed], warnings=warnings)
