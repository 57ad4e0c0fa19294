# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Release of a node the collection quarantined, pure: what a release may undo (only what the
record says the collection did: its taint, its cordon, the record itself), the guarded JSON patch
that undoes it, the proof pod that must succeed on the node first, and the verdict on that pod.

The proof is the sample workload (roles/sample_workload: its image, command and tolerations)
asking for the node's GPUs, pinned to the node through the scheduler: a required node affinity on
the node's name (`matchFields metadata.name`, as the DaemonSet controller pins its pods), so the
scheduler's filters still run (NodeResourcesFit finds the GPUs allocatable, TaintToleration the
taints tolerated). It tolerates the quarantine taint and the cordon (`NodeUnschedulable` admits a
pod that tolerates `node.kubernetes.io/unschedulable`). Setting `nodeName` instead would skip the
scheduler, and a hostname selector depends on a label that need not equal the node's name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import release as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import legacy
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import NVIDIA_GPU
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import json_pointer
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    object_parts,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import gpu_count
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT,
    QUARANTINE_TOLERATION,
    RECORD_ANNOTATION,
    Record,
    is_quarantine_taint,
    read_record,
)

# The sample workload's defaults (roles/sample_workload/defaults/main.yml; a unit test holds them equal).
SAMPLE_IMAGE = "registry.cn-beijing.aliyuncs.com/acs/tensorflow-mnist-sample:v1.5"
SAMPLE_COMMAND = (
    "python",
    "tensorflow-sample-code/tfjob/docker/mnist/main.py",
    "--max_steps=1000",
    "--data_dir=tensorflow-sample-code/data",
)
SAMPLE_TOLERATIONS: tuple[dict[str, str], ...] = ({"key": NVIDIA_GPU, "operator": "Exists", "effect": "NoSchedule"},)

PROOF_NAMESPACE = "kubegpu-release-proof"
PROOF_APP = "kubegpu-release-proof"
PROOF_LABELS = {"app.kubernetes.io/name": PROOF_APP, "app.kubernetes.io/managed-by": "kubegpu.scheduling"}
# The node a proof pod proves, by its full name (a label value holds at most 63 characters).
PROOF_NODE_ANNOTATION = "kubegpu.io/release-proof-node"
PROOF_CONTAINER = "proof"
UNSCHEDULABLE_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_PROOF_TIMEOUT = 600
DEFAULT_LOG_LINES = 20
_NAME_PART = re.compile(r"[^a-z0-9-]+")

JsonPatch = list[dict[str, Any]]


@dataclass(frozen=True)
class ProofOptions:
    """The proof pod: what it runs, which GPUs it asks for (None: all of the resource in the node's
    capacity), what it tolerates besides the quarantine and the cordon, and where it runs."""

    image: str = SAMPLE_IMAGE
    command: tuple[str, ...] = SAMPLE_COMMAND
    resource: str = NVIDIA_GPU
    gpus: int | None = None
    tolerations: tuple[Mapping[str, Any], ...] = SAMPLE_TOLERATIONS
    annotations: Mapping[str, str] = field(default_factory=dict)
    namespace: str = PROOF_NAMESPACE


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise OptionError(f"{where} must be a non-empty list of non-empty strings, not {value!r}")
    return tuple(value)


def build_proof_options(proof: Mapping[str, Any] | None, namespace: object = PROOF_NAMESPACE) -> ProofOptions:
    """Checked proof options; what is not given is the sample workload's."""
    given = dict(proof or {})
    image = given.get("image") or SAMPLE_IMAGE
    if not isinstance(image, str):
        raise OptionError(f"proof.image must be a string, not {image!r}")
    command = _strings(given["command"], "proof.command") if given.get("command") is not None else SAMPLE_COMMAND
    resource = given.get("resource") or NVIDIA_GPU
    if not isinstance(resource, str) or "/" not in resource:
        raise OptionError(f"proof.resource must be an extended resource name such as nvidia.com/gpu, not {resource!r}")
    gpus = given.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise OptionError(f"proof.gpus must be a whole number of at least 1 (or unset: all the node's), not {gpus!r}")
    tolerations = given.get("tolerations")
    if tolerations is None:
        tolerations = list(SAMPLE_TOLERATIONS)
    if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
        raise OptionError(f"proof.tolerations must be a list of tolerations (mappings), not {tolerations!r}")
    annotations = given.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        raise OptionError(f"proof.annotations must map strings to strings, not {annotations!r}")
    if not isinstance(namespace, str) or not namespace:
        raise OptionError(f"namespace must be a non-empty string, not {namespace!r}")
    return ProofOptions(image, command, resource, gpus, tuple(tolerations), dict(annotations), namespace)


@dataclass(frozen=True)
class ReleaseNode:
    """The few fields of a Node that a release reads."""

    name: str
    unschedulable: bool
    taints: tuple[Mapping[str, Any], ...]
    record_text: str | None
    capacity: Mapping[str, str]


def compact_node(item: object) -> ReleaseNode | None:
    parts = object_parts(item)
    if parts is None:
        return None
    name, metadata, spec, status = parts
    capacity = {str(k): str(v) for k, v in as_mapping(status.get("capacity")).items()}
    return ReleaseNode(
        name=name,
        unschedulable=spec.get("unschedulable") is True,
        taints=tuple(as_mapping(t) for t in as_list(spec.get("taints"))),
        record_text=string_map(metadata.get("annotations")).get(RECORD_ANNOTATION),
        capacity=capacity,
    )


class Verdict(str, Enum):
    RELEASE = "release"
    NOT_QUARANTINED = "not_quarantined"
    NOT_OURS = "not_ours"
    NO_SUCH_NODE = "no_such_node"
    CANNOT_PROVE = "cannot_prove"


@dataclass(frozen=True)
class ReleasePlan:
    """What a release of one node does once its proof passed: what it removes, what stays and
    why (hits), the patch, the proof pod, and the node's marks before and after as text."""

    node: str
    verdict: Verdict
    removes: tuple[str, ...] = ()
    hits: tuple[Hit, ...] = ()
    patch: JsonPatch | None = None
    proof: dict[str, Any] | None = None
    before: str = ""
    after: str = ""

    @property
    def name(self) -> str:
        return self.node


def describe_taint(taint: Mapping[str, Any]) -> str:
    value = as_text(taint.get("value"))
    return f"{as_text(taint.get('key'))}{'=' + value if value else ''}:{as_text(taint.get('effect'))}"


QUARANTINE_TAINT_TEXT = describe_taint(QUARANTINE_TAINT)


def marks_text(unschedulable: bool, taints: Sequence[Mapping[str, Any]], record: str | None) -> str:
    """A node's cordon, taints and quarantine record as lines, for Ansible's diff callback."""
    lines = [f"unschedulable: {'true' if unschedulable else 'false'}"]
    lines += [f"taint: {describe_taint(t)}" for t in taints]
    if record is not None:
        lines.append(f"annotation {RECORD_ANNOTATION}: {record}")
    return "\n".join(lines) + "\n"


def proof_pod_name(node: str) -> str:
    """A pod name per node, valid for any node name: part of the name and a digest of all of it."""
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    part = _NAME_PART.sub("-", node.lower())[:40].strip("-")
    return f"kubegpu-proof-{part}-{digest}" if part else f"kubegpu-proof-{digest}"


def proof_tolerations(options: ProofOptions) -> list[dict[str, Any]]:
    tolerations: list[dict[str, Any]] = []
    for toleration in (*options.tolerations, QUARANTINE_TOLERATION, UNSCHEDULABLE_TOLERATION):
        if dict(toleration) not in tolerations:
            tolerations.append(dict(toleration))
    return tolerations


def proof_pod(node: str, gpus: int, options: ProofOptions) -> dict[str, Any]:
    """The sample workload's pod, pinned to the node, tolerating its quarantine, asking for `gpus`."""
    pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": proof_pod_name(node),
            "namespace": options.namespace,
            "labels": dict(PROOF_LABELS),
            "annotations": {**options.annotations, PROOF_NODE_ANNOTATION: node},
        },
        "spec": {
            "restartPolicy": "Never",
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [pin]}}
            },
            "tolerations": proof_tolerations(options),
            "containers": [
                {
                    "name": PROOF_CONTAINER,
                    "image": options.image,
                    "command": list(options.command),
                    "resources": {"limits": {options.resource: str(gpus)}},
                }
            ],
        },
    }


def is_proof_pod(pod: Mapping[str, Any], node: str) -> bool:
    """Whether a pod is the collection's proof pod for this node (so it may delete it)."""
    metadata = as_mapping(pod.get("metadata"))
    labels = string_map(metadata.get("labels"))
    owned = all(labels.get(k) == v for k, v in PROOF_LABELS.items())
    return owned and string_map(metadata.get("annotations")).get(PROOF_NODE_ANNOTATION) == node


def _hit(kind: str, node: str, **fields: Any) -> Hit:
    return Hit(kind, {"node": node, **fields}, {"node": node})


def _removal_commands(node: ReleaseNode) -> str:
    commands = [f"kubectl annotate node {node.name} {RECORD_ANNOTATION}-"] if node.record_text is not None else []
    if any(is_quarantine_taint(t) for t in node.taints):
        commands.append(f"kubectl taint nodes {node.name} {QUARANTINE_TAINT_TEXT}-")
    return " and ".join(commands)


def _not_ours(node: ReleaseNode) -> ReleasePlan:
    """The plan for a node without a record of the collection's."""
    if node.record_text is not None:
        why = f"its {RECORD_ANNOTATION} annotation does not parse as this collection's record"
    elif any(is_quarantine_taint(t) for t in node.taints):
        why = f"it carries the taint {QUARANTINE_TAINT_TEXT} but no {RECORD_ANNOTATION} annotation"
    else:
        cordoned = " (it is cordoned, by someone else: it stays cordoned)" if node.unschedulable else ""
        return ReleasePlan(
            node.name, Verdict.NOT_QUARANTINED, hits=(_hit(kinds.NOT_QUARANTINED, node.name, cordoned=cordoned),)
        )
    hit = _hit(kinds.NOT_OURS, node.name, why=why, command=_removal_commands(node))
    return ReleasePlan(node.name, Verdict.NOT_OURS, hits=(hit,))


def _undo(node: ReleaseNode, record: Record) -> tuple[JsonPatch, JsonPatch, list[str], list[Hit], list[Mapping]]:
    """The guards and writes that undo what the record says the collection did, what they remove,
    what stays (as hits), and the taints after."""
    guards: JsonPatch = [
        {"op": "test", "path": json_pointer("metadata", "annotations", RECORD_ANNOTATION), "value": node.record_text}
    ]
    writes: JsonPatch = []
    removes: list[str] = []
    hits: list[Hit] = []
    taints = list(node.taints)
    ours = next((i for i, t in enumerate(node.taints) if is_quarantine_taint(t)), None)
    if ours is not None and record.tainted:
        path = json_pointer("spec", "taints", str(ours))
        guards.append({"op": "test", "path": path, "value": dict(node.taints[ours])})
        writes.append({"op": "remove", "path": path})
        removes.append(f"taint {describe_taint(node.taints[ours])}")
        del taints[ours]
    elif ours is not None:
        hits.append(_hit(kinds.TAINT_KEPT, node.name, taint=describe_taint(node.taints[ours])))
    if node.unschedulable and record.cordoned:
        guards.append({"op": "test", "path": "/spec/unschedulable", "value": True})
        writes.append({"op": "remove", "path": "/spec/unschedulable"})
        removes.append("cordon")
    elif node.unschedulable:
        hits.append(_hit(kinds.CORDON_KEPT, node.name))
    writes.append({"op": "remove", "path": json_pointer("metadata", "annotations", RECORD_ANNOTATION)})
    removes.append(f"annotation {RECORD_ANNOTATION}")
    return guards, writes, removes, hits, taints


def plan_release(node: ReleaseNode, options: ProofOptions) -> ReleasePlan:
    """The decision for one node. Only a node with the collection's record is released, and only
    the marks the record says the collection set go; the patch tests each of them and the record
    as read, so it applies only while they are unchanged."""
    record = read_record(node.record_text)
    if record is None:
        return _not_ours(node)
    guards, writes, removes, hits, taints_after = _undo(node, record)
    unschedulable_after = node.unschedulable and "cordon" not in removes
    before = marks_text(node.unschedulable, node.taints, node.record_text)
    after = marks_text(unschedulable_after, taints_after, None)
    gpus = options.gpus or gpu_count(node.capacity.get(options.resource))
    if gpus < 1:
        hits.append(_hit(kinds.NO_GPU_TO_PROVE, node.name, resource=options.resource))
        return ReleasePlan(node.name, Verdict.CANNOT_PROVE, tuple(removes), tuple(hits), before=before, after=before)
    return ReleasePlan(
        node.name,
        Verdict.RELEASE,
        tuple(removes),
        tuple(hits),
        patch=guards + writes,
        proof=proof_pod(node.name, gpus, options),
        before=before,
        after=after,
    )


def missing_plan(name: str) -> ReleasePlan:
    return ReleasePlan(name, Verdict.NO_SUCH_NODE, hits=(_hit(kinds.NO_SUCH_NODE, name),))


@dataclass(frozen=True)
class ProofOutcome:
    """What became of a proof pod: whether it passed, its phase, its container's exit, what the
    scheduler or the kubelet said, and the tail of its log."""

    passed: bool
    phase: str
    exit_code: int | None = None
    exit_reason: str = ""
    detail: str = ""
    timed_out: bool = False
    logs: tuple[str, ...] = ()
    scheduled: bool = True  # bound to a node: a Pending pod without spec.nodeName never was


def _container_state(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    statuses = [as_mapping(s) for s in as_list(as_mapping(pod.get("status")).get("containerStatuses"))]
    status = next((s for s in statuses if s.get("name") == PROOF_CONTAINER), statuses[0] if statuses else {})
    return as_mapping(status.get("state"))


def _scheduling_detail(status: Mapping[str, Any]) -> str:
    for condition in (as_mapping(c) for c in as_list(status.get("conditions"))):
        if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
            # As the scheduler (or the API server, for a gated pod) wrote it: "Unschedulable: 0/3 nodes are
            # available: ...", "SchedulingGated: Scheduling is blocked due to non-empty scheduling gates".
            words = [as_text(condition.get(k)) for k in ("reason", "message")]
            return ": ".join(w for w in words if w) or "not scheduled"
    return ""


def judge_proof(pod: Mapping[str, Any] | None, finished: bool, logs: Sequence[str] = ()) -> ProofOutcome:
    """The proof passes only when its pod Succeeded; Running is not enough, nor is a pod that is gone."""
    if not pod:
        return ProofOutcome(False, "Gone", detail="the proof pod was deleted before it finished")
    status = as_mapping(pod.get("status"))
    phase = as_text(status.get("phase")) or "Pending"
    state = _container_state(pod)
    terminated, waiting = as_mapping(state.get("terminated")), as_mapping(state.get("waiting"))
    exit_code = terminated.get("exitCode") if isinstance(terminated.get("exitCode"), int) else None
    exit_reason = as_text(terminated.get("reason")) or as_text(waiting.get("reason"))
    detail = (
        _scheduling_detail(status)
        or as_text(terminated.get("message"))
        or as_text(waiting.get("message"))
        or as_text(status.get("message"))
        or as_text(status.get("reason"))
    )
    passed = finished and phase == "Succeeded"
    scheduled = phase != "Pending" or bool(as_text(as_mapping(pod.get("spec")).get("nodeName")))
    return ProofOutcome(
        passed, phase, exit_code, exit_reason, detail, timed_out=not finished, logs=tuple(logs), scheduled=scheduled
    )


NO_REASON = "no reason given"
# A pod no scheduler has tried yet: the default scheduler sets PodScheduled False with its reason on a failure.
NO_SCHEDULER_REASON = "no scheduler has said why: the pod has no PodScheduled condition"


def proof_hit(node: str, pod: str, outcome: ProofOutcome, timeout: float) -> Hit:
    """Why the proof did not pass, as a finding of the node."""
    where = {"node": node, "pod": pod}
    if outcome.timed_out:
        detail = outcome.detail or outcome.exit_reason or (NO_REASON if outcome.scheduled else NO_SCHEDULER_REASON)
        return Hit(
            kinds.PROOF_TIMED_OUT,
            {"node": node, "pod": pod, "phase": outcome.phase, "timeout": f"{timeout:g}", "detail": detail},
            where,
            case="" if outcome.scheduled else kinds.NEVER_SCHEDULED,
        )
    exit_text = ", ".join(
        part
        for part in (
            f"exit code {outcome.exit_code}" if outcome.exit_code is not None else "",
            outcome.exit_reason,
            outcome.detail,
        )
        if part
    )
    fields = {
        "node": node,
        "pod": pod,
        "phase": outcome.phase,
        "exit": exit_text or "no exit status",
        "last_line": outcome.logs[-1] if outcome.logs else "(none)",
    }
    return Hit(kinds.PROOF_FAILED, fields, where)


def finding_dict(hit: Hit) -> dict[str, Any]:
    """A finding of the release: the one shape, and its places (node, pod) beside it as before."""
    finding = KINDS.finding(hit)
    return legacy(finding, **finding.where)
