import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.daemonsets import mismatch_fixes
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.findings import (
    KIND_DAEMONSET_MISSCHEDULED,
    KIND_DAEMONSET_MISSING,
    KIND_DAEMONSET_NOT_AVAILABLE,
    KIND_DAEMONSET_NOT_OBSERVED,
    KIND_DAEMONSET_NOT_READY,
    KIND_DAEMONSET_NOT_SCHEDULED,
    KIND_DAEMONSET_NOT_UPDATED,
    KIND_DAEMONSET_SELECTS_NO_NODE,
    KIND_DRIVER_MISSING,
    KIND_ENVVAR_ACCEPTED,
    KIND_HOST_FACTS_FAILED,
    KIND_HOST_GPU_COUNT_MISMATCH,
    KIND_HOST_GPUS_NOT_ADVERTISED,
    KIND_HOST_NOT_A_NODE,
    KIND_LABEL_COUNT_MISMATCH,
    KIND_NO_CAPACITY,
    KIND_NO_DEVICE_PLUGIN,
    KIND_NO_GPU_NODES,
    KIND_NO_PLUGIN_POD,
    KIND_NODE_NOT_READY,
    KIND_NVIDIA_SMI_FAILED,
    KIND_PLUGIN_NOT_READY,
    KIND_PLUGIN_RESTARTING,
    KIND_SEVERAL_DEPLOYMENTS,
    KIND_SEVERAL_PLUGIN_PODS,
    KIND_TOOLKIT_CONFIG_MISSING,
    KIND_TOOLKIT_CONFIG_UNREADABLE,
    KIND_UNHEALTHY_GPUS,
    KIND_VOLUME_MOUNTS_OFF,
    RESTART_WARNING_THRESHOLD,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.hosts import node_for_host
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.projection import (
    ClusterReads,
    compact_node,
    project_daemonset,
    project_plugin_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.targets import (
    check_options,
    daemonset_list_namespaces,
    daemonset_targets,
    plugin_pod_queries,
    select_daemonsets,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_plugin.verdict import evaluate
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, INFO, WARNING
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.device_plugins import (
    ACK_STATIC_MANIFEST,
    DAEMONSET_DEPLOYMENTS,
    DEFAULT_DEVICE_PLUGIN_SELECTORS,
    REGISTERED_LOG_LINE,
    deployment_of,
    is_static_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import (
    expression_met,
    placement_label_keys,
    placement_mismatches,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import namespaced_name

GPU = "nvidia.com/gpu"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"


# --- builders: API objects as the API server returns them -----------------------------------


def make_node(name, gpus=None, allocatable=None, labels=None, ready=True, taints=None, extra_capacity=None):
    capacity = {"cpu": "64", **(extra_capacity or {})}
    alloc = dict(capacity)
    if gpus is not None:
        capacity[GPU] = str(gpus)
        alloc[GPU] = str(gpus if allocatable is None else allocatable)
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": capacity,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def gpu_node(name, gpus=8, **kwargs):
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": str(gpus),
        DEPLOY_LABEL: "true",
        **kwargs.pop("labels", {}),
    }
    return make_node(name, gpus=gpus, labels=labels, **kwargs)


def make_daemonset(
    name="nvidia-device-plugin-daemonset",
    namespace="kube-system",
    pod_labels=None,
    node_selector=None,
    affinity_terms=None,
    tolerations=None,
    status=None,
    generation=1,
    labels=None,
):
    pod_labels = pod_labels or {"name": "nvidia-device-plugin-ds"}
    spec = {"containers": [{"name": "nvidia-device-plugin-ctr"}]}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if affinity_terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": term} for term in affinity_terms]
                }
            }
        }
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": generation, "labels": labels or {}},
        "spec": {
            "selector": {"matchLabels": pod_labels},
            "template": {"metadata": {"labels": pod_labels}, "spec": spec},
        },
        "status": {"observedGeneration": generation, **(status if status is not None else healthy_status(2))},
    }


def healthy_status(count):
    return {
        "desiredNumberScheduled": count,
        "currentNumberScheduled": count,
        "updatedNumberScheduled": count,
        "numberReady": count,
        "numberAvailable": count,
        "numberMisscheduled": 0,
    }


def make_plugin_pod(
    node,
    name=None,
    ready=True,
    labels=None,
    daemonset="nvidia-device-plugin-daemonset",
    static=False,
    restarts=0,
    waiting=None,
    phase="Running",
    namespace="kube-system",
):
    metadata = {
        "name": name or f"plugin-{node}",
        "namespace": namespace,
        "labels": labels or {"name": "nvidia-device-plugin-ds"},
    }
    if static:
        metadata["annotations"] = {"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "abc"}
        metadata["ownerReferences"] = [{"kind": "Node", "name": node}]
    elif daemonset:
        metadata["ownerReferences"] = [{"kind": "DaemonSet", "name": daemonset}]
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return {
        "metadata": metadata,
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "ctr", "restartCount": restarts, "state": state}],
        },
    }


def check(daemonsets=(), nodes=(), pods=(), host_facts=None, require_hardening=False, options=DEFAULT_OPTIONS):
    projected_ds = [project_daemonset(d) for d in daemonsets]
    keys = placement_label_keys(d["placement"] for d in projected_ds)
    compact = [compact_node(n, options, keys) for n in nodes]
    projected_pods = [p for p in map(project_plugin_pod, pods) if p is not None]
    read = ClusterReads(projected_ds, [], compact, projected_pods, slices=[])
    return evaluate(read, options, host_facts=host_facts, require_hardening=require_hardening)


def kinds(result, node=None):
    return sorted(f["kind"] for f in result["findings"] if node is None or f["node"] == node)


def only(result, kind):
    matches = [f for f in result["findings"] if f["kind"] == kind]
    assert len(matches) == 1, result["findings"]
    return matches[0]


# --- deployments ------------------------------------------------------------------------------


def test_known_deployments_cover_the_default_device_plugin_selectors():
    assert {d.selector for d in DAEMONSET_DEPLOYMENTS} == set(DEFAULT_DEVICE_PLUGIN_SELECTORS)


@pytest.mark.parametrize(
    "labels, static, key",
    [
        ({"name": "nvidia-device-plugin-ds"}, False, "nvidia-static"),
        (
            {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvdp"},
            False,
            "nvidia-helm",
        ),
        ({"app": "nvidia-device-plugin-daemonset"}, False, "gpu-operator"),
        ({"component": "nvidia-device-plugin"}, False, "ack-managed"),
        ({"component": "nvidia-device-plugin"}, True, "ack-static"),
        ({"k8s-app": "nvidia-gpu-device-plugin"}, False, "gke"),
        ({"app": "my-plugin"}, False, "custom"),
    ],
)
def test_deployment_of_pod_labels(labels, static, key):
    assert deployment_of(labels, static).key == key


@pytest.mark.parametrize(
    "annotations, owners, static",
    [
        ({"kubernetes.io/config.source": "file"}, [], True),
        ({"kubernetes.io/config.mirror": "0f3c"}, [], True),
        ({}, ["Node"], True),
        ({"kubernetes.io/config.source": "api"}, ["DaemonSet"], False),
    ],
)
def test_static_pods_are_recognised_by_annotation_or_owner(annotations, owners, static):
    assert is_static_pod(annotations, owners) is static


def test_ack_static_mirror_pod_projects_as_static_with_its_deployment():
    pod = project_plugin_pod(make_plugin_pod("n1", labels={"component": "nvidia-device-plugin"}, static=True))
    assert pod["static"] is True
    assert pod["deployment"] == "ack-static"
    assert pod["daemonset"] is None


def test_deployments_found_lists_daemonsets_and_static_pods():
    result = check(
        daemonsets=[
            make_daemonset(
                "ack-nvidia-device-plugin",
                pod_labels={"component": "nvidia-device-plugin"},
                node_selector={"ack.node.gpu.schedule": "default"},
                status=healthy_status(1),
            )
        ],
        nodes=[gpu_node("a", labels={"ack.node.gpu.schedule": "default"}), gpu_node("b")],
        pods=[
            make_plugin_pod("a", labels={"component": "nvidia-device-plugin"}, daemonset="ack-nvidia-device-plugin"),
            make_plugin_pod("b", labels={"component": "nvidia-device-plugin"}, static=True),
        ],
    )
    keys = {d["key"]: d for d in result["deployments"]}
    assert keys["ack-managed"]["daemonsets"] == ["kube-system/ack-nvidia-device-plugin"]
    assert keys["ack-static"]["static_pods"] == 1
    assert only(result, KIND_SEVERAL_DEPLOYMENTS)["severity"] == WARNING
    assert result["healthy"] is True


# --- DaemonSet verdicts -----------------------------------------------------------------------


def test_healthy_daemonset_and_nodes_pass_with_no_findings():
    result = check(
        [make_daemonset(node_selector={DEPLOY_LABEL: "true"})],
        [gpu_node("a"), gpu_node("b"), make_node("cpu")],
        [make_plugin_pod("a"), make_plugin_pod("b")],
    )
    assert result["healthy"] is True
    assert result["findings"] == []
    assert [n["name"] for n in result["nodes"]] == ["a", "b"]
    assert result["daemonsets"][0]["healthy"] is True
    assert result["report"][0].startswith("GPU device plugin check PASSED: 0 errors, 0 warnings (2 GPU nodes")


def test_stale_observed_generation_fails():
    ds = make_daemonset(generation=3)
    ds["status"]["observedGeneration"] = 2
    result = check([ds], [gpu_node("a")], [make_plugin_pod("a")])
    finding = only(result, KIND_DAEMONSET_NOT_OBSERVED)
    assert "generation 3, observed generation 2" in finding["problem"]
    assert result["healthy"] is False


def test_missing_observed_generation_fails():
    ds = make_daemonset()
    del ds["status"]["observedGeneration"]
    assert KIND_DAEMONSET_NOT_OBSERVED in kinds(check([ds], [gpu_node("a")], [make_plugin_pod("a")]))


def test_observed_generation_ahead_is_fine():
    ds = make_daemonset(generation=2)
    ds["status"]["observedGeneration"] = 3
    assert KIND_DAEMONSET_NOT_OBSERVED not in kinds(check([ds], [gpu_node("a")], [make_plugin_pod("a")]))


@pytest.mark.parametrize(
    "field, value, kind, severity, text",
    [
        ("currentNumberScheduled", 1, KIND_DAEMONSET_NOT_SCHEDULED, ERROR, "1 of 2 pods scheduled"),
        ("updatedNumberScheduled", 1, KIND_DAEMONSET_NOT_UPDATED, ERROR, "1 of 2 pods run the current template"),
        ("numberReady", 1, KIND_DAEMONSET_NOT_READY, ERROR, "1 of 2 pods Ready"),
        ("numberAvailable", 1, KIND_DAEMONSET_NOT_AVAILABLE, WARNING, "1 of 2 pods available"),
        ("numberMisscheduled", 1, KIND_DAEMONSET_MISSCHEDULED, ERROR, "1 pod(s) run on nodes"),
    ],
)
def test_each_status_count_mismatch_is_a_finding(field, value, kind, severity, text):
    status = healthy_status(2)
    status[field] = value
    result = check(
        [make_daemonset(status=status)], [gpu_node("a"), gpu_node("b")], [make_plugin_pod("a"), make_plugin_pod("b")]
    )
    finding = only(result, kind)
    assert finding["severity"] == severity
    assert text in finding["problem"]
    assert finding["subject"] == "DaemonSet kube-system/nvidia-device-plugin-daemonset"
    assert result["daemonsets"][0]["problems"] == [kind]


def test_counts_missing_from_status_read_as_zero():
    result = check([make_daemonset(status={"desiredNumberScheduled": 1})], [gpu_node("a")], [make_plugin_pod("a")])
    assert {KIND_DAEMONSET_NOT_SCHEDULED, KIND_DAEMONSET_NOT_UPDATED, KIND_DAEMONSET_NOT_READY} <= set(kinds(result))


def test_zero_desired_with_gpu_nodes_fails_naming_the_missing_label():
    ds = make_daemonset(node_selector={DEPLOY_LABEL: "true"}, status=healthy_status(0))
    nodes = [
        make_node("a", gpus=8, labels={"nvidia.com/gpu.product": "A100"}),
        make_node("b", gpus=8, labels={"nvidia.com/gpu.product": "A100"}),
    ]
    result = check([ds], nodes, [])
    finding = only(result, KIND_DAEMONSET_SELECTS_NO_NODE)
    assert finding["severity"] == ERROR
    assert "selects no node" in finding["problem"] and "2 node(s) look like GPU nodes" in finding["problem"]
    assert finding["remedy"].startswith("check its nodeSelector/affinity against the GPU nodes' labels")
    assert f"kubectl label node a b {DEPLOY_LABEL}=true --overwrite" in finding["remedy"]
    assert result["healthy"] is False


def test_zero_desired_without_gpu_nodes_passes():
    result = check([make_daemonset(status=healthy_status(0))], [make_node("cpu")], [])
    assert result["healthy"] is True
    assert kinds(result) == [KIND_NO_GPU_NODES]
    assert only(result, KIND_NO_GPU_NODES)["severity"] == INFO


def test_zero_desired_is_only_noted_when_another_deployment_serves_every_gpu_node():
    gke = {"k8s-app": "nvidia-gpu-device-plugin"}
    small = make_daemonset(
        "nvidia-gpu-device-plugin-small-cos",
        pod_labels=gke,
        status=healthy_status(0),
        affinity_terms=[[{"key": "cloud.google.com/machine-family", "operator": "In", "values": ["n1"]}]],
    )
    large = make_daemonset("nvidia-gpu-device-plugin-large-cos", pod_labels=gke, status=healthy_status(1))
    pod = make_plugin_pod("a", labels=gke, daemonset="nvidia-gpu-device-plugin-large-cos")
    result = check([small, large], [gpu_node("a")], [pod])
    finding = only(result, KIND_DAEMONSET_SELECTS_NO_NODE)
    assert finding["severity"] == INFO
    assert finding["subject"] == "DaemonSet kube-system/nvidia-gpu-device-plugin-small-cos"
    assert result["healthy"] is True
    assert KIND_SEVERAL_DEPLOYMENTS not in kinds(result)


def test_zero_desired_though_gpu_nodes_match_points_at_the_controller():
    ds = make_daemonset(node_selector={DEPLOY_LABEL: "true"}, status=healthy_status(0))
    finding = only(check([ds], [gpu_node("a")], []), KIND_DAEMONSET_SELECTS_NO_NODE)
    assert "kubectl -n kube-system describe daemonset nvidia-device-plugin-daemonset" in finding["remedy"]


# --- placement --------------------------------------------------------------------------------


def compact(node, keys=()):
    return compact_node(node, DEFAULT_OPTIONS, keys)


def placement(**kwargs):
    return project_daemonset(make_daemonset(**kwargs))["placement"]


def test_node_selector_match_and_mismatch():
    selected = compact(gpu_node("a"), {DEPLOY_LABEL})
    other = compact(gpu_node("b", labels={DEPLOY_LABEL: "false"}), {DEPLOY_LABEL})
    rule = placement(node_selector={DEPLOY_LABEL: "true"})
    assert placement_mismatches(selected, rule) == []
    [mismatch] = placement_mismatches(other, rule)
    assert mismatch.text == f"its nodeSelector requires {DEPLOY_LABEL}=true (the node has {DEPLOY_LABEL}=false)"
    assert mismatch.label == f"{DEPLOY_LABEL}=true"


def test_helm_chart_affinity_alternatives():
    terms = [
        [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}],
        [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}],
    ]
    rule = placement(affinity_terms=terms)
    keys = placement_label_keys([rule])
    assert placement_mismatches(compact(gpu_node("a", labels={"nvidia.com/gpu.present": "true"}), keys), rule) == []
    [mismatch] = placement_mismatches(compact(gpu_node("b"), keys), rule)
    assert mismatch.text == (
        "its node affinity requires one of: feature.node.kubernetes.io/pci-10de.present=true"
        " | nvidia.com/gpu.present=true"
    )
    assert mismatch.label is None


def test_single_affinity_term_gives_a_label_fix():
    rule = placement(
        affinity_terms=[
            [
                {"key": "ack.node.gpu.schedule", "operator": "In", "values": ["default"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            ]
        ]
    )
    [mismatch] = placement_mismatches(compact(gpu_node("a"), placement_label_keys([rule])), rule)
    assert mismatch.text == "its node affinity requires ack.node.gpu.schedule=default and kubernetes.io/os=linux"
    assert mismatch.label == "ack.node.gpu.schedule=default kubernetes.io/os=linux"


def test_empty_affinity_term_selects_no_node():
    rule = placement(affinity_terms=[[]])
    [mismatch] = placement_mismatches(compact(gpu_node("a")), rule)
    assert mismatch.text == "its node affinity requires one of: (an empty term)"


def test_gke_affinity_exists_without_a_label_fix():
    rule = placement(affinity_terms=[[{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]])
    [mismatch] = placement_mismatches(compact(gpu_node("a"), placement_label_keys([rule])), rule)
    assert mismatch.text == "its node affinity requires cloud.google.com/gke-accelerator (any value)"
    assert mismatch.label is None


@pytest.mark.parametrize(
    "expression, labels, met",
    [
        ({"key": "k", "operator": "In", "values": ["a", "b"]}, {"k": "b"}, True),
        ({"key": "k", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {}, True),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {"k": "a"}, False),
        ({"key": "k", "operator": "Exists", "values": []}, {"k": ""}, True),
        ({"key": "k", "operator": "DoesNotExist", "values": []}, {"k": "x"}, False),
        ({"key": "k", "operator": "Gt", "values": ["3"]}, {"k": "4"}, True),
        ({"key": "k", "operator": "Lt", "values": ["3"]}, {"k": "4"}, False),
        ({"key": "k", "operator": "Gt", "values": ["3"]}, {"k": "x"}, False),
        ({"key": "k", "operator": "Bogus", "values": []}, {"k": "x"}, False),
    ],
)
def test_expression_met(expression, labels, met):
    assert expression_met(expression, labels) is met


def test_untolerated_taint_is_a_mismatch_with_both_fixes():
    node = compact(gpu_node("a", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]))
    rule = placement(tolerations=[])
    [mismatch] = placement_mismatches(node, rule)
    assert mismatch.text == "it does not tolerate the node's taint nvidia.com/gpu=present:NoSchedule"
    [fix] = mismatch_fixes([mismatch], ["a"], "kube-system/ds")
    assert "kubectl taint node a nvidia.com/gpu:NoSchedule-" in fix
    assert "add a toleration for nvidia.com/gpu=present:NoSchedule" in fix


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"},
        {"operator": "Exists"},
    ],
)
def test_tolerated_taints_are_no_mismatch(toleration):
    node = compact(gpu_node("a", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]))
    assert placement_mismatches(node, placement(tolerations=[toleration])) == []


def test_prefer_no_schedule_and_daemonset_default_taints_do_not_block():
    node = compact(
        gpu_node(
            "a",
            taints=[
                {"key": "x", "effect": "PreferNoSchedule"},
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            ],
        )
    )
    assert placement_mismatches(node, placement()) == []


# --- per-node verdicts ------------------------------------------------------------------------


def test_gpu_node_without_plugin_pod_names_the_label_to_add():
    result = check(
        [make_daemonset(node_selector={DEPLOY_LABEL: "true"}, status=healthy_status(1))],
        [gpu_node("a"), make_node("noplugin", labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8"})],
        [make_plugin_pod("a")],
    )
    assert kinds(result, "noplugin") == sorted([KIND_NO_CAPACITY, KIND_NO_PLUGIN_POD])
    finding = only(result, KIND_NO_PLUGIN_POD)
    assert finding["problem"] == "no device-plugin pod runs on this GPU node"
    assert finding["remedy"] == (
        "the DaemonSet kube-system/nvidia-device-plugin-daemonset does not select this node: its nodeSelector "
        f"requires {DEPLOY_LABEL}=true. Fix: kubectl label node noplugin {DEPLOY_LABEL}=true --overwrite"
    )
    capacity = only(result, KIND_NO_CAPACITY)
    assert capacity["problem"] == "no nvidia.com/gpu capacity"
    assert capacity["remedy"].startswith("fix the device-plugin pod on this node first")
    assert [n["healthy"] for n in result["nodes"]] == [True, False]


def test_ack_node_without_schedule_label_is_told_to_set_it():
    ds = make_daemonset(
        "ack-nvidia-device-plugin",
        pod_labels={"component": "nvidia-device-plugin"},
        node_selector={"ack.node.gpu.schedule": "default"},
        status=healthy_status(0),
    )
    node = make_node(
        "ack-1", gpus=2, labels={"aliyun.accelerator/nvidia_name": "Tesla-T4", "ack.node.gpu.schedule": "cgpu"}
    )
    finding = only(check([ds], [node], []), KIND_NO_PLUGIN_POD)
    assert "(the node has ack.node.gpu.schedule=cgpu)" in finding["remedy"]
    assert "kubectl label node ack-1 ack.node.gpu.schedule=default --overwrite" in finding["remedy"]


def test_node_selected_but_without_pod_points_at_the_daemonset_events():
    result = check(
        [make_daemonset(node_selector={DEPLOY_LABEL: "true"}, status=healthy_status(1))], [gpu_node("a")], []
    )
    finding = only(result, KIND_NO_PLUGIN_POD)
    assert finding["remedy"].startswith("the DaemonSet kube-system/nvidia-device-plugin-daemonset selects this node")
    assert "--field-selector spec.nodeName=a" in finding["remedy"]


def test_no_plugin_anywhere_says_to_deploy_one():
    result = check([], [gpu_node("a")], [])
    assert only(result, KIND_NO_DEVICE_PLUGIN)["subject"] == "cluster"
    assert "ack-nvidia-device-plugin" in only(result, KIND_NO_PLUGIN_POD)["remedy"]
    assert "nvidia-device-plugin.yml" in only(result, KIND_NO_PLUGIN_POD)["remedy"]


def test_ack_static_cluster_node_without_static_pod_is_told_to_restore_the_manifest():
    pods = [make_plugin_pod("a", labels={"component": "nvidia-device-plugin"}, static=True)]
    finding = only(check([], [gpu_node("a"), gpu_node("b")], pods), KIND_NO_PLUGIN_POD)
    assert finding["node"] == "b"
    assert f"restore {ACK_STATIC_MANIFEST}" in finding["remedy"]


def test_plugin_pod_not_ready_reports_state_and_restart():
    pods = [make_plugin_pod("a", ready=False, waiting="CrashLoopBackOff", restarts=7)]
    result = check(
        [make_daemonset(status=dict(healthy_status(1), numberReady=0, numberAvailable=0))], [gpu_node("a")], pods
    )
    finding = only(result, KIND_PLUGIN_NOT_READY)
    assert finding["problem"] == (
        "device-plugin pod kube-system/plugin-a is not Ready (Running, CrashLoopBackOff, 7 restarts)"
    )
    assert "kubectl -n kube-system logs plugin-a" in finding["remedy"]
    assert "Failed to initialize NVML: Unknown Error" in finding["remedy"]
    assert finding["remedy"].endswith("restart it: kubectl -n kube-system delete pod plugin-a")
    assert result["nodes"][0]["plugin_ready"] is False


def test_static_plugin_pod_not_ready_is_restarted_by_moving_the_manifest():
    pods = [make_plugin_pod("a", ready=False, labels={"component": "nvidia-device-plugin"}, static=True)]
    finding = only(check([], [gpu_node("a")], pods), KIND_PLUGIN_NOT_READY)
    assert f"move {ACK_STATIC_MANIFEST} out of /etc/kubernetes/manifests" in finding["remedy"]


def test_static_pod_and_daemonset_pod_on_one_node():
    ds = make_daemonset(
        "ack-nvidia-device-plugin", pod_labels={"component": "nvidia-device-plugin"}, status=healthy_status(1)
    )
    pods = [
        make_plugin_pod(
            "a",
            name="ack-nvidia-device-plugin-x",
            labels={"component": "nvidia-device-plugin"},
            daemonset="ack-nvidia-device-plugin",
        ),
        make_plugin_pod("a", name="nvidia-device-plugin-a", labels={"component": "nvidia-device-plugin"}, static=True),
    ]
    finding = only(check([ds], [gpu_node("a")], pods), KIND_SEVERAL_PLUGIN_PODS)
    assert finding["problem"].startswith("2 device-plugin pods: ")
    assert "ACK clusters upgraded to 1.32" in finding["remedy"]


def test_two_daemonsets_on_one_node():
    pods = [
        make_plugin_pod("a", name="p1"),
        make_plugin_pod("a", name="p2", labels={"app": "nvidia-device-plugin-daemonset"}, daemonset="op-ds"),
    ]
    finding = only(check([], [gpu_node("a")], pods), KIND_SEVERAL_PLUGIN_PODS)
    assert "(nvidia-device-plugin-daemonset, op-ds)" in finding["remedy"]


def test_restarting_plugin_pod_is_a_warning_only():
    result = check(
        [make_daemonset(status=healthy_status(1))],
        [gpu_node("a")],
        [make_plugin_pod("a", restarts=RESTART_WARNING_THRESHOLD)],
    )
    assert only(result, KIND_PLUGIN_RESTARTING)["severity"] == WARNING
    assert result["healthy"] is True


def test_finished_plugin_pods_are_ignored():
    assert project_plugin_pod(make_plugin_pod("a", phase="Failed")) is None
    assert project_plugin_pod(make_plugin_pod("")) is None


def test_capacity_zero_with_ready_plugin_explains_registration():
    node = make_node("a", gpus=0, labels={"nvidia.com/gpu.present": "true"})
    finding = only(check([make_daemonset(status=healthy_status(1))], [node], [make_plugin_pod("a")]), KIND_NO_CAPACITY)
    assert REGISTERED_LOG_LINE in finding["remedy"]
    assert "run the check again in a minute" in finding["remedy"]


def test_allocatable_below_capacity():
    result = check(
        [make_daemonset(status=healthy_status(1))], [gpu_node("a", gpus=4, allocatable=3)], [make_plugin_pod("a")]
    )
    finding = only(result, KIND_UNHEALTHY_GPUS)
    assert finding["problem"] == "allocatable 3 below capacity 4: 1 GPU(s) marked unhealthy"
    assert "XidCriticalError" in finding["remedy"]
    assert finding["remedy"].endswith("so then restart it: kubectl -n kube-system delete pod plugin-a")
    assert result["nodes"][0]["allocatable"] == 3


def test_label_count_differs_from_capacity_is_a_warning():
    node = gpu_node("a", gpus=4, labels={"nvidia.com/gpu.count": "8"})
    result = check([make_daemonset(status=healthy_status(1))], [node], [make_plugin_pod("a")])
    finding = only(result, KIND_LABEL_COUNT_MISMATCH)
    assert finding["severity"] == WARNING
    assert finding["problem"] == "labels state 8 GPU(s) (nvidia.com/gpu.count), capacity is 4"


def test_mig_capacity_counts_and_skips_the_label_count_comparison():
    node = make_node(
        "mig",
        gpus=0,
        labels={"nvidia.com/gpu.count": "1", "nvidia.com/gpu.product": "A100"},
        extra_capacity={"nvidia.com/mig-1g.5gb": "7"},
    )
    result = check([make_daemonset(status=healthy_status(1))], [node], [make_plugin_pod("mig")])
    assert result["findings"] == []
    assert result["nodes"][0]["capacity"] == 7


def test_custom_resource_name():
    options = check_options("example.com/gpu", None)
    node = make_node("a", labels={"nvidia.com/gpu.present": "true"}, extra_capacity={"example.com/gpu": "2"})
    result = check([make_daemonset(status=healthy_status(1))], [node], [make_plugin_pod("a")], options=options)
    assert result["nodes"][0]["capacity"] == 2
    assert result["healthy"] is True


def test_several_resource_names_count_and_the_first_is_the_one_findings_speak_of():
    options = check_options(["example.com/gpu", GPU], None)
    node = make_node("a", gpus=4, labels={"nvidia.com/gpu.present": "true"}, extra_capacity={"example.com/gpu": "2"})
    result = check([make_daemonset(status=healthy_status(1))], [node], [make_plugin_pod("a")], options=options)
    assert result["nodes"][0]["capacity"] == 2 + 4
    assert options.primary_resource == "example.com/gpu"
    empty = make_node("b", labels={"nvidia.com/gpu.present": "true"})
    result = check([make_daemonset(status=healthy_status(1))], [empty], [make_plugin_pod("b")], options=options)
    assert "example.com/gpu" in " ".join(f["problem"] + f["remedy"] for f in result["findings"])


def test_node_not_ready_is_a_warning():
    result = check([make_daemonset(status=healthy_status(1))], [gpu_node("a", ready=False)], [make_plugin_pod("a")])
    assert only(result, KIND_NODE_NOT_READY)["severity"] == WARNING


# --- options and selection ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, message",
    [
        ("ds", "daemonsets must be a list"),
        (["ds"], "daemonsets[0] must be a dictionary"),
        ([{"name": "ds"}], "daemonsets[0]: name 'ds' needs a namespace"),
        ([{}], "daemonsets[0]: give a namespace and name, or a label_selector"),
        ([{"namespace": "ns", "name": "a", "label_selector": "x=y"}], "not both"),
        ([{"namespace": "Bad/NS", "name": "a"}], "daemonsets[0].namespace: 'Bad/NS' is not a valid Kubernetes name"),
        ([{"label_selector": "a in (b"}], "daemonsets[0].label_selector"),
    ],
)
def test_bad_daemonsets_option(value, message):
    with pytest.raises(OptionError) as info:
        daemonset_targets(value)
    assert message in str(info.value)


@pytest.mark.parametrize("value", [None, []])
def test_unset_or_empty_daemonsets_option_means_discover(value):
    assert daemonset_targets(value) is None


@pytest.mark.parametrize(
    "resource, plugin, message",
    [
        ("", None, "resource_names must be a list of non-empty strings"),
        ([], None, "resource_names must be a list of non-empty strings"),
        ([GPU, ""], None, "resource_names must be a list of non-empty strings"),
        (GPU, "x", "device_plugin must be a dictionary"),
        (GPU, {"label_selectors": ["a in (b"]}, "label selector"),
    ],
)
def test_bad_options(resource, plugin, message):
    with pytest.raises(OptionError) as info:
        check_options(resource, plugin)
    assert message in str(info.value)


def projected(*daemonsets):
    return [project_daemonset(d) for d in daemonsets]


def test_discovery_keeps_daemonsets_whose_pods_are_device_plugin_pods():
    listed = projected(
        make_daemonset(),
        make_daemonset("kube-proxy", pod_labels={"k8s-app": "kube-proxy"}),
        make_daemonset("op", "gpu-operator", pod_labels={"app": "nvidia-device-plugin-daemonset"}),
    )
    selected, missing = select_daemonsets(listed, None, DEFAULT_OPTIONS)
    assert [namespaced_name(d) for d in selected] == ["kube-system/nvidia-device-plugin-daemonset", "gpu-operator/op"]
    assert missing == []


def test_discovery_honours_device_plugin_namespaces():
    options = check_options(GPU, {"namespaces": ["gpu-operator"]})
    listed = projected(
        make_daemonset(),
        make_daemonset("op", "gpu-operator", pod_labels={"app": "x"}, labels={"app": "nvidia-device-plugin-daemonset"}),
    )
    assert select_daemonsets(listed, None, options)[0] == []
    assert daemonset_list_namespaces(None, options) == ["gpu-operator"]


def test_targets_by_name_and_selector_and_missing():
    listed = projected(
        make_daemonset(),
        make_daemonset("nvdp", "nvidia-device-plugin", labels={"app.kubernetes.io/name": "nvidia-device-plugin"}),
    )
    targets = daemonset_targets(
        [
            {"namespace": "kube-system", "name": "nvidia-device-plugin-daemonset"},
            {"label_selector": "app.kubernetes.io/name=nvidia-device-plugin"},
            {"namespace": "gpu-operator", "name": "nvidia-device-plugin-daemonset"},
        ]
    )
    selected, missing = select_daemonsets(listed, targets, DEFAULT_OPTIONS)
    assert [namespaced_name(d) for d in selected] == [
        "kube-system/nvidia-device-plugin-daemonset",
        "nvidia-device-plugin/nvdp",
    ]
    assert [m["subject"] for m in missing] == ["DaemonSet gpu-operator/nvidia-device-plugin-daemonset"]
    assert missing[0]["kind"] == KIND_DAEMONSET_MISSING and missing[0]["severity"] == ERROR
    assert daemonset_list_namespaces(targets, DEFAULT_OPTIONS) is None
    assert daemonset_list_namespaces(targets[:1], DEFAULT_OPTIONS) == ["kube-system"]


def test_pod_queries_are_one_per_selector_plus_each_daemonset_selector():
    ds = projected(make_daemonset(pod_labels={"name": "nvidia-device-plugin-ds", "tier": "node"}))
    queries = plugin_pod_queries(DEFAULT_OPTIONS, ds)
    assert queries[:5] == [(None, s) for s in DEFAULT_DEVICE_PLUGIN_SELECTORS]
    assert queries[5:] == [("kube-system", "name=nvidia-device-plugin-ds,tier=node")]


def test_pod_queries_skip_a_daemonset_selector_already_listed_everywhere():
    queries = plugin_pod_queries(DEFAULT_OPTIONS, projected(make_daemonset(), make_daemonset(namespace="other")))
    assert queries == [(None, s) for s in DEFAULT_DEVICE_PLUGIN_SELECTORS]


@pytest.mark.parametrize("junk", [None, "x", 3, {"metadata": "x"}, {"metadata": {"name": "a"}}])
def test_projections_of_junk_are_none_not_a_traceback(junk):
    assert project_daemonset(junk) is None
    assert project_plugin_pod(junk) is None


def test_daemonset_with_junk_status_and_spec_still_projects():
    ds = {
        "metadata": {"name": "a", "namespace": "b", "generation": "x"},
        "spec": {"template": "junk"},
        "status": {"desiredNumberScheduled": "3", "numberReady": True},
    }
    projection = project_daemonset(ds)
    assert projection["desired"] == 0 and projection["ready"] == 0 and projection["generation"] is None
    assert projection["placement"] == {"node_selector": {}, "affinity_terms": [], "tolerations": []}


# --- report --------------------------------------------------------------------------------------


def test_report_lists_node_problem_and_remedy_errors_first():
    result = check(
        [make_daemonset(node_selector={DEPLOY_LABEL: "true"}, status=healthy_status(2))],
        [
            gpu_node("a", gpus=4, allocatable=3),
            gpu_node("b", gpus=4, labels={"nvidia.com/gpu.count": "8"}),
            gpu_node("c"),
        ],
        [make_plugin_pod("a"), make_plugin_pod("b"), make_plugin_pod("c")],
    )
    assert isinstance(result["report"], list)
    report = "\n".join(result["report"])
    assert result["report"][0] == (
        "GPU device plugin check FAILED: 1 error, 1 warning (3 GPU nodes, 1 DaemonSet, 3 plugin pods)"
    )
    assert "Deployment: NVIDIA device plugin, static DaemonSet" in report
    assert (
        "DaemonSet kube-system/nvidia-device-plugin-daemonset (NVIDIA device plugin, static DaemonSet): "
        "desired 2, current 2, updated 2, ready 2, available 2, misscheduled 0: ok" in report
    )
    assert "Nodes without findings (1): c" in report
    error_at = report.index("[ERROR] node a: allocatable 3 below capacity 4")
    warning_at = report.index("[WARNING] node b: labels state 8 GPU(s)")
    assert error_at < warning_at
    assert "what to do: the device plugin marks a GPU unhealthy" in report


def test_report_caps_repeated_findings_per_kind():
    nodes = [make_node(f"n{i:02d}", labels={"nvidia.com/gpu.present": "true"}) for i in range(13)]
    result = check([], nodes, [])
    report = "\n".join(result["report"])
    assert report.count("no device-plugin pod runs on this GPU node") == 10 + 1
    assert '... and 3 more with "no device-plugin pod runs on this GPU node" or alike: n10, n11, n12' in report
    assert len(result["findings"]) == 1 + 13 * 2


# --- hosts: gpu_host_facts results ------------------------------------------------------------------


def host_result(
    gpu_count=8, driver_found=True, driver_working=True, smi_path="/usr/bin/nvidia-smi", smi_error=None, configs=None
):
    if configs is None:
        configs = [
            {
                "path": "/etc/nvidia-container-runtime/config.toml",
                "exists": True,
                "envvar_when_unprivileged": False,
                "volume_mounts": True,
                "explicit": [],
                "hardened": True,
                "error": None,
            }
        ]
    return {
        "changed": False,
        "driver_found": driver_found,
        "driver_working": driver_working,
        "message": None if driver_found else "no driver found",
        "looked_for": [] if driver_found else ["nvidia-smi on PATH and in /usr/bin", "/proc/driver/nvidia/version"],
        "driver_version": "550.54.15" if driver_found else None,
        "nvidia_smi": {"path": smi_path, "works": driver_working, "error": smi_error},
        "gpu_count": gpu_count if driver_working else 0,
        "toolkit": {"hardened": all(c.get("hardened") for c in configs) if configs else None, "configs": configs},
    }


def healthy_cluster(hosts, require_hardening=False):
    """Two healthy GPU nodes (one with a FQDN name) and a CPU node, checked with these host facts."""
    nodes = [gpu_node("gpu-a.example.com"), gpu_node("gpu-b"), make_node("cpu")]
    pods = [make_plugin_pod("gpu-a.example.com"), make_plugin_pod("gpu-b")]
    return check(
        [make_daemonset(status=healthy_status(2))], nodes, pods, host_facts=hosts, require_hardening=require_hardening
    )


def test_healthy_hosts_pass_and_appear_on_their_nodes():
    result = healthy_cluster({"gpu-a": host_result(), "gpu-b": host_result()})
    assert result["findings"] == []
    hosts = {n["name"]: n["host"] for n in result["nodes"]}
    assert hosts["gpu-a.example.com"]["host"] == "gpu-a"
    assert hosts["gpu-b"] == {
        "host": "gpu-b",
        "driver_found": True,
        "driver_working": True,
        "driver_version": "550.54.15",
        "gpu_count": 8,
        "toolkit_hardened": True,
    }


@pytest.mark.parametrize(
    "host, names, node",
    [
        ("gpu-b", ["gpu-b", "gpu-b.x"], "gpu-b"),
        ("gpu-a.example.com", ["gpu-a"], "gpu-a"),
        ("gpu-a", ["gpu-a.one", "gpu-a.two"], None),
        ("10.0.0.7", ["gpu-a"], None),
    ],
)
def test_node_for_host(host, names, node):
    assert node_for_host(host, names) == node


def test_missing_driver_fails_with_what_was_looked_for():
    result = healthy_cluster({"gpu-b": host_result(driver_found=False, driver_working=False, smi_path=None)})
    finding = only(result, KIND_DRIVER_MISSING)
    assert finding["node"] == "gpu-b" and finding["subject"] == "host gpu-b"
    assert finding["problem"].startswith("no NVIDIA driver found (looked for nvidia-smi on PATH and in /usr/bin")
    assert "ack.aliyun.com/nvidia-driver-version" in finding["remedy"]
    assert result["healthy"] is False
    assert {n["name"]: n["healthy"] for n in result["nodes"]} == {"gpu-a.example.com": True, "gpu-b": False}


def test_nvidia_smi_failing_and_missing():
    failing = host_result(driver_working=False, smi_error="/usr/bin/nvidia-smi exited with 9: NVIDIA-SMI has failed")
    missing = host_result(driver_working=False, smi_path=None)
    result = healthy_cluster({"gpu-a": failing, "gpu-b": missing})
    by_node = {f["node"]: f for f in result["findings"] if f["kind"] == KIND_NVIDIA_SMI_FAILED}
    assert by_node["gpu-a.example.com"]["subject"] == "host gpu-a (node gpu-a.example.com)"
    assert "nvidia-smi fails: /usr/bin/nvidia-smi exited with 9" in by_node["gpu-a.example.com"]["problem"]
    assert "reboot after a driver upgrade" in by_node["gpu-a.example.com"]["remedy"]
    assert by_node["gpu-b"]["problem"] == "the driver is present (550.54.15) but nvidia-smi was not found"


def test_host_gpu_count_above_capacity_is_an_error_below_a_warning():
    result = healthy_cluster({"gpu-a": host_result(gpu_count=10), "gpu-b": host_result(gpu_count=4)})
    by_node = {f["node"]: f for f in result["findings"] if f["kind"] == KIND_HOST_GPU_COUNT_MISMATCH}
    assert by_node["gpu-a.example.com"]["severity"] == ERROR
    assert by_node["gpu-a.example.com"]["problem"] == (
        "nvidia-smi lists 10 GPU(s), node gpu-a.example.com has nvidia.com/gpu capacity 8"
    )
    assert by_node["gpu-b"]["severity"] == WARNING
    assert "time-slicing or MPS sharing" in by_node["gpu-b"]["remedy"]


def test_unhardened_toolkit_is_a_warning_unless_required():
    loose = [
        {
            "path": "/etc/nvidia-container-runtime/config.toml",
            "exists": True,
            "envvar_when_unprivileged": True,
            "volume_mounts": False,
            "explicit": [],
            "hardened": False,
            "error": None,
        }
    ]
    warned = healthy_cluster({"gpu-b": host_result(configs=loose)})
    finding = only(warned, KIND_ENVVAR_ACCEPTED)
    assert finding["severity"] == WARNING
    assert warned["healthy"] is True
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in finding["remedy"]
    assert "DEVICE_LIST_STRATEGY=volume-mounts" in finding["remedy"]
    required = healthy_cluster({"gpu-b": host_result(configs=loose)}, require_hardening=True)
    assert only(required, KIND_ENVVAR_ACCEPTED)["severity"] == ERROR
    assert required["healthy"] is False


def test_volume_mounts_off_and_unreadable_and_missing_configs():
    half = {
        "path": "/a.toml",
        "exists": True,
        "envvar_when_unprivileged": False,
        "volume_mounts": False,
        "hardened": False,
        "error": None,
    }
    broken = {"path": "/b.toml", "exists": True, "error": "not valid TOML: line 3", "hardened": None}
    absent = [{"path": "/c.toml", "exists": False}, {"path": "/d.toml", "exists": False}]
    result = healthy_cluster({"gpu-a": host_result(configs=[half, broken]), "gpu-b": host_result(configs=absent)})
    assert only(result, KIND_VOLUME_MOUNTS_OFF)["problem"].startswith("/a.toml: accept-nvidia-visible-devices-as")
    assert only(result, KIND_TOOLKIT_CONFIG_UNREADABLE)["problem"] == "/b.toml cannot be read: not valid TOML: line 3"
    assert only(result, KIND_TOOLKIT_CONFIG_MISSING)["problem"].startswith(
        "no NVIDIA Container Toolkit config found (/c.toml, /d.toml)"
    )


def test_failed_and_unreachable_host_results():
    result = healthy_cluster(
        {
            "gpu-a": {"unreachable": True, "msg": "Failed to connect to the host via ssh"},
            "gpu-b": {"failed": True, "msg": "MODULE FAILURE"},
            "gpu-c": {"changed": False},
        }
    )
    problems = {f["node"]: f["problem"] for f in result["findings"] if f["kind"] == KIND_HOST_FACTS_FAILED}
    assert problems == {
        "gpu-a.example.com": "host unreachable: Failed to connect to the host via ssh",
        "gpu-b": "gpu_host_facts failed: MODULE FAILURE",
        "gpu-c": "not a gpu_host_facts result",
    }
    assert result["healthy"] is False


def test_facts_under_ansible_facts_are_read_too():
    result = healthy_cluster({"gpu-b": {"ansible_facts": {"gpu_host": host_result(gpu_count=4)}}})
    assert kinds(result) == [KIND_HOST_GPU_COUNT_MISMATCH]


def test_host_without_node_is_a_warning_and_gpu_host_behind_a_plain_node_an_error():
    result = healthy_cluster({"gpu-z": host_result(), "cpu": host_result(gpu_count=2)})
    assert only(result, KIND_HOST_NOT_A_NODE)["severity"] == WARNING
    advertised = only(result, KIND_HOST_GPUS_NOT_ADVERTISED)
    assert (
        advertised["problem"] == "the host has 2 GPU(s), but node cpu has no GPU labels and no nvidia.com/gpu capacity"
    )
    assert "does not select this node" not in advertised["remedy"]  # the static DaemonSet has no nodeSelector
    assert advertised["remedy"].startswith("the DaemonSet kube-system/nvidia-device-plugin-daemonset selects this node")


@pytest.mark.parametrize(
    "host_facts, message",
    [
        ("junk", "host_facts must be a dictionary"),
        ({"gpu-a": "junk"}, "host_facts['gpu-a'] must be a gpu_host_facts result"),
    ],
)
def test_bad_host_facts_raise_a_clear_error(host_facts, message):
    with pytest.raises(OptionError) as info:
        check([], [gpu_node("a")], [], host_facts=host_facts)
    assert message in str(info.value)
