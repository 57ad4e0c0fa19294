from dataclasses import replace

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.facts import (
    PROBLEM_NO_CAPACITY,
    PROBLEM_NO_PLUGIN,
    PROBLEM_NOT_EXCLUSIVE,
    PROBLEM_OUTSIDE_SCHEDULER,
    PROBLEM_OVERALLOCATED,
    PROBLEM_PLUGIN_NOT_READY,
    PROBLEM_TEXT,
    PROBLEM_UNHEALTHY,
    split_pods,
    summarise,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import (
    ROLE_DEVICE_PLUGIN,
    ROLE_EXEMPT,
    ROLE_WORKLOAD,
    project_pod,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import health_table_from_option
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.nodes import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, options_from_params
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import pod_gpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import selects_gpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import parse_label_selector


def make_node(name, gpus=None, allocatable=None, labels=None, ready=True, unschedulable=False, taints=None):
    capacity = {"cpu": "64", "memory": "512Gi"}
    alloc = dict(capacity)
    if gpus is not None:
        capacity["nvidia.com/gpu"] = str(gpus)
        alloc["nvidia.com/gpu"] = str(gpus if allocatable is None else allocatable)
    spec = {"unschedulable": True} if unschedulable else {}
    if taints:
        spec["taints"] = taints
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/os": "linux", **(labels or {})}},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def make_pod(name, node, gpus=0, env=None, labels=None, namespace="team", phase="Running", ready=True, init=None):
    container = {"name": "main", "image": "cuda"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if env is not None:
        container["env"] = env
    spec = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    if init:
        spec["initContainers"] = init
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def plugin_pod(node, ready=True, labels=None, name=None):
    return make_pod(
        name or f"nvidia-device-plugin-{node}",
        node,
        namespace="kube-system",
        ready=ready,
        labels=labels or {"name": "nvidia-device-plugin-ds"},
        env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
    )


def fleet(nodes, pods, options=DEFAULT_OPTIONS):
    projected_nodes = [project_node(n, options) for n in nodes]
    workloads, plugins = split_pods(project_pod(p, options) for p in pods)
    return summarise([n for n in projected_nodes if n], workloads, plugins, options)


def by_name(facts):
    return {node["name"]: node for node in facts["nodes"]}


def kinds(node_facts):
    return [p["kind"] for p in node_facts["problems"]]


# --- label selectors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "selector, labels, expected",
    [
        ("app=x", {"app": "x"}, True),
        ("app==x", {"app": "x"}, True),
        ("app=x", {"app": "y"}, False),
        ("app!=x", {"app": "y"}, True),
        ("app!=x", {}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("!app", {}, True),
        ("app in (a, b)", {"app": "b"}, True),
        ("app in (a,b)", {"app": "c"}, False),
        ("app notin (a,b)", {"app": "c"}, True),
        ("app notin (a,b)", {}, True),
        ("app=x,tier in (gpu),!legacy", {"app": "x", "tier": "gpu"}, True),
        ("app=x,tier in (gpu),!legacy", {"app": "x", "tier": "gpu", "legacy": "1"}, False),
    ],
)
def test_label_selector_matching(selector, labels, expected):
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("bad", ["", "  ", None, 3, "app=x,", "a b c", "app in (x"])
def test_label_selector_rejects_malformed(bad):
    with pytest.raises(OptionError):
        parse_label_selector(bad)


# --- options -------------------------------------------------------------------------------


def test_options_defaults():
    options = options_from_params()
    assert options.resource_names == ("nvidia.com/gpu",)
    assert options.counts("nvidia.com/gpu")
    assert options.counts("nvidia.com/mig-1g.5gb")
    assert not options.counts("aliyun.com/gpu-mem")
    assert {s.text for s in options.plugin_selectors} >= {
        "name=nvidia-device-plugin-ds",
        "app.kubernetes.io/name=nvidia-device-plugin",
        "app=nvidia-device-plugin-daemonset",
        "component=nvidia-device-plugin",
    }


def test_options_custom_values():
    options = options_from_params(
        resource_names=["example.com/gpu"],
        model_label_keys=["example.com/model"],
        device_plugin={"namespaces": ["gpu"], "label_selectors": ["app=plugin"]},
        exempt_pod_selectors=[],
    )
    assert options.counts("example.com/gpu") and not options.counts("nvidia.com/gpu")
    assert options.is_gpu("example.com/gpu")
    assert options.plugin_namespaces == {"gpu"}
    assert [s.text for s in options.plugin_selectors] == ["app=plugin"]
    assert options.exempt_selectors == ()
    assert "example.com/model" in options.label_keys


@pytest.mark.parametrize(
    "params, option",
    [
        ({"resource_names": [""]}, "resource_names"),
        ({"resource_names": [3]}, "resource_names"),
        ({"device_plugin": "kube-system"}, "device_plugin"),
        ({"device_plugin": {"label_selectors": ["app in (x"]}}, "label selector"),
        ({"device_plugin": {"namespaces": [None]}}, "device_plugin.namespaces"),
        ({"exempt_pod_selectors": [""]}, "exempt_pod_selectors"),
    ],
)
def test_options_errors_name_the_option(params, option):
    with pytest.raises(OptionError, match=option):
        options_from_params(**params)


# --- projection ------------------------------------------------------------------------------


def test_project_node_keeps_only_what_the_facts_need():
    node = make_node(
        "n1",
        gpus=8,
        allocatable=7,
        labels={
            "nvidia.com/gpu.product": "Tesla-T4",
            "nvidia.com/cuda.driver-version.full": "535.129.03",
            "topology.kubernetes.io/zone": "z1",
        },
        unschedulable=True,
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, "junk"],
    )
    node["status"]["capacity"]["aliyun.com/gpu-mem"] = "64"
    compact = project_node(node)
    assert compact == {
        "name": "n1",
        "labels": {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/cuda.driver-version.full": "535.129.03"},
        "capacity": {"nvidia.com/gpu": 8, "aliyun.com/gpu-mem": 64},
        "allocatable": {"nvidia.com/gpu": 7},
        "ready": True,
        "schedulable": False,
        "taints": [{"key": "nvidia.com/gpu", "value": None, "effect": "NoSchedule"}],
        "location": ((), None, "z1", None, None),
        "conditions": (),
    }


@pytest.mark.parametrize("bad", [None, [], "node", {}, {"metadata": {"name": 5}}, {"metadata": "x"}])
def test_project_node_drops_what_is_not_a_named_node(bad):
    assert project_node(bad) is None


def test_project_node_survives_wrong_types():
    node = {
        "metadata": {"name": "n", "labels": ["x"]},
        "spec": "x",
        "status": {"capacity": {"nvidia.com/gpu": "lots"}, "conditions": "Ready"},
    }
    compact = project_node(node)
    assert compact["capacity"] == {}
    assert compact["ready"] is False
    assert compact["labels"] == {}


def test_project_pod_keeps_gpu_pods_only():
    assert project_pod(make_pod("cpu", "n1")) is None
    assert project_pod(make_pod("unbound", None, gpus=1)) is None
    assert project_pod(make_pod("done", "n1", gpus=1, phase="Succeeded")) is None
    assert project_pod(make_pod("failed", "n1", gpus=1, phase="Failed")) is None
    compact = project_pod(make_pod("train", "n1", gpus=2))
    assert compact == {
        "namespace": "team",
        "name": "train",
        "node": "n1",
        "role": ROLE_WORKLOAD,
        "gpus": {"nvidia.com/gpu": 2},
        "bypass": [],
        "ready": True,
    }


@pytest.mark.parametrize("value", ["all", "0", "GPU-8f1f4d06-07fd-27a7-52d5-e58aa060d256", "0,1", " all "])
def test_project_pod_finds_visible_devices_without_gpu_limit(value):
    pod = make_pod("sneaky", "n1", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}])
    compact = project_pod(pod)
    assert compact["bypass"] == [f"container main: NVIDIA_VISIBLE_DEVICES={value}"]
    assert compact["gpus"] == {}


@pytest.mark.parametrize("value", ["void", "none", "", "all,void", " none "])
def test_values_that_request_no_gpu(value):
    assert not selects_gpus(value)
    assert project_pod(make_pod("fine", "n1", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}])) is None


def test_visible_devices_last_entry_wins_and_references_count():
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert project_pod(make_pod("p", "n1", env=env)) is None
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]
    assert project_pod(make_pod("p", "n1", env=env))["bypass"] == [
        "container main: NVIDIA_VISIBLE_DEVICES from a reference"
    ]


def test_visible_devices_with_a_gpu_limit_is_not_outside_the_scheduler():
    pod = make_pod("ok", "n1", gpus=1, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    assert project_pod(pod)["bypass"] == []


def test_visible_devices_in_init_container_is_found():
    init = [{"name": "warmup", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]
    compact = project_pod(make_pod("p", "n1", init=init))
    assert compact["bypass"] == ["container warmup: NVIDIA_VISIBLE_DEVICES=all"]


def test_device_plugin_and_exempt_pods():
    compact = project_pod(plugin_pod("n1", ready=False))
    assert compact["role"] == ROLE_DEVICE_PLUGIN
    assert compact["ready"] is False
    assert compact["bypass"] == []
    dcgm = make_pod(
        "dcgm", "n1", labels={"app": "nvidia-dcgm-exporter"}, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    )
    assert project_pod(dcgm) is None
    validator = make_pod("cuda-validator", "n1", gpus=1, labels={"app": "nvidia-operator-validator"})
    assert project_pod(validator)["role"] == ROLE_EXEMPT


def test_plugin_namespace_restriction():
    options = options_from_params(device_plugin={"namespaces": ["gpu-operator"]})
    pod = plugin_pod("n1")  # in kube-system
    assert project_pod(pod, options)["role"] == ROLE_WORKLOAD


def test_pod_gpus_follow_the_scheduler_arithmetic():
    def container(n, sidecar=False):
        c = {"resources": {"limits": {"nvidia.com/gpu": str(n)}}}
        if sidecar:
            c["restartPolicy"] = "Always"
        return c

    assert pod_gpus({"containers": [container(1), container(2)]}, DEFAULT_OPTIONS.is_gpu) == {"nvidia.com/gpu": 3}
    assert pod_gpus({"containers": [container(1)], "initContainers": [container(4)]}, DEFAULT_OPTIONS.is_gpu) == {
        "nvidia.com/gpu": 4
    }
    assert pod_gpus(
        {"containers": [container(1)], "initContainers": [container(1, sidecar=True)]}, DEFAULT_OPTIONS.is_gpu
    ) == {"nvidia.com/gpu": 2}
    requests_only = {"resources": {"requests": {"nvidia.com/gpu": "2"}}}
    assert pod_gpus({"containers": [requests_only]}, DEFAULT_OPTIONS.is_gpu) == {"nvidia.com/gpu": 2}
    fractional = {"resources": {"limits": {"nvidia.com/gpu": "500m"}}}
    assert pod_gpus({"containers": [fractional]}, DEFAULT_OPTIONS.is_gpu) == {}


@pytest.mark.parametrize(
    "bad", [None, "pod", {"spec": "x"}, {"spec": {"nodeName": 5}}, {"spec": {"nodeName": "n", "containers": "x"}}]
)
def test_project_pod_survives_garbage(bad):
    assert project_pod(bad) is None


# --- summaries -------------------------------------------------------------------------------

ACK = {
    "aliyun.accelerator/nvidia_name": "Tesla-V100-SXM2-16GB",
    "aliyun.accelerator/nvidia_count": "4",
    "ack.node.gpu.schedule": "default",
}
GFD = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/cuda.driver-version.full": "550.54.15",
    "nvidia.com/cuda.runtime-version.full": "12.4",
}


def test_healthy_node_facts():
    facts = fleet([make_node("h100", 8, labels=GFD)], [plugin_pod("h100"), make_pod("train", "h100", gpus=3)])
    node = by_name(facts)["h100"]
    assert node["model"] == "NVIDIA-H100-80GB-HBM3"
    assert node["model_source"] == "nvidia.com/gpu.product"
    assert node["model_label_value"] == "NVIDIA-H100-80GB-HBM3"
    assert (node["capacity"], node["allocatable"], node["unhealthy"], node["allocated"], node["free"]) == (
        8,
        8,
        0,
        3,
        5,
    )
    assert node["driver_version"] == "550.54.15"
    assert node["cuda_version"] == "12.4"
    assert node["label_gpu_count"] == 8
    assert node["device_plugin_pod"] == "kube-system/nvidia-device-plugin-h100"
    assert node["device_plugin_ready"] is True
    assert node["gpu_pods"] == ["team/train"]
    assert node["problems"] == []
    assert facts["problems"] == []
    assert facts["models"] == {
        "NVIDIA-H100-80GB-HBM3": {
            "label_value": "NVIDIA-H100-80GB-HBM3",
            "nodes": 1,
            "capacity": 8,
            "allocatable": 8,
            "unhealthy": 0,
            "allocated": 3,
            "free": 5,
            "by_source": {
                "device_plugin": {"capacity": 8, "allocatable": 8, "allocated": 3, "free": 5},
                "dra": {"capacity": 0, "allocatable": 0, "allocated": 0, "free": 0},
            },
        }
    }


DEVICE_PLUGIN_KINDS = (
    PROBLEM_NO_CAPACITY,
    PROBLEM_UNHEALTHY,
    PROBLEM_NO_PLUGIN,
    PROBLEM_PLUGIN_NOT_READY,
    PROBLEM_NOT_EXCLUSIVE,
    PROBLEM_OVERALLOCATED,
    PROBLEM_OUTSIDE_SCHEDULER,
)


def test_every_problem_kind_with_its_reason():
    nodes = [
        make_node("no-capacity", labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "Tesla-T4"}),
        make_node("unhealthy", 4, allocatable=3, labels=GFD),
        make_node("no-plugin", 2, labels=GFD),
        make_node("plugin-down", 2, labels=GFD),
        make_node("shared", 1, labels={**ACK, "ack.node.gpu.schedule": "cgpu"}),
        make_node("overcommit", 2, labels=GFD),
        make_node("bypass", 4, labels=ACK),
    ]
    pods = [plugin_pod(n) for n in ("unhealthy", "plugin-down", "shared", "overcommit", "bypass")]
    pods[1] = plugin_pod("plugin-down", ready=False)
    pods += [
        make_pod("a", "overcommit", gpus=2),
        make_pod("b", "overcommit", gpus=2),
        make_pod("sneaky", "bypass", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
    ]
    facts = fleet(nodes, pods)
    nodes_facts = by_name(facts)
    assert kinds(nodes_facts["no-capacity"]) == [PROBLEM_NO_CAPACITY, PROBLEM_NO_PLUGIN]
    assert kinds(nodes_facts["unhealthy"]) == [PROBLEM_UNHEALTHY]
    assert kinds(nodes_facts["no-plugin"]) == [PROBLEM_NO_PLUGIN]
    assert kinds(nodes_facts["plugin-down"]) == [PROBLEM_PLUGIN_NOT_READY]
    assert kinds(nodes_facts["shared"]) == [PROBLEM_NOT_EXCLUSIVE]
    assert kinds(nodes_facts["overcommit"]) == [PROBLEM_OVERALLOCATED]
    assert kinds(nodes_facts["bypass"]) == [PROBLEM_OUTSIDE_SCHEDULER]

    problems = {(p["node"], p["kind"]): p for p in facts["problems"]}
    assert problems[("no-capacity", PROBLEM_NO_CAPACITY)]["problem"] == "GPU labels but no nvidia.com/gpu capacity"
    assert "nvidia.com/gpu.product=Tesla-T4" in problems[("no-capacity", PROBLEM_NO_CAPACITY)]["reason"]
    assert problems[("unhealthy", PROBLEM_UNHEALTHY)]["reason"].startswith("capacity 4, allocatable 3")
    assert (
        problems[("plugin-down", PROBLEM_PLUGIN_NOT_READY)]["reason"]
        == "not Ready: kube-system/nvidia-device-plugin-plugin-down"
    )
    assert problems[("shared", PROBLEM_NOT_EXCLUSIVE)]["reason"] == "ack.node.gpu.schedule=cgpu"
    assert problems[("overcommit", PROBLEM_OVERALLOCATED)]["reason"] == "allocated 4, allocatable 2"
    assert (
        problems[("bypass", PROBLEM_OUTSIDE_SCHEDULER)]["reason"]
        == "team/sneaky (container main: NVIDIA_VISIBLE_DEVICES=all)"
    )
    assert {p["problem"] for p in facts["problems"]} == {
        PROBLEM_TEXT[kind].format(resource="nvidia.com/gpu") for kind in DEVICE_PLUGIN_KINDS
    }
    assert facts["nodes_without_capacity"] == ["no-capacity"]
    unhealthy = nodes_facts["unhealthy"]
    assert (unhealthy["unhealthy"], unhealthy["free"]) == (1, 3)
    overcommit = nodes_facts["overcommit"]
    assert (overcommit["allocated"], overcommit["free"]) == (4, 0)


def test_plugin_not_ready_shows_on_that_node_only():
    nodes = [make_node(f"n{i}", 4, labels=GFD) for i in range(3)]
    pods = [plugin_pod("n0"), plugin_pod("n1", ready=False), plugin_pod("n2")]
    facts = fleet(nodes, pods)
    assert [(p["node"], p["kind"]) for p in facts["problems"]] == [("n1", PROBLEM_PLUGIN_NOT_READY)]


def test_two_plugin_pods_one_ready_is_fine():
    # ACK clusters upgraded before 2025-05 can run the static pod and the DaemonSet together
    nodes = [make_node("n", 4, labels=ACK)]
    pods = [
        plugin_pod("n", ready=False, labels={"component": "nvidia-device-plugin"}, name="static"),
        plugin_pod("n", labels={"component": "nvidia-device-plugin"}, name="ds"),
    ]
    node = by_name(fleet(nodes, pods))["n"]
    assert node["device_plugin_ready"] is True
    assert node["device_plugin_pod"] == "kube-system/ds"
    assert node["device_plugin_pods"] == ["kube-system/ds", "kube-system/static"]
    assert node["problems"] == []


def test_non_gpu_nodes_are_left_out_and_pods_elsewhere_ignored():
    facts = fleet(
        [make_node("cpu"), make_node("gpu", 2, labels=GFD)],
        [
            plugin_pod("gpu"),
            make_pod("x", "cpu", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
            make_pod("y", "gone", gpus=1),
        ],
    )
    assert [n["name"] for n in facts["nodes"]] == ["gpu"]
    totals = {k: v for k, v in facts["totals"].items() if k != "by_source"}
    assert totals == {"nodes": 1, "capacity": 2, "allocatable": 2, "unhealthy": 0, "allocated": 0, "free": 2}


def test_capacity_alone_makes_a_gpu_node_of_unknown_model():
    facts = fleet([make_node("bare", 2)], [plugin_pod("bare")])
    node = by_name(facts)["bare"]
    assert node["model"] is None
    assert node["gpu_signals"] == {"labels": [], "capacity": ["capacity nvidia.com/gpu=2"], "dra_devices": 0}
    assert list(facts["models"]) == ["unknown"]


def test_mig_resources_count_as_gpus():
    node = make_node("mig", labels=GFD)
    node["status"]["capacity"]["nvidia.com/mig-1g.10gb"] = "7"
    node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7"
    pod = make_pod("slice", "mig")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    facts = by_name(fleet([node], [plugin_pod("mig"), pod]))["mig"]
    assert (facts["capacity"], facts["allocated"], facts["free"]) == (7, 1, 6)
    assert facts["resources"] == {"nvidia.com/mig-1g.10gb": {"capacity": 7, "allocatable": 7, "allocated": 1}}


def test_models_are_totalled_per_model():
    nodes = [
        make_node("a0", 8, labels=GFD),
        make_node("a1", 8, allocatable=6, labels=GFD),
        make_node("v", 4, labels=ACK),
    ]
    pods = [plugin_pod(n) for n in ("a0", "a1", "v")] + [make_pod("t", "a0", gpus=8), make_pod("u", "v", gpus=1)]
    facts = fleet(nodes, pods)
    assert facts["models"]["NVIDIA-H100-80GB-HBM3"] == {
        "label_value": "NVIDIA-H100-80GB-HBM3",
        "nodes": 2,
        "capacity": 16,
        "allocatable": 14,
        "unhealthy": 2,
        "allocated": 8,
        "free": 6,
        "by_source": {
            "device_plugin": {"capacity": 16, "allocatable": 14, "allocated": 8, "free": 6},
            "dra": {"capacity": 0, "allocatable": 0, "allocated": 0, "free": 0},
        },
    }
    assert facts["models"]["Tesla-V100-SXM2-16GB"]["free"] == 3
    assert facts["totals"]["allocated"] == 9


def test_scheduling_a_pod_changes_allocated_and_free():
    nodes = [make_node("n", 4, labels=GFD)]
    before = by_name(fleet(nodes, [plugin_pod("n")]))["n"]
    after = by_name(fleet(nodes, [plugin_pod("n"), make_pod("job", "n", gpus=3)]))["n"]
    assert (before["allocated"], before["free"]) == (0, 4)
    assert (after["allocated"], after["free"]) == (3, 1)


def test_node_state_is_reported():
    node = make_node(
        "n",
        2,
        labels=GFD,
        ready=False,
        unschedulable=True,
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )
    facts = by_name(fleet([node], [plugin_pod("n")]))["n"]
    assert facts["ready"] is False
    assert facts["schedulable"] is False
    assert facts["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_versions_from_split_labels():
    labels = {
        "nvidia.com/gpu.product": "Tesla-T4",
        "nvidia.com/cuda.driver.major": "535",
        "nvidia.com/cuda.driver.minor": "129",
        "nvidia.com/cuda.driver.rev": "03",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "2",
    }
    facts = by_name(fleet([make_node("n", 1, labels=labels)], [plugin_pod("n")]))["n"]
    assert (facts["driver_version"], facts["cuda_version"]) == ("535.129.03", "12.2")


def test_custom_resource_name_in_problem_text():
    options = options_from_params(resource_names=["example.com/gpu"])
    facts = fleet([make_node("n", labels=GFD)], [plugin_pod("n")], options)
    assert facts["problems"][0]["problem"] == "GPU labels but no example.com/gpu capacity"


# --- the health view ---------------------------------------------------------------------------------


def with_conditions(node, *conditions):
    node["status"]["conditions"] += [dict(c) for c in conditions]
    return node


def test_health_of_device_plugin_nodes_by_each_signal_and_the_counts():
    counted = GFD  # its nvidia.com/gpu.count is 8
    nodes = [
        make_node("ok", 8, labels=counted),
        with_conditions(
            make_node("eks-xid", 8, labels=counted),
            {
                "type": "AcceleratedHardwareReady",
                "status": "False",
                "reason": "NvidiaXID79Error",
                "message": "fell off",
            },
        ),
        make_node("withdrawn", 8, allocatable=6, labels=counted),
        make_node("lost-one", 7, labels=counted),
        make_node(
            "nvsentinel",
            8,
            labels=counted,
            taints=[{"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"}],
        ),
        make_node("plugin-down", 8, labels=counted),
    ]
    pods = [plugin_pod(n["metadata"]["name"], ready=n["metadata"]["name"] != "plugin-down") for n in nodes]
    facts = fleet(nodes, pods)
    health = {name: node["health"] for name, node in by_name(facts).items()}
    assert health["ok"] == {"status": "healthy", "problems": []}
    assert [(name, h["status"], [p["kind"] for p in h["problems"]]) for name, h in sorted(health.items())] == [
        ("eks-xid", "failed", ["gpu_health_condition"]),
        ("lost-one", "degraded", ["gpus_below_expected"]),
        ("nvsentinel", "failed", ["gpu_health_taint"]),
        ("ok", "healthy", []),
        ("plugin-down", "failed", ["gpu_plugin_not_ready"]),
        ("withdrawn", "degraded", ["gpus_withdrawn"]),
    ]
    reason = "EKS node monitoring agent: AcceleratedHardwareReady=False (NvidiaXID79Error): fell off"
    assert health["eks-xid"]["problems"][0] == {
        "id": "health.gpu_health_condition",
        "severity": "error",
        "status": "failed",
        "title": "GPU health condition reported",
        "message": reason,
        "remedy": health["eks-xid"]["problems"][0]["remedy"],
        "where": {},
        "kind": "gpu_health_condition",
        "problem": "GPU health condition reported",
        "reason": reason,
    }
    assert "follow the action its producer recommends" in health["eks-xid"]["problems"][0]["remedy"]
    assert health["withdrawn"]["problems"][0]["reason"] == "nvidia.com/gpu: capacity 8, allocatable 6 (2 withdrawn)"
    assert health["lost-one"]["problems"][0]["reason"] == "7 registered, 8 expected (label nvidia.com/gpu.count)"
    assert facts["health"] == {"healthy": 1, "unknown": 0, "degraded": 2, "failed": 3}
    # The health view adds nothing to the fleet problems: the withdrawn GPUs and the plugin were there already.
    assert sorted((p["node"], p["kind"]) for p in facts["problems"]) == [
        ("plugin-down", PROBLEM_PLUGIN_NOT_READY),
        ("withdrawn", PROBLEM_UNHEALTHY),
    ]


def test_health_by_the_option_rows_and_the_expected_count_per_model():
    table = health_table_from_option(
        {
            "signals": [{"condition": "GPUXIDProblem", "severity": "degraded", "producer": "node-problem-detector"}],
            "expected_gpus": {"NVIDIA-H100-80GB-HBM3": 8},
        }
    )
    options = replace(DEFAULT_OPTIONS, health=table)
    uncounted = {k: v for k, v in GFD.items() if k != "nvidia.com/gpu.count"}
    npd = with_conditions(
        make_node("npd", 8, labels=uncounted), {"type": "GPUXIDProblem", "status": "True", "reason": "XID48"}
    )
    short = make_node("short", 4, labels=uncounted)
    facts = fleet([npd, short], [plugin_pod("npd"), plugin_pod("short")], options)
    health = {name: node["health"] for name, node in by_name(facts).items()}
    assert [(p["kind"], p["status"], p["severity"]) for p in health["npd"]["problems"]] == [
        ("gpu_health_condition", "degraded", "warning")
    ]
    assert health["npd"]["problems"][0]["reason"] == "node-problem-detector: GPUXIDProblem=True (XID48): no message"
    assert health["short"]["problems"][0]["reason"] == (
        "4 registered, 8 expected (health.expected_gpus for NVIDIA-H100-80GB-HBM3)"
    )
    assert facts["health"] == {"healthy": 0, "unknown": 0, "degraded": 2, "failed": 0}
    # Without the option the same nodes are healthy: the condition is unknown and no count is expected.
    assert fleet([npd, short], [plugin_pod("npd"), plugin_pod("short")])["health"]["healthy"] == 2


def test_the_projection_keeps_only_the_conditions_the_table_knows():
    node = with_conditions(
        make_node("n", 8),
        {"type": "XidCriticalError", "status": "True", "reason": '{"79":true}', "message": "boot-id"},
        {"type": "KernelDeadlock", "status": "False"},
    )
    assert project_node(node)["conditions"] == (
        {"type": "XidCriticalError", "status": "True", "reason": '{"79":true}', "message": "boot-id"},
    )
