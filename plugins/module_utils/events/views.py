# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the GPU health event source keeps of a Node: its health class as the health view judges it
(gpu/health.py over the table of gpu/health_table.py), its problems, its GPUs, the pools the breaker
counts it in, and whether it is cordoned or quarantined by the collection. Pure.

Nothing a heartbeat changes is kept (``lastHeartbeatTime``, ``resourceVersion``, the lease), so the
view of a node whose kubelet only reported in is equal to the one before it, and no event follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds.health import DEGRADED_CASE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import HealthProblem, judge_node, worst
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import DEGRADED
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import UNKNOWN_MODEL, detect_model
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, string_map
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import (
    DEFAULT_MAX_SHARE,
    MODEL_DIMENSION,
    PoolKey,
    check_share,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    RECORD_ANNOTATION,
    is_quarantine_taint,
    read_record,
)


@dataclass(frozen=True)
class ViewOptions:
    """How nodes are judged and pooled: the fleet options (GPU resources, model label keys, the health
    table), the dimensions of the breaker's pools (as the quarantine playbook's ``pool_by``) and its share."""

    fleet: FleetOptions = DEFAULT_OPTIONS
    pool_by: tuple[str, ...] = (MODEL_DIMENSION,)
    max_share: float = DEFAULT_MAX_SHARE


@dataclass(frozen=True)
class NodeView:
    """A GPU node as the source compares it: equal views mean nothing happened that counts."""

    name: str
    health: str
    problems: tuple[HealthProblem, ...] = ()
    gpus: int = 0
    pools: tuple[PoolKey, ...] = ()
    cordoned: bool = False
    # The collection's taint kubegpu.io/quarantine is on the node.
    tainted: bool = False
    # The collection's quarantine record is on the node (a release would act on it).
    quarantined: bool = False

    @property
    def out_of_service(self) -> bool:
        """Its GPUs take no new work as the breaker counts them: cordoned or tainted by the quarantine."""
        return self.cordoned or self.tainted


def check_pool_by(value: object) -> tuple[str, ...]:
    if value is None:
        return (MODEL_DIMENSION,)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) and v for v in value):
        raise OptionError(f"pool_by must be a list of model and node label keys, got {value!r}")
    return tuple(dict.fromkeys(value))


def view_options(args: Mapping[str, Any]) -> ViewOptions:
    """The options from the source's arguments ``pool_by`` and ``max_share``."""
    share = args.get("max_share")
    if isinstance(share, str):  # a templated value arrives as text
        try:
            share = float(share)
        except ValueError:
            raise OptionError(f"max_share must be a number above 0 and at most 1, not {share!r}") from None
    return ViewOptions(
        pool_by=check_pool_by(args.get("pool_by")),
        max_share=DEFAULT_MAX_SHARE if share is None else check_share(share, "max_share"),
    )


def _facts(node: Mapping[str, Any], labels: Mapping[str, str], options: FleetOptions) -> dict[str, Any]:
    """The GPU facts of one node that the health judgement reads, from the Node alone."""
    names = sorted(r for r in set(node["capacity"]) | set(node["allocatable"]) if options.counts(r))
    resources = {
        name: {"capacity": node["capacity"].get(name, 0), "allocatable": node["allocatable"].get(name, 0)}
        for name in names
    }
    model = detect_model(labels, options.model_label_keys)
    return {
        "resources": resources,
        "capacity": sum(r["capacity"] for r in resources.values()),
        "model": model.model,
        "model_label_value": model.label_value,
    }


def view_of(item: object, options: ViewOptions = ViewOptions()) -> NodeView | None:
    """The view of a Node object, or None for a node that is not a GPU node (no GPU capacity and no
    label that names a GPU model) or for something that is not a named object."""
    projected = project_node(item, options.fleet)
    if projected is None:
        return None
    metadata = as_mapping(as_mapping(item).get("metadata"))
    labels = string_map(metadata.get("labels"))
    facts = _facts(projected, labels, options.fleet)
    if not facts["capacity"] and facts["model"] is None and not projected["allocatable"]:
        return None
    problems = tuple(judge_node(projected, facts, options.fleet.health))
    taints = as_mapping(item).get("spec", {}).get("taints") or []
    model = facts["model"] or UNKNOWN_MODEL
    return NodeView(
        name=projected["name"],
        health=worst([p.severity for p in problems]),
        problems=problems,
        gpus=facts["capacity"],
        pools=tuple((key, model) if key == MODEL_DIMENSION else (key, labels.get(key, "")) for key in options.pool_by),
        cordoned=not projected["schedulable"],
        tainted=any(is_quarantine_taint(as_mapping(t)) for t in taints),
        quarantined=read_record(string_map(metadata.get("annotations")).get(RECORD_ANNOTATION)) is not None,
    )


def problem_entry(problem: HealthProblem) -> dict[str, Any]:
    """A problem as an event carries it: its kind, the status it gives the node, its title and message
    (the texts of the finding registry, as gpu_node_facts words them)."""
    case = DEGRADED_CASE if problem.severity == DEGRADED and DEGRADED_CASE in KINDS[problem.kind].cases else ""
    finding = KINDS.finding(Hit(problem.kind, problem.fields, case=case))
    return {"kind": problem.kind, "status": problem.severity, "title": finding.title, "message": finding.message}
