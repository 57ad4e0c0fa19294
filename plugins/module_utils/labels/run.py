# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_node_label on the write-module skeleton: the options checked, the nodes and the
DRA models read, a plan per node, the patches sent (none in check mode), what the run did."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.apply import (
    NodeResult,
    apply_plans,
    failure_message,
    summarize,
    warnings_for,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    build_options,
    missing_plans,
    plan_node,
    plan_nodes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.reads import (
    patch_node,
    read_dra_models,
    read_nodes,
    reread_node,
    with_dra_model,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun


def joined_selector(selectors: list[str] | None) -> str | None:
    """The label selectors as one selector (they all hold), None when there are none."""
    return ",".join(s for s in selectors or [] if s.strip()) or None


def run_labeling(params: Mapping[str, Any], client: KubeClient, check_mode: bool) -> WriteRun:
    """Label the considered nodes (nothing sent in check mode) and say what was done."""
    options = build_options(
        params["label_key"],
        params["model_label_keys"],
        params["value_overrides"],
        params["remove_from_non_gpu"],
        params["mixed_models"],
        params["force"],
    )
    is_gpu = gpu_resource_matcher()
    selector = joined_selector(params["label_selectors"])
    nodes, missing = read_nodes(client, selector, params["names"])
    models, dra_warning = read_dra_models(client)
    nodes = [node for node in (with_dra_model(n, models) for n in nodes) if node is not None]
    plans = plan_nodes(nodes, options, is_gpu) + missing_plans(missing, selector)
    if check_mode:
        results = [NodeResult(plan) for plan in plans]
    else:
        results = apply_plans(
            plans,
            send=lambda name, patch: patch_node(client, name, patch),
            reread=lambda name: with_dra_model(reread_node(client, name), models),
            replan=lambda node: plan_node(node, options, is_gpu),
            parallelism=params["parallelism"],
            errors=(ClusterError,),
        )
    summary = summarize(results, options.label_key)
    diff = summary.pop("diff")
    warnings = ([dra_warning] if dra_warning else []) + warnings_for(summary, options)
    changed = bool(summary["labeled"] or summary["unlabeled"])
    return WriteRun(summary, changed, diff, warnings, failure_message(results))
