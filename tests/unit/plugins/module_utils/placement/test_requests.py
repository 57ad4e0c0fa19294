"""What a pod asks of a node, as NodeResourcesFit adds it up (kubernetes pkg/api/v1/resource PodRequests)."""

from __future__ import annotations

from fleets import IS_GPU

from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.requests import amount, pod_requests


def container(name, cpu=None, memory=None, gpus=None, **extra):
    resources = {"requests": {}, "limits": {}}
    if cpu:
        resources["requests"]["cpu"] = cpu
    if memory:
        resources["requests"]["memory"] = memory
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "resources": resources, **extra}


def test_containers_add_up_and_an_extended_resource_limit_is_its_request():
    spec = {"containers": [container("a", "500m", "1Gi", 2), container("b", "1", "512Mi", 1)]}
    assert pod_requests(spec, IS_GPU) == {"cpu": 1500, "memory": 1536 * 1024**2, "nvidia.com/gpu": 3}


def test_an_init_container_counts_only_where_it_is_the_peak():
    spec = {"containers": [container("main", "1", gpus=1)], "initContainers": [container("init", "4", gpus=2)]}
    assert pod_requests(spec, IS_GPU) == {"cpu": 4000, "nvidia.com/gpu": 2}


def test_sidecars_run_beside_the_containers_and_the_init_containers_after_them():
    sidecar = container("proxy", "1", restartPolicy="Always")
    spec = {
        "containers": [container("main", "2")],
        "initContainers": [sidecar, container("late-init", "2")],
    }
    # containers + sidecars = 3; the init container after the sidecar: 2 + 1 = 3.
    assert pod_requests(spec, IS_GPU) == {"cpu": 3000}
    spec["initContainers"][1] = container("late-init", "5")
    assert pod_requests(spec, IS_GPU) == {"cpu": 6000}


def test_overhead_adds_and_pod_level_resources_replace_the_sum():
    spec = {
        "containers": [container("main", "1", "1Gi")],
        "overhead": {"cpu": "250m"},
        "resources": {"requests": {"memory": "4Gi"}},
    }
    assert pod_requests(spec, IS_GPU) == {"cpu": 1250, "memory": 4 * 1024**3}


def test_quantities_round_up_as_the_scheduler_counts_them():
    assert amount("cpu", "0.0001") == 1
    assert amount("cpu", 2) == 2000
    assert amount("memory", "1k") == 1000
    assert amount("memory", "bogus") == 0
