"""What an apply of the deployment's objects would change (write/owned.py's plans over them), what is
refused, which nodes are targeted and served, and when a rollout is done: pure decisions over the
objects as the API server returns them."""

from __future__ import annotations

import copy

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.manifests import (
    build_deploy_options,
    plugin_placement,
    rendered_objects,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.plan import (
    expected_capacity,
    not_owned_hits,
    rollout_waiting,
    served_hits,
    targeted_nodes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.owned import (
    CREATE,
    DELETE,
    LEFT_ALONE,
    NOT_OURS,
    UNCHANGED,
    UPDATE,
    keys_of,
    object_key,
    plan_apply,
    plan_delete,
)

POOL = {"example.com/pool": "t"}


def as_stored(obj: dict) -> dict:
    """The object as the API server returns it: defaults filled in, empty lists left out, status added."""
    stored = copy.deepcopy(obj)
    stored["metadata"].update(uid="u1", resourceVersion="7", generation=2, managedFields=[{"manager": "x"}])
    spec = stored.get("spec", {})
    if "template" in spec:
        spec["revisionHistoryLimit"] = 10
        pod = spec["template"]["spec"]
        pod.update(
            restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler", priority=2000001000
        )
        for container in pod["containers"]:
            container.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log")
            if container.get("env") == []:
                del container["env"]
        stored["status"] = {"observedGeneration": 2, "desiredNumberScheduled": 1}
    return stored


def test_an_object_as_stored_is_unchanged_and_an_upgrade_changes_the_image():
    old = rendered_objects(build_deploy_options(version="v0.17.4", node_selector=POOL))
    live = {object_key(o): as_stored(o) for o in old}
    plans = plan_apply(old, live)
    assert [p.action for p in plans] == [UNCHANGED]
    new = rendered_objects(build_deploy_options(version="v0.18.2", node_selector=POOL))
    plans = plan_apply(new, live)
    assert [p.action for p in plans] == [UPDATE]
    changed = plans[0].differences
    assert "spec.template.spec.containers[0].image" in changed
    assert any(path.endswith("rendered-sha256") for path in changed)


def test_a_dropped_field_is_a_change_through_the_digest():
    with_priority = rendered_objects(build_deploy_options())[0]
    live = {object_key(with_priority): as_stored(with_priority)}
    without = rendered_objects(build_deploy_options(priority_class=""))[0]
    assert "priorityClassName" not in without["spec"]["template"]["spec"]
    (plan,) = plan_apply([without], live)
    assert plan.action == UPDATE and plan.differences == ("metadata.annotations.kubegpu.io/rendered-sha256",)


def test_a_missing_object_is_created_and_a_drifted_one_updated():
    (daemonset,) = rendered_objects(build_deploy_options())
    assert plan_apply([daemonset], {})[0].action == CREATE
    drifted = as_stored(daemonset)
    drifted["spec"]["template"]["spec"]["tolerations"] = []
    (plan,) = plan_apply([daemonset], {object_key(daemonset): drifted})
    assert plan.action == UPDATE and plan.differences == ("spec.template.spec.tolerations",)
    assert plan.diff()["before"]["spec"]["template"]["spec"]["tolerations"] == []


def test_an_object_of_the_same_name_made_by_someone_else_is_refused():
    (daemonset,) = rendered_objects(build_deploy_options())
    foreign = as_stored(daemonset)
    del foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    plans = plan_apply([daemonset], {object_key(daemonset): foreign})
    assert [p.action for p in plans] == [NOT_OURS]
    (hit,) = not_owned_hits(keys_of(plans, NOT_OURS))
    finding = KINDS.finding(hit)
    assert finding.kind.id == "deploy_not_owned" and "kube-system/nvidia-device-plugin-daemonset" in finding.message


def test_absent_deletes_only_what_the_collection_made():
    ours, theirs = (as_stored(o) for o in rendered_objects(build_deploy_options(config="version: v1\n")))
    del theirs["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    plans = plan_delete({object_key(ours): ours, object_key(theirs): theirs, "DaemonSet x/gone": None})
    assert [(p.key, p.action) for p in plans] == [
        (object_key(ours), DELETE),
        (object_key(theirs), LEFT_ALONE),
    ]


NODES = [
    {"name": "pool-0", "labels": POOL, "taints": []},
    {"name": "pool-dra", "labels": {**POOL, "nvidia.com/dra-kubelet-plugin": "true"}, "taints": []},
    {"name": "other", "labels": {"nvidia.com/gpu.present": "true"}, "taints": []},
]


def test_targeted_nodes_follow_the_placement():
    placement = plugin_placement(build_deploy_options(node_selector=POOL))
    assert [n["name"] for n in targeted_nodes(NODES, placement)] == ["pool-0"]


def test_another_deployment_on_a_targeted_node_is_refused_and_ours_is_not():
    pods = [
        {
            "node": "pool-0",
            "namespace": "mine",
            "name": "p1",
            "daemonset": "nvidia-device-plugin-daemonset",
            "deployment": "nvidia-static",
        },
        {
            "node": "other",
            "namespace": "gpu-operator",
            "name": "op",
            "daemonset": "nvidia-device-plugin-daemonset",
            "deployment": "gpu-operator",
        },
        {
            "node": "pool-0",
            "namespace": "nvidia-dra-driver-gpu",
            "name": "dra",
            "daemonset": "kp",
            "deployment": "nvidia-dra-driver",
        },
    ]
    assert served_hits(["pool-0"], pods, "mine", "nvidia-device-plugin-daemonset") == []
    (hit,) = served_hits(["pool-0", "other"], pods, "mine", "nvidia-device-plugin-daemonset")
    finding = KINDS.finding(hit)
    assert finding.kind.id == "deploy_already_served" and "NVIDIA GPU Operator" in finding.message
    assert "gpu-operator/op" in finding.message and hit.where["node"] == "other"
    (hit,) = served_hits(["pool-0"], pods, "elsewhere", "nvidia-device-plugin-daemonset")
    assert "NVIDIA device plugin, static DaemonSet" in KINDS.finding(hit).message


def pod(node: str, generation: int, ready: bool, deleting: bool = False) -> dict:
    metadata = {"name": f"p-{node}-{generation}", "labels": {"pod-template-generation": str(generation)}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": metadata, "spec": {"nodeName": node}, "status": status}


def test_a_rollout_waits_for_a_ready_pod_of_the_current_template_and_the_capacity_on_every_node():
    daemonset = {"metadata": {"generation": 3}, "status": {"observedGeneration": 3}}
    nodes = [
        {"name": "a", "capacity": {"nvidia.com/gpu": "8"}},
        {"name": "b", "capacity": {"nvidia.com/gpu": "8"}},
        {"name": "c", "capacity": {"nvidia.com/gpu": "0"}},
    ]
    pods = [pod("a", 3, True), pod("b", 2, True), pod("c", 3, True)]
    assert rollout_waiting(daemonset, pods, nodes, None) == [
        "b: no pod of the current template",
        "c: no nvidia.com/gpu capacity",
    ]
    pods = [pod("a", 3, True), pod("b", 3, False), pod("b", 2, True, deleting=True)]
    assert rollout_waiting(daemonset, pods, nodes[:2], None) == ["b: pod p-b-3 not Ready"]
    assert rollout_waiting(daemonset, [pod("a", 3, True), pod("a", 2, True)], nodes[:1], None) == [
        "a: a pod of an earlier template still runs"
    ]
    assert rollout_waiting(daemonset, [pod("a", 3, True), pod("b", 3, True)], nodes[:2], None) == []
    unseen = {"metadata": {"generation": 4}, "status": {"observedGeneration": 3}}
    assert rollout_waiting(unseen, pods, nodes, None) == ["the DaemonSet controller has not seen generation 4 yet"]
    assert rollout_waiting(None, [], nodes, None) == ["the DaemonSet is gone"]


def test_shared_capacity_is_the_advertised_resource_and_expected_is_gpus_times_replicas():
    summary = {"shared": [{"name": "nvidia.com/gpu", "advertised": "nvidia.com/gpu.shared", "replicas": 4}]}
    node = {"name": "a", "labels": {"nvidia.com/gpu.count": "2"}, "capacity": {"nvidia.com/gpu.shared": "8"}}
    assert rollout_waiting({"metadata": {}, "status": {}}, [pod("a", 1, True)], [node], summary) == [
        "a: no pod of the current template"
    ]
    assert expected_capacity(node, summary) == {
        "node": "a",
        "gpus": 2,
        "resources": {"nvidia.com/gpu.shared": {"expected": 8, "capacity": 8}},
        "as_expected": True,
    }
    short = {**node, "capacity": {"nvidia.com/gpu.shared": "2"}}
    assert expected_capacity(short, summary)["as_expected"] is False
    assert expected_capacity({**node, "labels": {}}, None)["as_expected"] is False
