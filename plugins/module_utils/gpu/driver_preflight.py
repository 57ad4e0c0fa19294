# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What will block a driver upgrade on a node, found before anything is written.

- GPU use without a request: a pod that reaches GPUs through NVIDIA_VISIBLE_DEVICES, the nvidia
  runtime class or a privileged GPU container without holding a GPU is invisible to the upgrade
  controller, which deletes only the pods that hold GPUs, so the driver stays in use
  (gpu-operator#2509, "driver is in use").
- A pod of a GPU DaemonSet: the controller's drain ignores DaemonSet pods (gpu-operator#2570,
  k8s-operator-libs#150), and the DaemonSet puts the pod back anyway.
- A DRA claim holder: the driver manager evicted DRA claim holders only from k8s-driver-manager#204.
- A pod under a PodDisruptionBudget that allows no disruption: its eviction is refused.
- A pod whose CUDA needs a newer driver than the target: it fails to start after the upgrade
  ("unsatisfied condition: cuda>=X.Y").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.cuda_requirements import unmet_need
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import (
    CLUSTER_POLICY_KIND,
    NVIDIA_DRIVER_KIND,
    is_driver_daemonset,
    owner,
    version_key,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import GPU_WORDS_RE, known_family
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import containers_of, pod_gpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import (
    VISIBLE_DEVICES,
    selects_gpus,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    string_map,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import (
    LabelSelector,
    parse_label_selector,
    selector_text,
)

GPU_USE_WITHOUT_REQUEST = "gpu-use-without-request"
GPU_DAEMONSET_POD = "gpu-daemonset-pod"
DRA_CLAIM_HOLDER = "dra-claim-holder"
BUDGET_ALLOWS_NO_DISRUPTION = "budget-allows-no-disruption"
CUDA_NEEDS_NEWER_DRIVER = "cuda-needs-newer-driver"
REASONS = (
    GPU_USE_WITHOUT_REQUEST,
    GPU_DAEMONSET_POD,
    DRA_CLAIM_HOLDER,
    BUDGET_ALLOWS_NO_DISRUPTION,
    CUDA_NEEDS_NEWER_DRIVER,
)
ALL_CONTAINERS = ("initContainers", "containers", "ephemeralContainers")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
EVERY_POD = LabelSelector("", ())


@dataclass(frozen=True)
class Blocker:
    node: str
    namespace: str
    pod: str
    reason: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {
            "node": self.node,
            "namespace": self.namespace,
            "pod": self.pod,
            "reason": self.reason,
            "detail": self.detail,
        }


def _is_gpu(name: str) -> bool:
    return name == "nvidia.com/gpu" or name.startswith("nvidia.com/mig-")


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return as_mapping(obj.get("metadata"))


def _claims_of(pod: Mapping[str, Any]) -> list[str]:
    spec, status = as_mapping(pod.get("spec")), as_mapping(pod.get("status"))
    names = [as_mapping(c).get("resourceClaimName") for c in as_list(spec.get("resourceClaims"))]
    names += [as_mapping(c).get("resourceClaimName") for c in as_list(status.get("resourceClaimStatuses"))]
    return [n for n in names if isinstance(n, str) and n]


def _privileged_gpu_image(container: Mapping[str, Any]) -> bool:
    context = as_mapping(container.get("securityContext"))
    adds = {as_text(c) for c in as_list(as_mapping(context.get("capabilities")).get("add"))}
    if context.get("privileged") is not True and "SYS_ADMIN" not in adds:
        return False
    image = as_text(container.get("image"))
    return known_family(image) is not None or bool(GPU_WORDS_RE.search(image))


def gpu_use_without_request(spec: Mapping[str, Any]) -> list[str]:
    """How a pod spec that holds no GPU and no claim reaches GPUs anyway, in words (empty when it does not):
    NVIDIA_VISIBLE_DEVICES selecting GPUs (the toolkit's reading, gpu/visible_devices.py), an nvidia
    runtime class, or a privileged container of a GPU image (gpu/intent.py)."""
    found = []
    runtime = spec.get("runtimeClassName")
    if isinstance(runtime, str) and "nvidia" in runtime.lower():
        found.append(f"runtimeClassName {runtime}")
    for kind in ALL_CONTAINERS:
        for container in containers_of(spec, kind):
            name = as_text(container.get("name"))
            for entry in map(as_mapping, as_list(container.get("env"))):
                value = entry.get("value")
                if entry.get("name") == VISIBLE_DEVICES and isinstance(value, str) and selects_gpus(value):
                    found.append(f"container {name}: {VISIBLE_DEVICES}={value}")
            if _privileged_gpu_image(container):
                found.append(f"container {name}: privileged, image {as_text(container.get('image'))}")
    if found and (pod_gpus(spec, _is_gpu) or as_list(spec.get("resourceClaims"))):
        return []  # it holds GPUs: the controller sees it and deletes it
    return found


def gpu_daemonsets(daemonsets: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The DaemonSets whose pods use GPUs (they hold GPUs or reach them without a request), leaving out
    the driver's own and those the GPU Operator manages (its driver manager stops them itself)."""
    found = []
    for ds in daemonsets:
        labels = string_map(_meta(ds).get("labels"))
        if is_driver_daemonset(labels) or owner(ds, CLUSTER_POLICY_KIND) or owner(ds, NVIDIA_DRIVER_KIND):
            continue
        spec = as_mapping(as_mapping(as_mapping(ds.get("spec")).get("template")).get("spec"))
        if pod_gpus(spec, _is_gpu) or gpu_use_without_request(spec):
            found.append(ds)
    return found


def _evictable(pod: Mapping[str, Any]) -> bool:
    meta = _meta(pod)
    return owner(pod, "DaemonSet") is None and MIRROR_ANNOTATION not in string_map(meta.get("annotations"))


def _budget_selector(budget: Mapping[str, Any]) -> LabelSelector | None:
    """The budget's pod selector, parsed; None for one that selects no pod (policy/v1: a null selector selects
    none, an empty one every pod of the namespace)."""
    selector = as_mapping(budget.get("spec")).get("selector")
    if not isinstance(selector, dict):
        return None
    text = selector_text(selector)
    if text is None:
        return EVERY_POD if not selector.get("matchLabels") and not selector.get("matchExpressions") else None
    return parse_label_selector(text)


@dataclass(frozen=True)
class Prepared:
    """The budgets that allow no disruption now (by namespace, with their parsed selectors) and the allocated
    claims (by namespace and name, with their drivers), worked out once for a fleet: upgrade_blockers takes
    them in place of the budgets and the claims, so that a caller judging many nodes reads each once."""

    budgets: Mapping[str, list[tuple[str, LabelSelector]]]
    claims: Mapping[tuple[str, str], str]


def prepare(budgets: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]) -> Prepared:
    return Prepared(strict_budgets(budgets), _claim_holders(claims))


def strict_budgets(budgets: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[str, LabelSelector]]]:
    """The budgets that allow no disruption now, by namespace, with their parsed selectors."""
    found: dict[str, list[tuple[str, LabelSelector]]] = {}
    for budget in budgets:
        selector = _budget_selector(budget) if allows_no_disruption(budget) else None
        if selector is not None:
            meta = _meta(budget)
            found.setdefault(as_text(meta.get("namespace")), []).append((as_text(meta.get("name")), selector))
    return found


def allows_no_disruption(budget: Mapping[str, Any]) -> bool:
    """Whether a budget refuses every eviction now: status.disruptionsAllowed 0 where the disruption
    controller has judged it, else spec.maxUnavailable 0."""
    status = as_mapping(budget.get("status"))
    if "disruptionsAllowed" in status and status.get("observedGeneration") is not None:
        return status.get("disruptionsAllowed") == 0
    return as_mapping(budget.get("spec")).get("maxUnavailable") in (0, "0", "0%")


def _daemonset_keys(daemonsets: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {(as_text(_meta(d).get("namespace")), as_text(_meta(d).get("name"))) for d in daemonsets}


def _claim_holders(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """Allocated claims by (namespace, name), with the drivers that allocated them."""
    held = {}
    for claim in claims:
        allocation = as_mapping(as_mapping(claim.get("status")).get("allocation"))
        if not allocation:
            continue
        results = as_list(as_mapping(allocation.get("devices")).get("results"))
        drivers = sorted({as_text(as_mapping(r).get("driver")) for r in results} - {""})
        meta = _meta(claim)
        held[(as_text(meta.get("namespace")), as_text(meta.get("name")))] = ", ".join(drivers) or "a DRA driver"
    return held


def _pod_blockers(
    pod: Mapping[str, Any],
    budgets: Mapping[str, list[tuple[str, LabelSelector]]],
    held: Mapping[tuple[str, str], str],
    daemonsets: set[tuple[str, str]],
    target: tuple[int, ...] | None,
) -> Iterator[tuple[str, str]]:
    spec, namespace = as_mapping(pod.get("spec")), as_text(_meta(pod).get("namespace"))
    ds = owner(pod, "DaemonSet")
    if ds is not None and (namespace, ds[1]) in daemonsets:
        yield GPU_DAEMONSET_POD, f"DaemonSet {ds[1]} uses GPUs; a drain leaves DaemonSet pods in place"
    uses = gpu_use_without_request(spec)
    if uses:
        yield GPU_USE_WITHOUT_REQUEST, "; ".join(uses)
    for claim in _claims_of(pod):
        if (namespace, claim) in held:
            yield DRA_CLAIM_HOLDER, f"holds ResourceClaim {claim} allocated by {held[(namespace, claim)]}"
            break
    if namespace in budgets and _evictable(pod):
        labels = string_map(_meta(pod).get("labels"))
        for name, selector in budgets[namespace]:
            if selector.matches(labels):
                yield BUDGET_ALLOWS_NO_DISRUPTION, f"PodDisruptionBudget {name} allows no disruption"
                break
    if target is not None:
        containers = [c for kind in ALL_CONTAINERS for c in containers_of(spec, kind)]
        unmet = unmet_need(containers, target)
        if unmet is not None:
            name, need, minimum = unmet
            yield CUDA_NEEDS_NEWER_DRIVER, f"container {name} needs CUDA {need.text} ({need.source}): driver {minimum}"


def upgrade_blockers(
    node_name: str,
    pods: Iterable[Mapping[str, Any]],
    budgets: Sequence[Mapping[str, Any]] | Prepared,
    claims: Iterable[Mapping[str, Any]],
    gpu_daemonsets: Iterable[Mapping[str, Any]],
    target_driver: str | None,
) -> tuple[Blocker, ...]:
    """The blockers of a driver upgrade to `target_driver` (None: leave the CUDA check out) on one node,
    from the pods (those bound elsewhere or finished are skipped), PodDisruptionBudgets, ResourceClaims
    and the GPU DaemonSets (see gpu_daemonsets). For many nodes, pass ``prepare(budgets, claims)``, made
    once, as `budgets` (`claims` is then not read)."""
    prepared = budgets if isinstance(budgets, Prepared) else prepare(budgets, claims)
    held, strict = prepared.claims, prepared.budgets
    daemonsets = _daemonset_keys(gpu_daemonsets)
    target = version_key(target_driver) if target_driver else None
    found = []
    for pod in pods:
        spec, meta = as_mapping(pod.get("spec")), _meta(pod)
        if spec.get("nodeName") != node_name or as_mapping(pod.get("status")).get("phase") in FINISHED_POD_PHASES:
            continue
        if is_driver_daemonset(as_mapping(meta.get("labels"))):
            continue
        for reason, detail in _pod_blockers(pod, strict, held, daemonsets, target):
            found.append(Blocker(node_name, as_text(meta.get("namespace")), as_text(meta.get("name")), reason, detail))
    return tuple(found)
