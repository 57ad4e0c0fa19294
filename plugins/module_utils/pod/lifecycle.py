# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One pod, idempotently: the manifest digest, the plan, the waits and where it landed."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import detect_model
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import FINISHED_POD_PHASES

DIGEST_ANNOTATION = "kubegpu.io/manifest-sha256"


class PodDefinitionError(OptionError):
    """A definition that is not a single, named Pod."""


def checked_definition(definition: Any, namespace: str | None) -> dict:
    """The definition as a Pod in its namespace, or PodDefinitionError saying what is wrong."""
    if not isinstance(definition, dict):
        raise PodDefinitionError(f"definition must be a mapping (one Pod), got {type(definition).__name__}")
    if definition.get("kind") != "Pod" or definition.get("apiVersion") != "v1":
        raise PodDefinitionError(
            f"definition must be apiVersion v1, kind Pod; got {definition.get('apiVersion')!r}, "
            f"{definition.get('kind')!r}"
        )
    metadata = definition.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise PodDefinitionError("definition.metadata.name is required")
    if not isinstance(definition.get("spec"), dict):
        raise PodDefinitionError("definition.spec is required")
    ns = namespace or metadata.get("namespace") or "default"
    if metadata.get("namespace") not in (None, ns):
        raise PodDefinitionError(
            f"definition.metadata.namespace {metadata['namespace']!r} differs from namespace {ns!r}"
        )
    return {**definition, "metadata": {**metadata, "namespace": ns}}


def manifest_digest(definition: Mapping[str, Any]) -> str:
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def with_digest(definition: dict, digest: str) -> dict:
    metadata = definition["metadata"]
    annotations = dict(metadata.get("annotations") or {}, **{DIGEST_ANNOTATION: digest})
    return {**definition, "metadata": {**metadata, "annotations": annotations}}


def digest_of(pod: Mapping[str, Any] | None) -> str | None:
    """The digest of the manifest an existing pod was created from, as its annotation keeps it."""
    return ((pod or {}).get("metadata", {}).get("annotations") or {}).get(DIGEST_ANNOTATION)


def plan_present(existing: Mapping[str, Any] | None, digest: str, recreate: bool) -> str:
    """create | unchanged | recreate | conflict."""
    if existing is None:
        return "create"
    if digest_of(existing) == digest:
        return "unchanged"
    return "recreate" if recreate else "conflict"


def condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for item in pod.get("status", {}).get("conditions") or []:
        if item.get("type") == kind:
            return item
    return {}


def pod_summary(pod: Mapping[str, Any]) -> dict:
    status = pod.get("status", {})
    scheduled = condition(pod, "PodScheduled")
    return {
        "phase": status.get("phase"),
        "node": pod.get("spec", {}).get("nodeName"),
        "ready": condition(pod, "Ready").get("status") == "True",
        "scheduled": scheduled.get("status") == "True",
        "scheduler_reason": scheduled.get("reason"),
        "scheduler_message": scheduled.get("message"),
    }


def is_settled(summary: Mapping[str, Any]) -> bool:
    return summary["phase"] == "Running" or summary["phase"] in FINISHED_POD_PHASES


def timeout_message(name: str, namespace: str, summary: Mapping[str, Any], timeout: float) -> str:
    where = f"pod {namespace}/{name}"
    if not summary["scheduled"]:
        reason = summary["scheduler_message"] or summary["scheduler_reason"] or "no scheduling decision yet"
        return f"{where} was not scheduled within {timeout:g}s: {reason}"
    return f"{where} is on node {summary['node']} but still {summary['phase']} after {timeout:g}s"


def pod_path(namespace: str, name: str | None = None, subresource: str | None = None) -> str:
    return api_path("v1", "pods", name, namespace=namespace, subresource=subresource)


def read_pod(client: KubeClient, namespace: str, name: str) -> dict | None:
    """The pod as the cluster holds it; None when it is gone."""
    return client.find(pod_path(namespace, name))


def ensure_namespace(client: KubeClient, namespace: str) -> None:
    try:
        client.get(api_path("v1", "namespaces", namespace))
    except ClusterError as exc:
        if exc.status != 404:
            raise
        client.create(
            api_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )


def _service_account_pending(exc: ClusterError) -> bool:
    """A new namespace refuses pods until its default ServiceAccount exists (a few seconds)."""
    return exc.status == 403 and 'serviceaccount "default" not found' in exc.message


def create_pod(client: KubeClient, namespace: str, body: dict, timeout: float) -> None:
    """Create the pod, waiting (bounded) for a new namespace's default ServiceAccount."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.create(pod_path(namespace), body)
            return
        except ClusterError as exc:
            if not _service_account_pending(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(1)


def wait_for(
    probe: Callable[[], Any],
    done: Callable[[Any], bool],
    timeout: float,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple:
    """Poll until done(value); returns (value, finished in time)."""
    deadline = clock() + timeout
    while True:
        value = probe()
        if done(value):
            return value, True
        if clock() >= deadline:
            return value, False
        sleep(interval)


def delete_and_wait(client: KubeClient, namespace: str, name: str, timeout: float) -> None:
    client.delete(pod_path(namespace, name))
    _last, gone = wait_for(lambda: read_pod(client, namespace, name), lambda pod: pod is None, timeout)
    if not gone:
        raise ClusterError(f"pod {namespace}/{name} was still terminating after {timeout:g}s")


def landed_on(client: KubeClient, node_name: str | None, model_label_keys: Any = None) -> dict:
    """The node a pod runs on and the GPU model its labels name."""
    if not node_name:
        return {"node": None, "model": None}
    labels = client.get(api_path("v1", "nodes", node_name)).get("metadata", {}).get("labels") or {}
    detection = detect_model(labels, model_label_keys) if model_label_keys else detect_model(labels)
    return {"node": node_name, "model": detection.model, "model_source": detection.source}
