import copy

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.live_objects import (
    select_live_objects,
    with_kind,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    find_embedded_pod_spec,
    iter_containers,
    walk_document,
)

POD_SPEC = {
    "initContainers": [{"name": "init", "image": "busybox"}],
    "containers": [{"name": "main", "image": "busybox"}, "not a container", {"image": "unnamed"}],
    "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
}
TEMPLATE = {"metadata": {"annotations": {"a": "b"}}, "spec": POD_SPEC}


def wrap(api_version, kind, spec=None):
    spec = POD_SPEC if spec is None else spec
    template = {"metadata": {"annotations": {"a": "b"}}, "spec": copy.deepcopy(spec)}
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ns"}}
    if kind == "Pod":
        obj["spec"] = copy.deepcopy(spec)
    elif kind == "PodTemplate":
        obj["template"] = template
    elif kind == "CronJob":
        obj["spec"] = {"jobTemplate": {"spec": {"template": template}}}
    else:
        obj["spec"] = {"template": template}
    return obj


@pytest.mark.parametrize(
    "api_version, kind, spec_path",
    [
        ("v1", "Pod", "spec"),
        ("v1", "PodTemplate", "template.spec"),
        ("v1", "ReplicationController", "spec.template.spec"),
        ("apps/v1", "Deployment", "spec.template.spec"),
        ("apps/v1", "ReplicaSet", "spec.template.spec"),
        ("apps/v1", "StatefulSet", "spec.template.spec"),
        ("apps/v1", "DaemonSet", "spec.template.spec"),
        ("extensions/v1beta1", "Deployment", "spec.template.spec"),
        ("batch/v1", "Job", "spec.template.spec"),
        ("batch/v1", "CronJob", "spec.jobTemplate.spec.template.spec"),
        ("", "Deployment", "spec.template.spec"),  # a snippet without apiVersion is judged by its kind
    ],
)
def test_every_walked_kind_leads_to_its_pod_spec(api_version, kind, spec_path):
    sites, skipped = walk_document(wrap(api_version, kind), source="f.yaml", document=3, line=10)
    assert skipped == []
    [site] = sites
    assert site.path == spec_path
    assert site.api_path == spec_path
    assert (site.ref.kind, site.ref.namespace, site.ref.name) == (kind, "ns", "x")
    assert (site.ref.source, site.ref.document, site.ref.line) == ("f.yaml", 3, 10)
    paths = [(c.list_name, c.name, c.path) for c in iter_containers(site)]
    assert paths == [
        ("initContainers", "init", f"{spec_path}.initContainers[0]"),
        ("containers", "main", f"{spec_path}.containers[0]"),
        ("containers", "containers[2]", f"{spec_path}.containers[2]"),
        ("ephemeralContainers", "debug", f"{spec_path}.ephemeralContainers[0]"),
    ]
    expected_metadata = "metadata" if kind == "Pod" else spec_path[: -len(".spec")] + ".metadata"
    assert site.metadata_path == expected_metadata


def test_list_items_are_walked_with_item_paths_and_api_paths_without_them():
    document = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [wrap("v1", "Pod"), {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}, 7],
    }
    sites, skipped = walk_document(document)
    [site] = sites
    assert site.path == "items[0].spec"
    assert site.prefix == "items[0]"
    assert site.api_path == "spec"
    assert site.metadata_path == "items[0].metadata"
    assert [(n.ref.kind, n.path) for n in skipped] == [("Service", "items[1]"), ("", "items[2]")]
    assert "carries no pod spec" in skipped[0].reason
    assert "not a Kubernetes object" in skipped[1].reason


def test_typed_lists_from_the_api_are_walked():
    sites, _skipped = walk_document({"apiVersion": "v1", "kind": "PodList", "items": [wrap("v1", "Pod")]})
    assert [s.path for s in sites] == ["items[0].spec"]


@pytest.mark.parametrize(
    "document, reason",
    [
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "ConfigMap carries no pod spec"),
        ({"metadata": {"name": "nokind"}}, "no kind"),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}}, "no pod template spec"),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": []}}}, "no pod template spec"),
        ({"apiVersion": "v1", "kind": "Pod", "spec": "text"}, "Pod has no spec mapping"),
        ({"apiVersion": "v1", "kind": "List", "items": "nope"}, "has no items list"),
        ("just a string", "the document is a str"),
        ([1, 2], "the document is a list"),
        ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {}}, "has no pod template at spec.tasks[]"),
        ({"apiVersion": "example.com/v1", "kind": "Job", "spec": {}}, "custom resource: kind Job in group example.com"),
    ],
)
def test_objects_without_a_walkable_pod_spec_are_reported_with_the_reason(document, reason):
    sites, skipped = walk_document(document)
    assert sites == []
    [entry] = skipped
    assert reason in entry.reason
    assert entry.to_dict()["reason"] == entry.reason


def test_unknown_kinds_with_containers_but_no_image_name_where():
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "r"},
        "spec": {"groups": [{"template": {"spec": {"containers": [{"name": "w"}]}}}]},
    }
    sites, [entry] = walk_document(widget)
    assert sites == []
    assert entry.path == "spec.groups[0].template.spec"
    assert "has containers at spec.groups[0].template.spec, none with an image" in entry.reason
    assert entry.ref.name == "r"


def test_embedded_search_is_bounded_on_cyclic_and_deep_structures():
    cyclic: dict = {"a": {}}
    cyclic["a"]["back"] = cyclic
    assert find_embedded_pod_spec(cyclic) is None
    deep: dict = {}
    node = deep
    for _level in range(10_000):
        node["n"] = {}
        node = node["n"]
    node["containers"] = [{"name": "too-deep"}]
    assert find_embedded_pod_spec(deep) is None
    wide = {"items": [{"n": [i]} for i in range(30_000)] + [{"containers": [{"name": "c"}]}]}
    assert find_embedded_pod_spec(wide) is None
    assert find_embedded_pod_spec({"items": [{"n": [1]}, {"containers": [{"name": "c"}]}]}) == "items[1]"


def owned(obj, uid, owner_uid=None, phase=None):
    obj = copy.deepcopy(obj)
    obj["metadata"]["uid"] = uid
    if owner_uid:
        obj["metadata"]["ownerReferences"] = [{"uid": owner_uid, "controller": True, "kind": "X", "name": "x"}]
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def test_live_selection_checks_each_template_once_and_pods_without_a_listed_owner():
    deployment = owned(wrap("apps/v1", "Deployment"), "d1")
    replicaset = owned(wrap("apps/v1", "ReplicaSet"), "rs1", owner_uid="d1")
    orphan_rs = owned(wrap("apps/v1", "ReplicaSet"), "rs2", owner_uid="gone")
    pod_spec_no_debug = {"containers": [{"name": "main"}]}
    owned_pod = owned(wrap("v1", "Pod", pod_spec_no_debug), "p1", owner_uid="rs1")
    debugged_pod = owned(wrap("v1", "Pod"), "p2", owner_uid="rs1")
    bare_pod = owned(wrap("v1", "Pod"), "p3")
    crd_pod = owned(wrap("v1", "Pod"), "p4", owner_uid="raycluster-uid")
    finished = owned(wrap("v1", "Pod"), "p5", phase="Succeeded")
    selection = select_live_objects(
        [deployment, replicaset, orphan_rs, "junk"], [owned_pod, debugged_pod, bare_pod, crd_pod, finished, None]
    )
    assert [w["metadata"]["uid"] for w in selection.workloads] == ["d1", "rs2"]
    assert [p["metadata"]["uid"] for p in selection.pods] == ["p3", "p4"]
    assert [p["metadata"]["uid"] for p in selection.ephemeral_only_pods] == ["p2"]
    assert selection.skipped_workloads == 1
    assert selection.finished_pods == 1


def test_with_kind_restores_what_list_responses_omit():
    item = {"metadata": {"name": "x"}}
    assert with_kind(item, "apps/v1", "Deployment") == {
        "metadata": {"name": "x"},
        "apiVersion": "apps/v1",
        "kind": "Deployment",
    }
    full = {"apiVersion": "v1", "kind": "Pod"}
    assert with_kind(full, "apps/v1", "Deployment") is full
