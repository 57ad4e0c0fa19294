"""The order of a run against an API held in memory: everything read and decided first, a refusal
writes nothing, only objects that would change are applied, check mode applies none, and absent
deletes only the collection's objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError, OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy import reconcile
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import build_deploy_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.module import WriteRun

POOL = {"example.com/pool": "t"}
NODE = {"metadata": {"name": "gpu-0", "labels": POOL}, "spec": {}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}


class MemoryApi:
    """GET, list, server-side apply and DELETE of plain objects by path; writes counted."""

    def __init__(self, objects: dict[str, dict[str, Any]]):
        self.objects = objects
        self.write_count = 0
        self.written: list[str] = []

    def find(self, path):
        """KubeClient.find over this fake's get: None for a 404."""
        try:
            return self.get(path)
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def get(self, path: str) -> dict[str, Any]:
        if path not in self.objects:
            raise ClusterError(f"{path} not found", 404)
        return copy.deepcopy(self.objects[path])

    def list_items(self, path: str, **_query: Any):
        return [copy.deepcopy(o) for p, o in self.objects.items() if p.rsplit("/", 1)[0] == path]

    def apply(self, path: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        self.write_count += 1
        self.written.append(f"apply {path} as {manager}")
        self.objects[path] = copy.deepcopy(body)
        return body

    def delete(self, path: str) -> None:
        self.write_count += 1
        self.written.append(f"delete {path}")
        self.objects.pop(path, None)


def cluster(**extra: dict[str, Any]) -> MemoryApi:
    return MemoryApi({"/api/v1/namespaces/gpu": {"metadata": {"name": "gpu"}}, "/api/v1/nodes/gpu-0": NODE, **extra})


def present(api: MemoryApi, check_mode: bool = False, pods: list | None = None, **options: Any) -> WriteRun:
    chosen = build_deploy_options(**{"namespace": "gpu", "node_selector": POOL, **options})
    return reconcile.present(api, chosen, None, lambda: pods or [], check_mode, None)  # type: ignore[arg-type]


DS_PATH = "/apis/apps/v1/namespaces/gpu/daemonsets/nvidia-device-plugin-daemonset"
CM_PATH = "/api/v1/namespaces/gpu/configmaps/nvidia-device-plugin-config"


def test_a_first_run_applies_then_a_rerun_sends_nothing():
    api = cluster()
    outcome = present(api, config="version: v1\n")
    assert api.written == [
        f"apply {CM_PATH} as kubegpu-device-plugin",
        f"apply {DS_PATH} as kubegpu-device-plugin",
    ]
    assert outcome.changed is True and outcome.result["targeted_nodes"] == ["gpu-0"]
    assert api.write_count == 2 and len(outcome.diff or []) == 2
    again = present(api, config="version: v1\n")
    assert again.changed is False and again.diff == [] and len(api.written) == 2


def test_check_mode_sends_no_write_and_says_what_would_change():
    api = cluster()
    outcome = present(api, check_mode=True)
    assert api.written == [] and outcome.result["changes"] == ["DaemonSet gpu/nvidia-device-plugin-daemonset"]


def test_another_plugin_on_the_nodes_or_an_object_not_ours_writes_nothing():
    api = cluster()
    pods = [{"node": "gpu-0", "namespace": "gpu-operator", "name": "p", "daemonset": "d", "deployment": "gpu-operator"}]
    outcome = present(api, pods=pods)
    assert api.written == [] and [f["kind"] for f in outcome.result["findings"]] == ["deploy_already_served"]
    assert outcome.failure and outcome.changed is False
    foreign = cluster(
        **{DS_PATH: {"kind": "DaemonSet", "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu"}}}
    )
    outcome = present(foreign)
    assert foreign.written == [] and [f["kind"] for f in outcome.result["findings"]] == ["deploy_not_owned"]
    assert "app.kubernetes.io/managed-by=kubegpu.scheduling" in (outcome.failure or "")


def test_a_missing_namespace_is_named():
    api = MemoryApi({})
    with pytest.raises(OptionError, match="namespace: 'gpu' does not exist"):
        present(api)
    assert api.written == []


def test_no_targeted_node_is_a_warning():
    outcome = present(cluster(), node_selector={"other": "pool"})
    assert outcome.result["targeted_nodes"] == [] and "no node matches" in outcome.warnings[0]


def test_absent_deletes_the_collections_objects_only():
    api = cluster()
    present(api, config="version: v1\n")
    gfd = "/apis/apps/v1/namespaces/gpu/daemonsets/gpu-feature-discovery"
    api.objects[gfd] = {"kind": "DaemonSet", "metadata": {"name": "gpu-feature-discovery", "namespace": "gpu"}}
    outcome = reconcile.absent(api, "gpu", check_mode=False)  # type: ignore[arg-type]
    assert sorted(outcome.result["changes"]) == [
        "ConfigMap gpu/nvidia-device-plugin-config",
        "DaemonSet gpu/nvidia-device-plugin-daemonset",
    ]
    assert outcome.result["left_alone"] == ["DaemonSet gpu/gpu-feature-discovery"] and gfd in api.objects
    assert outcome.warnings == ["DaemonSet gpu/gpu-feature-discovery was not made by this collection: left as it is"]
    assert api.written[-2:] == [f"delete {DS_PATH}", f"delete {CM_PATH}"]


def test_a_rollout_that_does_not_finish_in_time_is_an_error_naming_the_node_waited_for():
    api = cluster()
    chosen = build_deploy_options(namespace="gpu", node_selector=POOL, config="version: v1\n")
    outcome = reconcile.present(api, chosen, None, lambda: [], False, 0)  # type: ignore[arg-type]
    assert outcome.changed is True and outcome.result["rollout"] == {
        "done": False,
        "waiting": ["gpu-0: no pod of the current template"],
    }
    (finding,) = outcome.result["findings"]
    assert (finding["id"], finding["kind"], finding["severity"]) == (
        "plugin_deploy.deploy_rollout_incomplete",
        "deploy_rollout_incomplete",
        "error",
    )
    assert finding["where"] == {"subject": "DaemonSet gpu/nvidia-device-plugin-daemonset"}
    assert finding["message"] == (
        "after 0s, 1 targeted node(s) lack a Ready plugin pod of the current template or its GPU capacity: "
        "gpu-0: no pod of the current template"
    )
    assert finding["remedy"].startswith("kubectl -n gpu describe daemonset nvidia-device-plugin-daemonset; ")
    assert outcome.failure == finding["problem"]
