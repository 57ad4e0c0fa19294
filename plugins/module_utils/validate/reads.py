# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the live audit reads from the cluster: workloads, pods, and the env sources they name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path, collection_paths
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    LIVE_WORKLOAD_PATHS,
    PodSpecSite,
    object_ref,
    select_live_objects,
    walk_document,
    with_kind,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import PodChecker, RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import (
    Report,
    ValidationResult,
    check_sites,
    pod_site,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import (
    SourceData,
    config_map_values,
    secret_values,
)


class ClusterEnvSources:
    """ConfigMaps and Secrets read from the cluster on first reference, one GET each, cached.

    `client` needs a `get(path)` that raises an exception with a `status` attribute. Secret
    values are used to judge the NVIDIA variables only; they never appear in any message.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._cache: dict[tuple[str, str, str], SourceData | None] = {}
        self.problems: list[str] = []

    def _fetch(self, kind: str, resource: str, namespace: str, name: str) -> SourceData | None:
        key = (kind, namespace, name)
        if key not in self._cache:
            self._cache[key] = self._read(kind, resource, namespace, name)
        return self._cache[key]

    def _read(self, kind: str, resource: str, namespace: str, name: str) -> SourceData | None:
        where = f"{kind} {namespace}/{name} in the cluster"
        try:
            obj = self._client.get(api_path("v1", resource, name, namespace=namespace))
        except Exception as exc:  # noqa: BLE001 - any failure of the client's own error types means "unknown"
            if getattr(exc, "status", None) == 404:
                return SourceData({}, where, secret=kind == "Secret", absent=True)
            self.problems.append(f"could not read {where}: {getattr(exc, 'message', None) or exc}")
            return None
        if not isinstance(obj, dict):
            return None
        values = secret_values(obj) if kind == "Secret" else config_map_values(obj)
        return SourceData(values, where, secret=kind == "Secret")

    def config_map(self, namespace: str, name: str) -> SourceData | None:
        return self._fetch("ConfigMap", "configmaps", namespace, name) if namespace and name else None

    def secret(self, namespace: str, name: str) -> SourceData | None:
        return self._fetch("Secret", "secrets", namespace, name) if namespace and name else None


def live_report(client: Any, config: RuleConfig, namespaces: Iterable[str] | None = None) -> Report:
    """Audit the cluster: top-level workload templates, and the pods they do not cover.

    `client` needs `list_items(path)` (paginated) and `get(path)`; its errors propagate.
    """
    chosen = sorted(set(namespaces)) if namespaces else None
    workloads = [
        with_kind(item, api_version, kind)
        for api_version, kind, resource in LIVE_WORKLOAD_PATHS
        for path in collection_paths(api_version, resource, chosen)
        for item in client.list_items(path)
        if isinstance(item, dict)
    ]
    pods = [
        with_kind(item, "v1", "Pod")
        for path in collection_paths("v1", "pods", chosen)
        for item in client.list_items(path)
        if isinstance(item, dict)
    ]
    selection = select_live_objects(workloads, pods)
    sources = ClusterEnvSources(client)
    checker = PodChecker(config, sources)
    result = ValidationResult()
    for obj in selection.workloads + selection.pods:
        sites, skipped = walk_document(obj, source="cluster")
        result.not_checked += skipped
        check_sites(checker, sites, result)
    ephemeral: list[PodSpecSite] = []
    for pod in selection.ephemeral_only_pods:
        site = pod_site(pod, object_ref(pod, source="cluster"), ephemeral_only=True)
        if site is not None:
            ephemeral.append(site)
    check_sites(checker, ephemeral, result)
    notes = [
        (
            f"live: checked {len(selection.workloads)} workloads and {len(selection.pods)} pods in full, and the "
            f"ephemeral containers of {len(ephemeral)} pods; {selection.skipped_workloads} workloads are covered "
            f"by their owner's template and {selection.finished_pods} finished pods were not checked"
        ),
        *sources.problems,
    ]
    return Report(result.findings, result.allowed, result.not_checked, [], 0, 0, result.objects_checked, notes)
