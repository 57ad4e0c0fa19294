# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of gpu_node_release on the write-module skeleton: the options checked, the nodes read,
a plan per node, per node to release a proof pod then the guarded patch (nothing run or sent in
check mode), what the run did."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.apply import (
    NodeCalls,
    NodeResult,
    PodCalls,
    failure_message,
    planned,
    release_all,
    summarize,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.reads import (
    patch_node,
    read_nodes,
    reread_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    ReleasePlan,
    Verdict,
    build_proof_options,
    missing_plan,
    plan_release,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun


def check_params(params: Mapping[str, Any]) -> None:
    """What the option ranges of the skeleton do not hold (parallelism is one of them)."""
    if not params["names"] or not all(params["names"]):
        raise OptionError("names must name at least one node, and no name may be empty")
    if params["proof_timeout"] < 1:
        raise OptionError(f"proof_timeout must be at least 1 second, not {params['proof_timeout']}")
    if params["log_lines"] < 0:
        raise OptionError(f"log_lines must not be negative, not {params['log_lines']}")


def warnings_for(summary: Mapping[str, Any]) -> list[str]:
    """Nodes that carry the quarantine's marks without a record the collection can read; names that match no node."""
    warnings = [entry["reason"] for entry in summary["not_ours"]]
    return warnings + (["no such node: " + ", ".join(summary["missing"])] if summary["missing"] else [])


def run_release(params: Mapping[str, Any], client: KubeClient, check_mode: bool, pods: PodCalls) -> WriteRun:
    """Release the nodes asked once their proof passes (nothing run or sent in check mode), and say what was done."""
    check_params(params)
    options = build_proof_options(params["proof"], params["namespace"])
    nodes, missing = read_nodes(client, params["names"])
    decided: dict[str, ReleasePlan] = {n.name: plan_release(n, options) for n in nodes}
    decided.update({name: missing_plan(name) for name in missing})
    plans = [decided[name] for name in dict.fromkeys(params["names"])]
    results: list[NodeResult]
    if check_mode:
        results = planned(plans)
    else:
        if any(p.verdict is Verdict.RELEASE for p in plans):
            pods.ensure_namespace(options.namespace)
        results = release_all(
            plans,
            pods,
            NodeCalls(
                send=lambda name, patch: patch_node(client, name, patch),
                reread=lambda name: reread_node(client, name),
                replan=lambda node: plan_release(node, options),
            ),
            params["proof_timeout"],
            parallelism=params["parallelism"],
            errors=(ClusterError,),
        )
    summary = summarize(results, check_mode)
    diff = summary.pop("diff")
    return WriteRun(summary, bool(summary["released"]), diff, warnings_for(summary), failure_message(summary))
