# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evictions through the Eviction API, as every write that takes GPUs out of service does them:
the pods to evict with the PodDisruptionBudgets that select them (from one list of each), one
eviction per pod, a bounded number in flight, a budget's 429 retried with back-off until the run's
timeout, then the pod reported blocked, or deleted past its budget when asked; what they did, as
the modules return it and as findings. Never a `NoExecute` taint: it evicts past the budgets."""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import quarantine as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import plugin_finding
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import is_static_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import pod_gpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube import plain
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    ClusterError,
    budget_named,
    error_context,
    error_status,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.retries import backoff_delay
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import (
    LabelSelector,
    parse_label_selector,
    selector_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.node_patches import in_parallel

POLICY_API_VERSION = "policy/v1"
BUDGETS = "poddisruptionbudgets"

EVICTED = "evicted"
POD_GONE = "gone"
BLOCKED = "blocked"
DELETED = "deleted"
FAILED = "failed"
NOT_ATTEMPTED = "not_attempted"

TOO_MANY_REQUESTS = 429
NOT_FOUND = 404
# A pod several budgets select: the API server answers 500 and never evicts it.
SEVERAL_BUDGETS = "more than one PodDisruptionBudget"
# Statuses about one pod only; the others mean the API server takes no writes now.
_OBJECT_ONLY = frozenset({400, 404, 409, 422, TOO_MANY_REQUESTS})
MAX_EVICTION_BACKOFF = 5.0

LEFT_DAEMONSET = "DaemonSet pod: its controller puts it back on the node"
LEFT_MIRROR = "mirror pod of a static pod: the API cannot evict it"
LEFT_TERMINATING = "already being deleted"


# --- the pods and their budgets ------------------------------------------------------------------


@dataclass(frozen=True)
class PodName:
    namespace: str
    name: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class CompactPod(PodName):
    """What an eviction reads of a pod: its node, labels (budgets select on them), GPUs, and
    whether it is a DaemonSet pod, a mirror pod or being deleted."""

    node: str
    labels: Mapping[str, str]
    gpus: Mapping[str, int]
    daemonset: bool
    mirror: bool
    terminating: bool

    @property
    def left_because(self) -> str:
        """Why the pod is not evicted, as `kubectl drain` leaves it; empty when it is evicted."""
        if self.mirror:
            return LEFT_MIRROR
        if self.daemonset:
            return LEFT_DAEMONSET
        return LEFT_TERMINATING if self.terminating else ""


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget: the pods it selects and how many disruptions it allows now."""

    namespace: str
    name: str
    # None with `selects_all` False: it selects no pod (no selector); with `selects_all`, every pod
    # of its namespace (an empty selector, as policy/v1 reads it).
    selector: LabelSelector | None
    selects_all: bool
    disruptions_allowed: int
    # Whether the disruption controller has looked at this generation of it (its status is current).
    current: bool

    def selects(self, pod: CompactPod) -> bool:
        if pod.namespace != self.namespace:
            return False
        return self.selects_all or (self.selector is not None and self.selector.matches(pod.labels))


@dataclass(frozen=True)
class BudgetRef:
    name: str
    disruptions_allowed: int
    current: bool

    @property
    def allows(self) -> bool:
        return self.current and self.disruptions_allowed > 0


@dataclass(frozen=True)
class PodEviction(PodName):
    """A GPU pod to evict, with the budgets that select it."""

    node: str
    gpus: Mapping[str, int]
    budgets: tuple[BudgetRef, ...] = ()

    @property
    def blocking(self) -> tuple[str, ...]:
        """The budgets that would refuse its eviction now (a pod that several budgets select is
        refused by the API server whatever they allow)."""
        if len(self.budgets) > 1:
            return tuple(b.name for b in self.budgets)
        return tuple(b.name for b in self.budgets if not b.allows)


def project_pod(item: object, nodes: frozenset[str], is_gpu: Callable[[str], bool]) -> CompactPod | None:
    """The fields of a pod on one of `nodes` that quarantine needs; None for any other pod and for
    finished pods, so a fleet's list costs little more than a look at each pod's node."""
    pod = plain.as_mapping(item)
    spec = plain.as_mapping(pod.get("spec"))
    node = spec.get("nodeName")
    if node not in nodes:
        return None
    metadata = plain.as_mapping(pod.get("metadata"))
    status = plain.as_mapping(pod.get("status"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name or status.get("phase") in FINISHED_POD_PHASES:
        return None
    owners = [plain.as_mapping(o) for o in plain.as_list(metadata.get("ownerReferences"))]
    kinds = [plain.as_text(o.get("kind")) for o in owners]
    return CompactPod(
        namespace=sys.intern(plain.as_text(metadata.get("namespace"))),
        name=name,
        node=str(node),
        labels=plain.string_map(metadata.get("labels")),
        # GPUs a DeviceClass serves from a DRA claim for an extended resource are in the limits too.
        gpus=pod_gpus(spec, is_gpu),
        daemonset="DaemonSet" in kinds,
        mirror=is_static_pod(plain.string_map(metadata.get("annotations")), kinds),
        terminating=metadata.get("deletionTimestamp") is not None,
    )


def project_budget(item: object) -> Budget | None:
    parts = plain.object_parts(item)
    if parts is None:
        return None
    name, metadata, spec, status = parts
    raw = spec.get("selector")
    selector, selects_all = None, False
    if isinstance(raw, dict):
        text = selector_text(raw)
        if text is not None:
            selector = parse_label_selector(text)
        else:
            # policy/v1: an empty selector selects every pod of the namespace; one that cannot be
            # read here is taken to select every pod too, so it is never overlooked.
            selects_all = True
    generation, observed = (
        plain.optional_int(metadata.get("generation")),
        plain.optional_int(status.get("observedGeneration")),
    )
    return Budget(
        namespace=plain.as_text(metadata.get("namespace")),
        name=name,
        selector=selector,
        selects_all=selects_all,
        disruptions_allowed=plain.optional_int(status.get("disruptionsAllowed")) or 0,
        current=observed is not None and (generation is None or observed >= generation),
    )


def pod_eviction(pod: CompactPod, budgets: Sequence[Budget]) -> PodEviction:
    refs = tuple(BudgetRef(b.name, b.disruptions_allowed, b.current) for b in budgets if b.selects(pod))
    return PodEviction(pod.namespace, pod.name, pod.node, dict(pod.gpus), refs)


def eviction_entry(pod: PodEviction) -> dict[str, Any]:
    return {
        "pod": pod.ref,
        "node": pod.node,
        "gpus": dict(pod.gpus),
        "budgets": [
            {"name": b.name, "disruptions_allowed": b.disruptions_allowed, "allows": b.allows} for b in pod.budgets
        ],
        "blocked_by": list(pod.blocking),
    }


# --- the evictions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvictionResult:
    pod: PodEviction
    status: str
    detail: str = ""
    attempts: int = 0

    @property
    def budgets(self) -> tuple[str, ...]:
        """The budgets that kept the pod: those the plan saw refusing, else the one the API server's
        refusal names (a budget that allowed a disruption when read, and none when asked)."""
        named = budget_named(self.detail)
        return self.pod.blocking or ((named,) if named else ())


@dataclass(frozen=True)
class EvictionSettings:
    timeout: float
    force_delete: bool = False
    parallelism: int = 16
    backoff: float = 0.5


@dataclass(frozen=True)
class EvictionCalls:
    """What evictions go through: the eviction and the deletion of one pod, the failures they raise
    that are answers about that pod, and the clock and sleep the back-off runs on."""

    evict: Callable[[PodEviction], object]
    delete: Callable[[PodEviction], object]
    errors: tuple[type[BaseException], ...] = (Exception,)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def _evict_one(
    pod: PodEviction, calls: EvictionCalls, settings: EvictionSettings, deadline: float, stop: threading.Event
) -> EvictionResult:
    attempt = 0
    detail = ""
    while True:
        if stop.is_set():
            return EvictionResult(pod, NOT_ATTEMPTED, attempts=attempt)
        attempt += 1
        try:
            calls.evict(pod)
            return EvictionResult(pod, EVICTED, attempts=attempt)
        except calls.errors as exc:
            status, detail = error_status(exc), str(exc)
            if status == NOT_FOUND:
                return EvictionResult(pod, POD_GONE, attempts=attempt)
            if SEVERAL_BUDGETS in detail:
                break
            if status != TOO_MANY_REQUESTS:
                if status not in _OBJECT_ONLY:
                    stop.set()
                return EvictionResult(pod, FAILED, detail, attempt)
        remaining = deadline - calls.clock()
        if remaining <= 0:
            break
        calls.sleep(min(backoff_delay(attempt - 1, settings.backoff), MAX_EVICTION_BACKOFF, remaining))
    if not settings.force_delete:
        return EvictionResult(pod, BLOCKED, detail, attempt)
    try:
        calls.delete(pod)
    except calls.errors as exc:
        return EvictionResult(pod, FAILED, f"{detail}; then deleting it failed: {exc}", attempt)
    return EvictionResult(pod, DELETED, detail, attempt)


def evict_pods(pods: Sequence[PodEviction], calls: EvictionCalls, settings: EvictionSettings) -> list[EvictionResult]:
    """Evict every pod through `calls.evict`, `settings.parallelism` in flight; a pod its budget keeps
    (429) is tried again with back-off until `settings.timeout` seconds after the start, then reported
    blocked, or deleted through `calls.delete` with `force_delete`."""
    if not pods:
        return []
    deadline = calls.clock() + settings.timeout
    stop = threading.Event()
    return in_parallel(lambda pod: _evict_one(pod, calls, settings, deadline, stop), pods, settings.parallelism)


# --- reads and writes ----------------------------------------------------------------------------


def read_budgets(client: KubeClient, page_size: int = 500) -> list[Budget]:
    """Every PodDisruptionBudget, in one paginated list."""
    with error_context("cannot list PodDisruptionBudgets"):
        items = client.list_items(api_path(POLICY_API_VERSION, BUDGETS), page_size=page_size)
        return [b for b in map(project_budget, items) if b is not None]


def eviction_client(client: KubeClient) -> KubeClient:
    """A client for evictions that does not retry on its own: a 429 is a budget's answer, retried
    with the run's back-off until its timeout, not the client's ten throttle retries."""
    evicting = copy.copy(client)
    evicting.retries = 0
    evicting.request_count = evicting.write_count = 0
    return evicting


def evict_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    body = {
        "apiVersion": POLICY_API_VERSION,
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    return client.create(api_path("v1", "pods", name, namespace=namespace, subresource="eviction"), body)


def delete_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    return client.delete(api_path("v1", "pods", name, namespace=namespace))


def evict_through(client: KubeClient, pods: Sequence[PodEviction], settings: EvictionSettings) -> list[EvictionResult]:
    """`evict_pods` on the cluster, through a client of its own (see `eviction_client`) whose
    requests are counted on `client` once they are done."""
    evicting = eviction_client(client)
    calls = EvictionCalls(
        evict=lambda pod: evict_pod(evicting, pod.namespace, pod.name),
        delete=lambda pod: delete_pod(evicting, pod.namespace, pod.name),
        errors=(ClusterError,),
    )
    try:
        return evict_pods(pods, calls, settings)
    finally:
        client.request_count += evicting.request_count
        client.write_count += evicting.write_count


# --- what the evictions report -------------------------------------------------------------------


def _finding(kind: str, pod: PodEviction, **fields: Any) -> dict[str, Any]:
    return plugin_finding(KINDS.finding(Hit(kind, dict(fields, pod=pod.ref), {"node": pod.node, "subject": pod.ref})))


def eviction_findings(evictions: Sequence[EvictionResult], timeout: float) -> list[dict[str, Any]]:
    """Pods their budget kept, pods deleted past their budget, pods whose eviction failed."""
    found = []
    for result in evictions:
        pod = result.pod
        budgets = ", ".join(f"PodDisruptionBudget {pod.namespace}/{b}" for b in result.budgets) or "its budget"
        if result.status == BLOCKED:
            found.append(
                _finding(
                    kinds.EVICTION_BLOCKED,
                    pod,
                    node=pod.node,
                    budgets=budgets,
                    timeout=f"{timeout:g}",
                    detail=result.detail,
                )
            )
        elif result.status == DELETED:
            found.append(_finding(kinds.POD_DELETED, pod, node=pod.node, budgets=budgets, timeout=f"{timeout:g}"))
        elif result.status in (FAILED, NOT_ATTEMPTED):
            error = result.detail or "not attempted: the API server failed on another pod first"
            found.append(_finding(kinds.EVICTION_FAILED, pod, node=pod.node, error=error))
    return found


def eviction_lists(evictions: Sequence[EvictionResult] | None) -> dict[str, Any]:
    """The result's lists of the evictions (all empty when the run evicted nothing): `evicted` (or
    gone already), `blocked` with the budgets, `deleted` past their budget, `eviction_failed`."""
    by_status: dict[str, list[str]] = {}
    for result in evictions or []:
        by_status.setdefault(result.status, []).append(result.pod.ref)
    return {
        "evicted": by_status.get(EVICTED, []) + by_status.get(POD_GONE, []),
        "blocked": [
            {"pod": r.pod.ref, "node": r.pod.node, "budgets": list(r.budgets), "error": r.detail}
            for r in evictions or []
            if r.status == BLOCKED
        ],
        "deleted": by_status.get(DELETED, []),
        "eviction_failed": [
            {"pod": r.pod.ref, "error": r.detail or "not attempted"}
            for r in evictions or []
            if r.status in (FAILED, NOT_ATTEMPTED)
        ],
    }


def blocked_warning(blocked: Sequence[Mapping[str, Any]], where: str = "quarantined nodes") -> str | None:
    """The warning that names the pods their budget kept on `where`; None when there are none."""
    if not blocked:
        return None
    named = "; ".join(f"{b['pod']} (PodDisruptionBudget {', '.join(b['budgets']) or '?'})" for b in blocked[:10])
    more = f" and {len(blocked) - 10} more" if len(blocked) > 10 else ""
    return f"{len(blocked)} GPU pod(s) stay on {where}, kept by their budget: {named}{more}"
