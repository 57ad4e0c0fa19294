# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of a rolling GPU driver upgrade, pure: which nodes are selected, which are skipped and
why (no GPUs, the operator's skip label, already at the target version, blocked by the pre-flight,
failed before), and the ordered batches of the others: the canary first, then batches of
`max_unavailable`, none taking more of a pool's GPUs out of service than the breaker's share."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.record import ROLL_ANNOTATION, read_roll
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import (
    INITIAL_UNSCHEDULABLE_ANNOTATION,
    UPGRADE_FAILED,
    UPGRADE_SKIP_LABEL,
    UPGRADE_STATE_LABEL,
    gfd_driver_version,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import UNKNOWN_MODEL, detect_model
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_quantities
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    object_parts,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import LabelSelector
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import (
    MODEL_DIMENSION,
    Candidate,
    PoolKey,
    apply_breaker,
    count_pools,
    describe_pool,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    RECORD_ANNOTATION,
    is_quarantine_taint,
)

HOST = "host"
OPERATOR = "operator"
MODES = (HOST, OPERATOR)


SKIP_NO_GPUS = "no GPUs: nothing to upgrade"
SKIP_LABEL = f"the operator's skip label {UPGRADE_SKIP_LABEL}=true is set on the node"
SKIP_AT_TARGET = "already at the target driver version"

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_COUNT = re.compile(r"^\s*(\d+)\s*$")


@dataclass(frozen=True)
class RollNode:
    """A node as the roll reads it: its labels (all: selectors and pools read them), the
    annotations of the roll, the operator and the quarantine, its cordon and quarantine taint, and
    its GPUs (capacity for the breaker, allocatable for the wait after the host tasks)."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    unschedulable: bool
    quarantined: bool
    gpus: int
    allocatable: int
    has_annotations: bool = True

    @property
    def version(self) -> str | None:
        return gfd_driver_version(self.labels)

    @property
    def state(self) -> str:
        return self.labels.get(UPGRADE_STATE_LABEL, "")


@dataclass(frozen=True)
class RollOptions:
    target_version: str
    mode: str = HOST
    max_unavailable: str = "1"
    canary: int = 1
    max_share: float = 0.5
    pool_by: tuple[str, ...] = (MODEL_DIMENSION,)
    max_fail_percentage: int = 0
    fleet: FleetOptions = field(default=DEFAULT_OPTIONS, compare=False)


@dataclass(frozen=True)
class Skipped:
    node: str
    reason: str


@dataclass(frozen=True)
class RollPlan:
    batches: tuple[tuple[str, ...], ...]
    skipped: tuple[Skipped, ...]
    missing: tuple[str, ...]
    # GPUs per node before the roll (allocatable), the count the host mode waits to see again.
    expected_gpus: Mapping[str, int]
    batch_size: int
    fail_budget: int

    def result(self) -> dict[str, Any]:
        return {
            "batches": [list(b) for b in self.batches],
            "canary": list(self.batches[0]) if self.batches else [],
            "nodes": [n for b in self.batches for n in b],
            "skipped": [{"node": s.node, "reason": s.reason} for s in self.skipped],
            "missing": list(self.missing),
            "expected_gpus": dict(self.expected_gpus),
            "batch_size": self.batch_size,
            "fail_budget": self.fail_budget,
        }


# --- projection ----------------------------------------------------------------------------------

KEPT_ANNOTATIONS = (ROLL_ANNOTATION, RECORD_ANNOTATION, INITIAL_UNSCHEDULABLE_ANNOTATION)


def project_node(item: object, fleet: FleetOptions = DEFAULT_OPTIONS) -> RollNode | None:
    parts = object_parts(item)
    if parts is None:
        return None
    name, metadata, spec, status = parts
    annotations = string_map(metadata.get("annotations"))

    def whole(key: str) -> int:
        return sum(n for r, n in gpu_quantities(status.get(key), fleet.is_gpu).items() if fleet.counts(r))

    return RollNode(
        name=name,
        labels=string_map(metadata.get("labels")),
        annotations={k: v for k, v in annotations.items() if k in KEPT_ANNOTATIONS},
        unschedulable=spec.get("unschedulable") is True,
        quarantined=any(is_quarantine_taint(as_mapping(t)) for t in as_list(spec.get("taints"))),
        gpus=whole("capacity"),
        allocatable=whole("allocatable"),
        has_annotations=bool(as_mapping(metadata.get("annotations"))),
    )


# --- options -------------------------------------------------------------------------------------


def batch_size(max_unavailable: object, total: int) -> int:
    """Nodes per batch from a count (`3`) or a share of the nodes to upgrade (`20%`, rounded up),
    at least 1."""
    text = str(max_unavailable)
    percent, count = _PERCENT.match(text), _COUNT.match(text)
    if percent and 0 < float(percent.group(1)) <= 100:
        return max(1, math.ceil(float(percent.group(1)) * total / 100 - 1e-9))
    if count and int(count.group(1)) > 0:
        return int(count.group(1))
    raise OptionError(f"max_unavailable must be a count above 0 or a percentage in (0%, 100%], not {text!r}")


def fail_budget(total: int, max_fail_percentage: int) -> int:
    """How many nodes may fail before the roll stops: more than max_fail_percentage of them stops it."""
    if not 0 <= max_fail_percentage <= 100:
        raise OptionError(f"max_fail_percentage must be from 0 to 100, not {max_fail_percentage}")
    return math.floor(total * max_fail_percentage / 100 + 1e-9)


def should_stop(failed: int, total: int, max_fail_percentage: int) -> bool:
    return failed > fail_budget(total, max_fail_percentage)


def check_options(options: RollOptions) -> None:
    if not options.target_version.strip():
        raise OptionError("target_version must name the driver version to upgrade to")
    if options.mode not in MODES:
        raise OptionError(f"mode must be one of {', '.join(MODES)}, not {options.mode!r}")
    if options.canary < 1:
        raise OptionError(f"canary must be at least 1 node, not {options.canary}")
    fail_budget(0, options.max_fail_percentage)


# --- selection and skips -------------------------------------------------------------------------


def select(
    nodes: Sequence[RollNode], names: Sequence[str], selectors: Sequence[LabelSelector]
) -> tuple[list[RollNode], list[str]]:
    """The nodes named, in the order named, or those every selector matches, by name; and the names
    that match no node."""
    if names:
        by_name = {n.name: n for n in nodes}
        ordered = list(dict.fromkeys(names))
        return [by_name[n] for n in ordered if n in by_name], [n for n in ordered if n not in by_name]
    chosen = [n for n in nodes if all(s.matches(n.labels) for s in selectors)]
    return sorted(chosen, key=lambda n: n.name), []


def roll_record(node: RollNode) -> dict[str, Any]:
    return read_roll(node.annotations.get(ROLL_ANNOTATION))


def skip_reason(node: RollNode, options: RollOptions, blockers: Sequence[str]) -> str | None:
    """Why the node is left out of the roll, or None."""
    record = roll_record(node)
    if record.get("failed") and record.get("target") == options.target_version.strip():
        return (
            f"its upgrade to {record['target']} failed before: {record['failed']} "
            f"(remove the annotation {ROLL_ANNOTATION} to try it again)"
        )
    if node.gpus == 0 and node.allocatable == 0:
        return SKIP_NO_GPUS
    if node.labels.get(UPGRADE_SKIP_LABEL) == "true" and not record.get("held"):
        return SKIP_LABEL
    if node.version == options.target_version.strip():
        return SKIP_AT_TARGET
    if options.mode == OPERATOR and node.state == UPGRADE_FAILED:
        return f"the GPU Operator says {UPGRADE_FAILED}: look at its driver pod before rolling on"
    if blockers:
        return "blocked: " + "; ".join(blockers)
    return None


# --- batches -------------------------------------------------------------------------------------


def node_pools(node: RollNode, options: RollOptions) -> tuple[PoolKey, ...]:
    def model() -> str:
        return detect_model(node.labels, options.fleet.model_label_keys).model or UNKNOWN_MODEL

    return tuple(
        (key, model()) if key == MODEL_DIMENSION else (key, node.labels.get(key, "")) for key in options.pool_by
    )


def make_batches(
    todo: Sequence[RollNode], every_node: Sequence[RollNode], options: RollOptions, size: int
) -> tuple[list[tuple[str, ...]], list[Skipped]]:
    """The batches, in order: the canary, then `size` nodes each; a batch takes the next nodes the
    breaker lets out together (against the nodes out of service before the roll). A node the breaker
    never lets out, even alone, is skipped with the pool and the numbers."""
    pools = count_pools((node_pools(n, options), n.gpus, n.unschedulable or n.quarantined) for n in every_node)
    queue = [Candidate(n.name, 0 if n.unschedulable else n.gpus, node_pools(n, options)) for n in todo]
    batches: list[tuple[str, ...]] = []
    skipped: list[Skipped] = []
    while queue:
        verdict = apply_breaker(pools, queue, options.max_share)
        if not verdict.allowed:
            skipped += [Skipped(h.name, "held by the breaker: " + h.reason) for h in verdict.held]
            break
        limit = min(options.canary, size) if not batches else size
        taken = set(verdict.allowed[:limit])
        batches.append(tuple(c.name for c in queue if c.name in taken))
        queue = [c for c in queue if c.name not in taken]
    return batches, skipped


def plan_roll(
    nodes: Sequence[RollNode],
    asked: tuple[Sequence[str], Sequence[LabelSelector]],
    blockers: Mapping[str, Sequence[str]],
    options: RollOptions,
) -> RollPlan:
    """The whole plan from every node of the cluster, the selection and the pre-flight's blockers per node."""
    check_options(options)
    chosen, missing = select(nodes, *asked)
    skipped: list[Skipped] = []
    todo: list[RollNode] = []
    for node in chosen:
        reason = skip_reason(node, options, blockers.get(node.name, ()))
        (todo.append(node) if reason is None else skipped.append(Skipped(node.name, reason)))
    size = batch_size(options.max_unavailable, len(todo))
    batches, held = make_batches(todo, nodes, options, size)
    return RollPlan(
        batches=tuple(batches),
        skipped=tuple(skipped + held),
        missing=tuple(missing),
        expected_gpus={n.name: n.allocatable for n in todo},
        batch_size=size,
        fail_budget=fail_budget(len(todo), options.max_fail_percentage),
    )


def pool_texts(node: RollNode, options: RollOptions) -> list[str]:
    return [describe_pool(p) for p in node_pools(node, options)]
