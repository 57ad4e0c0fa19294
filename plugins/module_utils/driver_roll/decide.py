# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the roll decides on a batch, pure: the node patches of the roll (the failure record, the
operator's skip label held and let go), whether a node's GPUs are back after the host tasks, which
pods failed admission while the device plugin was away, and where the operator's upgrade stands."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.plan import RollNode, roll_record
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.record import (
    ROLL_ANNOTATION,
    roll_annotation,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import (
    INITIAL_UNSCHEDULABLE_ANNOTATION,
    UPGRADE_DONE,
    UPGRADE_FAILED,
    UPGRADE_SKIP_LABEL,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import JsonPatch, member_ops
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_list, as_mapping, as_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.diff import diff_entry

# kubelet's reason for a pod admitted before the device plugin registered again after a restart
# (kubernetes/kubernetes#125579, #128043; NVIDIA/k8s-device-plugin#231).
ADMISSION_ERROR = "UnexpectedAdmissionError"

WAITING = "waiting"
DONE = "done"
FAILED = "failed"


@dataclass(frozen=True)
class NodePatch:
    """A node and the guarded JSON patch the roll sends it (None: none needed)."""

    name: str
    patch: JsonPatch | None
    what: str = ""


def _annotation_ops(node: RollNode, after: str | None) -> tuple[JsonPatch, JsonPatch]:
    return member_ops(
        node.has_annotations, "annotations", ROLL_ANNOTATION, node.annotations.get(ROLL_ANNOTATION), after
    )


def failure_patch(node: RollNode, target: str, reason: str, now: str) -> NodePatch:
    """The failure of the node's upgrade, recorded on it (the record's skip label ownership kept)."""
    record = {**roll_record(node), "target": target, "failed": reason, "at": now}
    after = roll_annotation(record)
    if node.annotations.get(ROLL_ANNOTATION) == after:
        return NodePatch(node.name, None)
    guard, write = _annotation_ops(node, after)
    return NodePatch(node.name, guard + write, "failed")


def hold_patch(node: RollNode, target: str, now: str) -> NodePatch:
    """The operator's skip label put on the node, recorded as the roll's own; none when it is there already."""
    if node.labels.get(UPGRADE_SKIP_LABEL) == "true":
        return NodePatch(node.name, None)
    label_guard, label_write = member_ops(
        True, "labels", UPGRADE_SKIP_LABEL, node.labels.get(UPGRADE_SKIP_LABEL), "true"
    )
    guard, write = _annotation_ops(node, roll_annotation({"target": target, "held": True, "at": now}))
    return NodePatch(node.name, label_guard + guard + label_write + write, "held")


def start_patch(node: RollNode) -> NodePatch:
    """The roll's own skip label taken off the node, so the operator upgrades it; another's stays."""
    record = roll_record(node)
    if not record.get("held") or node.labels.get(UPGRADE_SKIP_LABEL) != "true":
        return NodePatch(node.name, None)
    label_guard, label_write = member_ops(True, "labels", UPGRADE_SKIP_LABEL, "true", None)
    guard, write = _annotation_ops(node, None)
    return NodePatch(node.name, label_guard + guard + label_write + write, "started")


def patch_diff(node: RollNode, plan: NodePatch) -> dict[str, Any]:
    """The members of the node a patch writes, before and after, as text."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for op in plan.patch or ():
        if op["op"] == "test":
            continue
        path = op["path"].split("/")
        if len(path) < 4:  # a whole map added: its one member
            for key, value in op["value"].items():
                before[f"{path[2]}.{key}"], after[f"{path[2]}.{key}"] = None, value
            continue
        key = f"{path[2]}.{path[3].replace('~1', '/').replace('~0', '~')}"
        source = node.labels if path[2] == "labels" else node.annotations
        before[key] = source.get(key.split(".", 1)[1])
        after[key] = op.get("value") if op["op"] != "remove" else None
    text = "".join

    return diff_entry(
        f"node/{node.name}",
        text(f"{k}: {v}\n" for k, v in sorted(before.items()) if v is not None),
        text(f"{k}: {v}\n" for k, v in sorted(after.items()) if v is not None),
    )


def gpus_back(node: RollNode, expected: int) -> bool:
    """The device plugin publishes the node's GPUs again: allocatable at least what it was before."""
    return node.allocatable >= expected


def admission_failures(pods: Iterable[Mapping[str, Any]], nodes: frozenset[str]) -> tuple[list[dict], list[dict]]:
    """Pods on the nodes that failed admission: those a controller owns (it makes them again: they
    are deleted) and bare ones (only listed: deleting them would lose them)."""
    owned: list[dict] = []
    bare: list[dict] = []
    for pod in pods:
        metadata, spec, status = (as_mapping(pod.get(k)) for k in ("metadata", "spec", "status"))
        if status.get("phase") != "Failed" or status.get("reason") != ADMISSION_ERROR:
            continue
        if spec.get("nodeName") not in nodes or metadata.get("deletionTimestamp"):
            continue
        entry = {
            "pod": f"{as_text(metadata.get('namespace'))}/{as_text(metadata.get('name'))}",
            "node": spec["nodeName"],
        }
        controllers = [
            as_mapping(o) for o in as_list(metadata.get("ownerReferences")) if as_mapping(o).get("controller")
        ]
        if controllers:
            owned.append({**entry, "owner": f"{controllers[0].get('kind')}/{controllers[0].get('name')}"})
        else:
            bare.append(entry)
    return owned, bare


def upgrade_stand(node: RollNode, target: str) -> tuple[str, str]:
    """Where the operator's upgrade of the node stands: done, failed or waiting, with the state. An
    upgrade-done left from an earlier upgrade is not this one's: where GFD labels the driver version,
    done is done only at the target (the controller marks the node again only on its next pass)."""
    state = node.state
    if state == UPGRADE_FAILED:
        return FAILED, state
    if state == UPGRADE_DONE and node.labels.get(UPGRADE_SKIP_LABEL) != "true":
        if node.version in (None, target):
            return DONE, state
        return WAITING, f"{state} (GFD still labels driver {node.version})"
    return WAITING, state or "(no state yet)"


def kept_cordons(nodes: Sequence[RollNode]) -> list[str]:
    """Nodes the operator found unschedulable before its upgrade: their cordon is the node's own."""
    return [n.name for n in nodes if n.annotations.get(INITIAL_UNSCHEDULABLE_ANNOTATION) == "true"]
