# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the live audit reads from the cluster: workloads, pods, and the env sources they name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.live_objects import (
    LIVE_WORKLOAD_PATHS,
    LiveList,
    live_custom_lists,
    select_live_objects,
    served_group_versions,
    with_kind,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path, collection_paths
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    PodSpecSite,
    object_ref,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import PodChecker, RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import (
    Report,
    ValidationResult,
    check_objects,
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


def _status(exc: Exception) -> Any:
    return getattr(exc, "status", None)


def _problem(exc: Exception) -> str:
    return str(getattr(exc, "message", None) or exc)


def custom_resources(client: Any, chosen: list[str] | None, notes: list[str]) -> list[dict[str, Any]]:
    """The claims and ML custom resources whose APIs the cluster serves (one GET of /apis to know).

    An API the cluster does not serve is skipped; a list the identity may not read is a note.
    """
    try:
        served = served_group_versions(client.get("/apis"))
    except Exception as exc:  # noqa: BLE001 - the client's own error types; only "forbidden" and "not found" are expected
        if _status(exc) == 404:
            return []
        if _status(exc) != 403:
            raise
        notes.append(f"live: cannot read the API discovery (/apis), so no custom resource was listed: {_problem(exc)}")
        return []
    found: list[dict[str, Any]] = []
    for wanted in live_custom_lists(served):
        found += _list_custom(client, wanted, chosen, notes)
    return found


def _list_custom(client: Any, wanted: LiveList, chosen: list[str] | None, notes: list[str]) -> list[dict[str, Any]]:
    if not wanted.namespaced and chosen:
        return []  # cluster-scoped: not part of an audit restricted to namespaces
    items: list[dict[str, Any]] = []
    for path in collection_paths(wanted.api_version, wanted.resource, chosen if wanted.namespaced else None):
        try:
            items += [
                with_kind(i, wanted.api_version, wanted.kind) for i in client.list_items(path) if isinstance(i, dict)
            ]
        except Exception as exc:  # noqa: BLE001 - the client's own error types; only "forbidden" and "not found" are expected
            if _status(exc) == 403:
                notes.append(
                    f"live: not allowed to list {wanted.kind} ({path}), so their pod templates were not checked"
                )
            elif _status(exc) != 404:
                raise
    return items


def live_report(client: Any, config: RuleConfig, namespaces: Iterable[str] | None = None) -> Report:
    """Audit the cluster: top-level workload templates (custom resources included), and the pods they do not cover.

    `client` needs `list_items(path)` (paginated) and `get(path)`; its errors propagate, except a
    forbidden or missing custom resource API, which is noted or skipped.
    """
    chosen = sorted(set(namespaces)) if namespaces else None
    access_notes: list[str] = []
    workloads = [
        with_kind(item, api_version, kind)
        for api_version, kind, resource in LIVE_WORKLOAD_PATHS
        for path in collection_paths(api_version, resource, chosen)
        for item in client.list_items(path)
        if isinstance(item, dict)
    ]
    workloads += custom_resources(client, chosen, access_notes)
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
    check_objects(checker, selection.workloads + selection.pods, result, "cluster")
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
        *access_notes,
        *result.notes,
        *sources.problems,
    ]
    return Report(result.findings, result.allowed, result.not_checked, [], 0, 0, result.objects_checked, notes)
