# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin brought to the cluster: everything read and decided first, refused as a whole
when an object of its name is someone else's or another device plugin serves its nodes, then only the
objects that would change applied and the rollout waited for; or the collection's objects removed.
The objects are written as write/owned.py writes the collection's objects; what is this feature's is
which objects, in which order, the nodes it targets and the rollout. In check mode nothing is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    plugin_placement,
    pod_selector,
    removable_objects,
    rendered_objects,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.plan import (
    expected_capacity,
    not_owned_hits,
    served_hits,
    targeted_nodes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.reads import OWNER
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write import owned
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun


def findings_of(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    return [plugin_finding(KINDS.finding(hit)) for hit in hits]


def failure_of(findings: Sequence[Mapping[str, Any]]) -> str | None:
    """The message a run fails with: the first findings' problems; None without findings."""
    return "; ".join(f["problem"] for f in findings[:5]) or None


def _placement_text(placement: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in sorted(placement["node_selector"].items())]
    parts += [" and ".join(map(describe_expression, term)) for term in placement["affinity_terms"]]
    return "; ".join(parts)


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
        hits.append(Hit("deploy_rollout_incomplete", fields, {"subject": owned.object_key(daemonset)}))
    return {"done": not waiting, "waiting": waiting}, hits, nodes


def _no_target_warnings(options: DeployOptions, targeted: Sequence[Mapping[str, Any]]) -> list[str]:
    if targeted:
        return []
    label = ",".join(f"{k}={v}" for k, v in sorted(options.node_selector.items()))
    hit = Hit("deploy_no_target_nodes", {"placement": _placement_text(plugin_placement(options)), "label": label})
    return [f["problem"] for f in findings_of([hit])]


def present(
    client: KubeClient,
    options: DeployOptions,
    summary: Mapping[str, Any] | None,
    plugin_pods: Callable[[], list[dict[str, Any]]],
    check_mode: bool,
    wait_timeout: float | None,
) -> WriteRun:
    """state=present. ``plugin_pods`` reads the device-plugin pods the device-plugin check finds;
    ``wait_timeout`` None: no wait for the rollout."""
    reads.require_namespace(client, options.namespace)
    desired = rendered_objects(options)
    plans = owned.plan(client, OWNER, desired)
    hits = not_owned_hits(owned.keys_of(plans, owned.NOT_OURS))
    targeted = targeted_nodes(reads.read_nodes(client), plugin_placement(options))
    names = [n["name"] for n in targeted]
    daemonset = device_plugin_daemonset(options)["metadata"]["name"]
    hits += served_hits(names, plugin_pods(), options.namespace, daemonset)
    result: dict[str, Any] = {
        "changes": [],
        "objects": [owned.object_key(o) for o in desired],
        "release": options.release.version,
        "image": options.release.image,
        "targeted_nodes": names,
    }
    if hits:
        refused = findings_of(hits)
        return WriteRun({**result, "findings": refused}, False, failure=failure_of(refused))
    warnings = _no_target_warnings(options, targeted)
    owned.write(client, OWNER, plans, check_mode)
    changes = owned.changed(plans)
    result["changes"] = [p.key for p in changes]
    findings: list[dict[str, Any]] = []
    if wait_timeout is not None and not check_mode:
        result["rollout"], rollout_hits, targeted = _rollout(client, options, summary, wait_timeout)
        findings = findings_of(rollout_hits)
    result["capacity"] = [expected_capacity(n, summary) for n in targeted]
    if findings:
        result["findings"] = findings
    diff = [p.diff() for p in changes]
    return WriteRun(result, bool(changes), diff, warnings, failure_of(findings))


def absent(client: KubeClient, namespace: str, check_mode: bool) -> WriteRun:
    """state=absent: the collection's objects in the namespace deleted; anyone else's left, and named."""
    return owned.remove(client, OWNER, removable_objects(namespace), check_mode)
