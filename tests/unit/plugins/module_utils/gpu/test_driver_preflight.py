"""What blocks a driver upgrade on a node, and the CUDA a container needs of the driver."""

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.cuda_requirements import (
    MINIMUM_DRIVER,
    container_cuda_need,
    image_cuda,
    minimum_driver,
    parse_require_cuda,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_preflight import (
    BUDGET_ALLOWS_NO_DISRUPTION,
    CUDA_NEEDS_NEWER_DRIVER,
    DRA_CLAIM_HOLDER,
    GPU_DAEMONSET_POD,
    GPU_USE_WITHOUT_REQUEST,
    Blocker,
    allows_no_disruption,
    gpu_daemonsets,
    gpu_use_without_request,
    upgrade_blockers,
)

NODE = "gpu-1"


def pod(name, containers=None, namespace="ml", node=NODE, labels=None, owner=None, **spec):
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    body = {"nodeName": node, "containers": containers or [{"name": "main", "image": "busybox"}], **spec}
    return {"metadata": meta, "spec": body, "status": {"phase": "Running"}}


def container(image="busybox", env=None, gpus=0, **extra):
    c = {"name": "main", "image": image, **extra}
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return c


def budget(name, selector, max_unavailable=None, allowed=None, namespace="ml"):
    b = {"metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector}}
    if max_unavailable is not None:
        b["spec"]["maxUnavailable"] = max_unavailable
    if allowed is not None:
        b["status"] = {"disruptionsAllowed": allowed, "observedGeneration": 1}
    return b


def ds(name, template_containers, namespace="ml", labels=None, owner=None):
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True}]
    return {"metadata": meta, "spec": {"template": {"spec": {"containers": template_containers}}}}


def reasons(blockers):
    return sorted((b.pod, b.reason) for b in blockers)


def test_visible_devices_without_a_request_blocks():
    pods = [
        pod("sneaky", [container(env={"NVIDIA_VISIBLE_DEVICES": "all"})]),
        pod("honest", [container(env={"NVIDIA_VISIBLE_DEVICES": "all"}, gpus=1)]),
        pod("void", [container(env={"NVIDIA_VISIBLE_DEVICES": "void"})]),
        pod("elsewhere", [container(env={"NVIDIA_VISIBLE_DEVICES": "0"})], node="gpu-2"),
    ]
    found = upgrade_blockers(NODE, pods, [], [], [], None)
    assert reasons(found) == [("sneaky", GPU_USE_WITHOUT_REQUEST)]
    assert found[0] == Blocker(
        NODE, "ml", "sneaky", GPU_USE_WITHOUT_REQUEST, "container main: NVIDIA_VISIBLE_DEVICES=all"
    )


def test_runtime_class_and_privileged_gpu_images():
    assert gpu_use_without_request({"runtimeClassName": "nvidia", "containers": [container()]})
    priv = container("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", securityContext={"privileged": True})
    assert gpu_use_without_request({"containers": [priv]})
    assert not gpu_use_without_request({"containers": [container(securityContext={"privileged": True})]})
    assert not gpu_use_without_request({"runtimeClassName": "nvidia", "containers": [container(gpus=1)]})


def test_gpu_daemonset_pods_block_and_the_driver_is_left_out():
    daemonsets = [
        ds("gpu-agent", [container(gpus=1)]),
        ds("log-agent", [container()]),
        ds(
            "nvidia-driver-daemonset",
            [container(env={"NVIDIA_VISIBLE_DEVICES": "all"})],
            labels={"app": "nvidia-driver-daemonset"},
        ),
        ds("nvidia-dcgm-exporter", [container(env={"NVIDIA_VISIBLE_DEVICES": "all"})], owner="ClusterPolicy"),
    ]
    chosen = gpu_daemonsets(daemonsets)
    assert [d["metadata"]["name"] for d in chosen] == ["gpu-agent"]
    pods = [
        pod("gpu-agent-x", [container(gpus=1)], owner=("DaemonSet", "gpu-agent")),
        pod("log-agent-x", owner=("DaemonSet", "log-agent")),
        pod("driver-x", labels={"app": "nvidia-driver-daemonset"}, owner=("DaemonSet", "nvidia-driver-daemonset")),
    ]
    assert reasons(upgrade_blockers(NODE, pods, [], [], chosen, None)) == [("gpu-agent-x", GPU_DAEMONSET_POD)]


def test_dra_claim_holders_block():
    claims = [
        {
            "metadata": {"name": "train-gpu", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "device": "gpu-0"}]}}},
        },
        {"metadata": {"name": "pending", "namespace": "ml"}, "status": {}},
    ]
    pods = [
        pod("train", resourceClaims=[{"name": "gpu", "resourceClaimName": "train-gpu"}]),
        pod("waiting", resourceClaims=[{"name": "gpu", "resourceClaimName": "pending"}]),
    ]
    found = upgrade_blockers(NODE, pods, [], claims, [], None)
    assert reasons(found) == [("train", DRA_CLAIM_HOLDER)]
    assert "gpu.nvidia.com" in found[0].detail


def test_budgets_that_allow_no_disruption_block():
    budgets = [
        budget("strict", {"matchLabels": {"app": "db"}}, max_unavailable=0),
        budget("judged", {"matchLabels": {"app": "web"}}, max_unavailable=1, allowed=0),
        budget("loose", {"matchLabels": {"app": "batch"}}, max_unavailable=1, allowed=1),
        budget("other-namespace", {}, max_unavailable=0, namespace="other"),
    ]
    pods = [
        pod("db-0", labels={"app": "db"}),
        pod("web-0", labels={"app": "web"}),
        pod("batch-0", labels={"app": "batch"}),
        pod("db-agent", labels={"app": "db"}, owner=("DaemonSet", "agent")),
    ]
    found = upgrade_blockers(NODE, pods, budgets, [], [], None)
    assert reasons(found) == [("db-0", BUDGET_ALLOWS_NO_DISRUPTION), ("web-0", BUDGET_ALLOWS_NO_DISRUPTION)]
    assert allows_no_disruption(budget("every", {}, max_unavailable="0%"))
    assert not allows_no_disruption(budget("judged-ok", {}, max_unavailable=0, allowed=1))


def test_empty_and_null_budget_selectors():
    everyone = budget("all", {}, max_unavailable=0)
    nobody = {"metadata": {"name": "none", "namespace": "ml"}, "spec": {"maxUnavailable": 0}}
    assert reasons(upgrade_blockers(NODE, [pod("a")], [everyone], [], [], None)) == [("a", BUDGET_ALLOWS_NO_DISRUPTION)]
    assert upgrade_blockers(NODE, [pod("a")], [nobody], [], [], None) == ()


def test_cuda_needs_a_newer_driver_than_the_target():
    pods = [
        pod("new-cuda", [container("nvidia/cuda:12.9.0-runtime-ubuntu24.04", gpus=1)]),
        pod("old-cuda", [container("nvcr.io/nvidia/cuda:12.2.0-runtime-ubuntu22.04", gpus=1)]),
        pod("torch", [container("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", gpus=1)]),
        pod("unknown", [container("registry.local/trainer:v3", gpus=1)]),
    ]
    found = upgrade_blockers(NODE, pods, [], [], [], "570.86.15")
    assert reasons(found) == [("new-cuda", CUDA_NEEDS_NEWER_DRIVER)]
    assert "575.51.03" in found[0].detail and "12.9" in found[0].detail
    assert upgrade_blockers(NODE, pods, [], [], [], None) == ()
    assert upgrade_blockers(NODE, pods, [], [], [], "580.65.06") == ()


def test_require_cuda_env_wins_and_its_forward_compatible_ranges_count():
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=470,driver<471"}
    p = pod("app", [container("registry.local/app:1", env=env, gpus=1)])
    assert upgrade_blockers(NODE, [p], [], [], [], "535.183.06") == ()  # inside a compatibility range
    found = upgrade_blockers(NODE, [p], [], [], [], "545.23.08")
    assert reasons(found) == [("app", CUDA_NEEDS_NEWER_DRIVER)] and "550.54.14" in found[0].detail
    disabled = pod("app", [container("nvidia/cuda:12.9.0-base", env={"NVIDIA_DISABLE_REQUIRE": "true"}, gpus=1)])
    assert upgrade_blockers(NODE, [disabled], [], [], [], "535.183.06") == ()


@pytest.mark.parametrize(
    "value, cuda, ranges",
    [
        ("cuda>=12.4 brand=tesla,driver>=470,driver<471", (12, 4), ((470, 471),)),
        ("cuda>=11.8", (11, 8), ()),
        ("brand=tesla", None, ()),
    ],
)
def test_parse_require_cuda(value, cuda, ranges):
    assert parse_require_cuda(value) == (cuda, ranges)


@pytest.mark.parametrize(
    "image, cuda",
    [
        ("nvcr.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", (12, 4)),
        ("nvidia/cuda:12.2.0-runtime-ubuntu22.04", (12, 2)),
        ("docker.io/nvidia/cuda:11.8.0-base-ubuntu20.04", (11, 8)),
        ("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", (12, 1)),
        ("rayproject/ray:2.9.0-py310-cu121", (12, 1)),
        ("nvcr.io/nvidia/pytorch:24.05-py3", None),
        ("busybox:1.36", None),
    ],
)
def test_image_cuda(image, cuda):
    found = image_cuda(image)
    assert (found[0] if found else None) == cuda


def test_minimum_driver_table():
    assert minimum_driver((12, 4)) == "550.54.14"
    assert minimum_driver((12, 7)) == MINIMUM_DRIVER[(12, 8)]  # no 12.7 release: the next one
    assert minimum_driver((99, 0)) is None
    assert container_cuda_need(container("busybox")) is None


def test_budgets_and_claims_prepared_once_give_the_same_blockers():
    from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_preflight import prepare

    budgets = [budget("strict", {"matchLabels": {"app": "db"}}, max_unavailable=0)]
    claims = [
        {
            "metadata": {"name": "c", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com"}]}}},
        }
    ]
    pods = [pod("db-0", labels={"app": "db"}), pod("train", resourceClaims=[{"name": "g", "resourceClaimName": "c"}])]
    plain = upgrade_blockers(NODE, pods, budgets, claims, [], None)
    assert reasons(plain) == [("db-0", BUDGET_ALLOWS_NO_DISRUPTION), ("train", DRA_CLAIM_HOLDER)]
    assert upgrade_blockers(NODE, pods, prepare(budgets, claims), (), [], None) == plain
