"""Owned objects written one way: read (None when gone), compared with the rendering without a
request, refused as a whole before any write when one of our names is someone else's, only what
changes applied, only ours deleted, a diff entry per object, nothing sent in check mode."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write import owned
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.compare import differences, pruned, shown

OWNER = owned.Owner(
    "kubegpu-test", {"ConfigMap": "configmaps", "ValidatingAdmissionPolicy": "validatingadmissionpolicies"}
)


def config_map(name: str, value: str) -> dict[str, Any]:
    return owned.marked(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"k": value}}
    )


class MemoryApi:
    """find, server-side apply and delete of plain objects by path, each request recorded."""

    def __init__(self, objects: dict[str, dict[str, Any]] | None = None) -> None:
        self.objects = objects or {}
        self.sent: list[str] = []

    def find(self, path: str) -> dict[str, Any] | None:
        self.sent.append(f"get {path}")
        return copy.deepcopy(self.objects.get(path))

    def apply(self, path: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        self.sent.append(f"apply {path} as {manager}")
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = "1"
        self.objects[path] = stored
        return stored

    def delete(self, path: str) -> None:
        self.sent.append(f"delete {path}")
        self.objects.pop(path, None)


def path(name: str) -> str:
    return f"/api/v1/namespaces/ns/configmaps/{name}"


def test_keys_and_paths_name_namespaced_and_cluster_scoped_objects():
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy"}
    policy["metadata"] = {"name": "p"}
    assert owned.object_key(policy) == "ValidatingAdmissionPolicy p"
    assert OWNER.path(policy) == "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/p"
    assert owned.object_key(config_map("a", "1")) == "ConfigMap ns/a" and OWNER.path(config_map("a", "1")) == path("a")


def test_the_mark_is_the_label_and_the_digest_of_the_rendering():
    obj = config_map("a", "1")
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kubegpu.scheduling"}
    assert (
        obj["metadata"]["annotations"][owned.RENDERED_DIGEST_ANNOTATION]
        != (config_map("a", "2")["metadata"]["annotations"][owned.RENDERED_DIGEST_ANNOTATION])
    )


def test_only_what_changes_is_applied_and_a_rerun_sends_no_write():
    api = MemoryApi({path("same"): config_map("same", "1")})
    desired = [config_map("new", "1"), config_map("same", "1")]
    plans = owned.plan(api, OWNER, desired)  # type: ignore[arg-type]
    assert [p.action for p in plans] == [owned.CREATE, owned.UNCHANGED]
    after = owned.write(api, OWNER, plans, check_mode=False)  # type: ignore[arg-type]
    assert [s for s in api.sent if not s.startswith("get")] == [f"apply {path('new')} as kubegpu-test"]
    assert after["ConfigMap ns/new"]["metadata"]["resourceVersion"] == "1"  # type: ignore[index]
    assert [p.action for p in owned.plan(api, OWNER, desired)] == [owned.UNCHANGED] * 2  # type: ignore[arg-type]


def test_check_mode_sends_no_write_and_says_what_would_be():
    api = MemoryApi({path("a"): config_map("a", "1")})
    plans = owned.plan(api, OWNER, [config_map("a", "2")])  # type: ignore[arg-type]
    after = owned.write(api, OWNER, plans, check_mode=True)  # type: ignore[arg-type]
    assert all(s.startswith("get") for s in api.sent) and after["ConfigMap ns/a"] == config_map("a", "2")
    (entry,) = [p.diff() for p in owned.changed(plans)]
    assert entry["before_header"] == entry["after_header"] == "ConfigMap ns/a"
    assert entry["before"]["data"] == {"k": "1"} and entry["after"]["data"] == {"k": "2"}


def test_an_object_not_ours_refuses_the_whole_run_before_any_write_naming_it():
    theirs = config_map("b", "1")
    del theirs["metadata"]["labels"]
    api = MemoryApi({path("b"): theirs})
    plans = owned.plan(api, OWNER, [config_map("a", "1"), config_map("b", "1")])  # type: ignore[arg-type]
    assert owned.keys_of(plans, owned.NOT_OURS) == ["ConfigMap ns/b"]
    for check_mode in (True, False):
        with pytest.raises(CheckFailed, match="ConfigMap ns/b: exists without the label app.kubernetes.io/managed-by"):
            owned.write(api, OWNER, plans, check_mode)  # type: ignore[arg-type]
    assert all(s.startswith("get") for s in api.sent)


def test_remove_deletes_ours_in_order_and_names_anyone_elses():
    theirs = config_map("b", "1")
    del theirs["metadata"]["labels"]
    api = MemoryApi({path("a"): config_map("a", "1"), path("b"): theirs})
    stubs = [config_map(name, "") for name in ("b", "a", "gone")]
    planned = owned.remove(api, OWNER, stubs, check_mode=True)  # type: ignore[arg-type]
    assert planned.changed and all(s.startswith("get") for s in api.sent)
    done = owned.remove(api, OWNER, stubs, check_mode=False)  # type: ignore[arg-type]
    assert done.result == {"changes": ["ConfigMap ns/a"], "left_alone": ["ConfigMap ns/b"]}
    assert done.warnings == ["ConfigMap ns/b was not made by this collection: left as it is"]
    assert [s for s in api.sent if s.startswith("delete")] == [f"delete {path('a')}"]
    assert done.diff == [
        {
            "before_header": "ConfigMap ns/a",
            "after_header": "ConfigMap ns/a",
            "before": config_map("a", "1"),
            "after": {},
        }
    ]


def test_compare_leaves_out_server_fields_and_shows_what_goes():
    assert differences({"a": {"b": [1, {"c": 2}]}, "e": []}, {"a": {"b": [1, {"c": 2, "d": 3}]}, "z": 1}) == []
    assert differences({"a": [1, 2]}, {"a": [1]}) == ["a"]
    assert differences({"a": {"b": 1}}, {"a": {"b": 2}}) == ["a.b"]
    assert pruned({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": 0}}) == {"b": {"c": 2}}
    live = {"kind": "K", "metadata": {"name": "n", "uid": "u", "managedFields": []}, "spec": {}, "status": {"x": 1}}
    assert shown(live) == {"kind": "K", "metadata": {"name": "n"}, "spec": {}}
    assert shown(None) == {}
