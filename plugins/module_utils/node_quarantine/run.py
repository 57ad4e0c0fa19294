# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_node_quarantine on the write-module skeleton: the options checked, the cluster
read once, the plan, the node patches and the evictions (none in check mode), what the run did."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.apply import (
    apply_node_patches,
    checked_results,
    failure_message,
    pods_to_evict,
    summarize,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.plan import (
    QuarantineOptions,
    check_nodes,
    plan_quarantine,
    replan_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine.reads import (
    patch_node,
    read_quarantine,
    reread_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import check_share
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.evictions import (
    EvictionSettings,
    blocked_warning,
    evict_through,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import check_text


def build_options(params: Mapping[str, Any]) -> QuarantineOptions:
    """The quarantine's options from the module's (their ranges are checked by the skeleton)."""
    pool_by = tuple(dict.fromkeys(k.strip() for k in params["pool_by"] if k.strip()))
    if not pool_by:
        raise OptionError("pool_by must name at least one dimension (model, or a node label key)")
    return QuarantineOptions(
        reason=check_text(params["reason"], "reason"),
        quarantined_by=check_text(params["quarantined_by"], "quarantined_by"),
        now=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        max_share=check_share(params["max_share"]),
        pool_by=pool_by,
        fleet=options_from_params(model_label_keys=params["model_label_keys"]),
    )


def warnings_for(summary: Mapping[str, Any]) -> list[str]:
    """Pods their budget kept, names that match no node, nodes the breaker held back."""
    warnings = [w for w in (blocked_warning(summary["blocked"]),) if w]
    warnings += [f"no such node: {name}" for name in summary["missing"]]
    return warnings + [f"node {h['node']} held back by the breaker: {h['reason']}" for h in summary["held_back"]]


def run_quarantine(params: Mapping[str, Any], client: KubeClient, check_mode: bool) -> WriteRun:
    """Quarantine the nodes asked (nothing sent in check mode) and say what was done."""
    asked = check_nodes(params["names"])
    options = build_options(params)
    reads = read_quarantine(client, asked, options)
    plan = plan_quarantine(asked, reads, options)
    evictions = None
    if check_mode:
        results = checked_results(plan)
    else:
        results = apply_node_patches(
            plan.nodes,
            send=lambda name, patch: patch_node(client, name, patch),
            reread=lambda name: reread_node(client, name, options),
            replan=lambda node, node_plan: replan_node(node, node_plan, options),
            parallelism=params["parallelism"],
            errors=(ClusterError,),
        )
        if params["evict"]:
            settings = EvictionSettings(params["eviction_timeout"], params["force_delete"], params["parallelism"])
            evictions = evict_through(client, pods_to_evict(results), settings)
    summary = summarize(plan, results, evictions, params["eviction_timeout"])
    diff = summary.pop("diff")
    # In check mode, pods to evict are a change the real run would make.
    would_evict = check_mode and params["evict"] and bool(summary["to_evict"])
    changed = bool(summary["quarantined"] or summary["evicted"] or summary["deleted"] or would_evict)
    notes = list(reads.dra.notes) if reads.dra is not None else []
    return WriteRun(summary, changed, diff, notes + warnings_for(summary), failure_message(summary))
