"""Where a node's driver stands, from the node, the driver pods and DaemonSets and the NVIDIADrivers."""

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.driver_upgrade import (
    INITIAL_UNSCHEDULABLE_ANNOTATION,
    MANAGED_BY_CLUSTER_POLICY,
    MANAGED_BY_HOST,
    MANAGED_BY_NVIDIA_DRIVER,
    UPGRADE_DONE,
    UPGRADE_FAILED,
    UPGRADE_SKIP_LABEL,
    UPGRADE_STATE_LABEL,
    UPGRADE_STATES,
    VALIDATION_START_ANNOTATION,
    WAIT_FOR_PODS_START_ANNOTATION,
    driver_view,
    gfd_driver_version,
    image_driver_version,
    parse_timestamp,
    selecting_driver,
    trimmed_node,
)

NOW = 1_800_000_000.0


def node(name="gpu-1", labels=None, annotations=None):
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}}


def daemonset(name="nvidia-driver-daemonset", generation="2", owner_kind="ClusterPolicy", owner_name="cluster-policy"):
    return {
        "metadata": {
            "name": name,
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-driver-daemonset"},
            "annotations": {"deprecated.daemonset.template.generation": generation},
            "ownerReferences": [{"kind": owner_kind, "name": owner_name, "controller": True}],
        }
    }


def driver_pod(
    node_name="gpu-1", generation="2", ds="nvidia-driver-daemonset", image="nvcr.io/nvidia/driver:550.90.07-ubuntu22.04"
):
    return {
        "metadata": {
            "name": f"{ds}-{node_name}",
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-driver-daemonset", "pod-template-generation": generation},
            "ownerReferences": [{"kind": "DaemonSet", "name": ds, "controller": True}],
        },
        "spec": {"nodeName": node_name, "containers": [{"name": "nvidia-driver-ctr", "image": image}]},
    }


def nvidia_driver(name, selector=None, default=False, version="570.86.15"):
    spec = {"driverType": "gpu", "image": "nvcr.io/nvidia/driver", "default": default, "version": version}
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": name}, "spec": spec}


def test_names_are_the_upgrade_controllers():
    assert UPGRADE_STATE_LABEL == "nvidia.com/gpu-driver-upgrade-state"
    assert UPGRADE_SKIP_LABEL == "nvidia.com/gpu-driver-upgrade.skip"
    assert INITIAL_UNSCHEDULABLE_ANNOTATION == "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
    assert UPGRADE_STATES[0] == "upgrade-required"
    assert UPGRADE_STATES[-2:] == (UPGRADE_DONE, UPGRADE_FAILED)
    assert len(UPGRADE_STATES) == len(set(UPGRADE_STATES)) == 12


def test_cluster_policy_driver_on_current_template():
    view = driver_view(node(), [driver_pod()], [daemonset()], [], NOW)
    assert view.managed_by == MANAGED_BY_CLUSTER_POLICY
    assert view.driver_resource is None
    assert view.version == "550.90.07"
    assert view.pod_revision_current is True
    assert view.pod == "gpu-operator/nvidia-driver-daemonset-gpu-1"
    assert view.daemonset == "gpu-operator/nvidia-driver-daemonset"


def test_pod_on_an_older_template_is_not_current():
    view = driver_view(node(), [driver_pod(generation="1")], [daemonset(generation="2")], [], NOW)
    assert view.pod_revision_current is False


def test_missing_marks_say_nothing_about_the_revision():
    ds = daemonset()
    ds["metadata"]["annotations"] = {}
    assert driver_view(node(), [driver_pod()], [ds], [], NOW).pod_revision_current is None
    assert driver_view(node(), [driver_pod()], [], [], NOW).pod_revision_current is None


def test_nvidia_driver_resource_owns_the_daemonset():
    ds = daemonset("nvidia-gpu-driver-ubuntu22.04-7c6d", owner_kind="NVIDIADriver", owner_name="a100-pool")
    pod = driver_pod(ds="nvidia-gpu-driver-ubuntu22.04-7c6d")
    view = driver_view(node(), [pod], [ds], [nvidia_driver("a100-pool", {"pool": "a100"})], NOW)
    assert view.managed_by == MANAGED_BY_NVIDIA_DRIVER
    assert view.driver_resource == "a100-pool"


def test_nvidia_driver_selecting_a_node_without_a_pod_yet():
    drivers = [nvidia_driver("fallback", default=True), nvidia_driver("h100", {"pool": "h100"}, version="580.65.06")]
    view = driver_view(node(labels={"pool": "h100"}), [], [], drivers, NOW)
    assert (view.managed_by, view.driver_resource, view.version) == (MANAGED_BY_NVIDIA_DRIVER, "h100", "580.65.06")
    assert selecting_driver(drivers, {"pool": "other"}) == "fallback"
    assert selecting_driver([nvidia_driver("h100", {"pool": "h100"})], {}) is None


def test_host_driver_and_gfd_version():
    labels = {"nvidia.com/cuda.driver-version.full": "535.183.06"}
    view = driver_view(node(labels=labels), [driver_pod(node_name="other")], [daemonset()], [], NOW)
    assert (view.managed_by, view.version, view.pod) == (MANAGED_BY_HOST, "535.183.06", None)
    assert view.pod_revision_current is None


def test_gfd_label_wins_over_the_image_tag():
    labels = {"nvidia.com/cuda.driver-version.full": "550.54.15"}
    assert driver_view(node(labels=labels), [driver_pod()], [daemonset()], [], NOW).version == "550.54.15"


@pytest.mark.parametrize(
    "labels, version",
    [
        (
            {
                "nvidia.com/cuda.driver-version.major": "570",
                "nvidia.com/cuda.driver-version.minor": "86",
                "nvidia.com/cuda.driver-version.revision": "15",
            },
            "570.86.15",
        ),
        (
            {
                "nvidia.com/cuda.driver.major": "525",
                "nvidia.com/cuda.driver.minor": "60",
                "nvidia.com/cuda.driver.rev": "13",
            },
            "525.60.13",
        ),
        ({}, None),
    ],
)
def test_gfd_versions(labels, version):
    assert gfd_driver_version(labels) == version


@pytest.mark.parametrize(
    "image, version",
    [
        ("nvcr.io/nvidia/driver:550.90.07-ubuntu22.04", "550.90.07"),
        ("nvcr.io/nvidia/driver:570.86.15-rhcos4.16", "570.86.15"),
        ("nvcr.io/nvidia/driver:535-5.15.0-1048-nvidia-ubuntu22.04", None),
        ("registry.local:5000/driver:latest", None),
    ],
)
def test_image_versions(image, version):
    assert image_driver_version(image) == version


def test_state_and_since_from_the_start_annotations():
    started = str(int(NOW - 7200))
    stuck = node(
        labels={UPGRADE_STATE_LABEL: "validation-required"}, annotations={VALIDATION_START_ANNOTATION: started}
    )
    view = driver_view(stuck, [], [], [], NOW)
    assert (view.upgrade_state, view.state_since) == ("validation-required", 7200.0)
    waiting = node(
        labels={UPGRADE_STATE_LABEL: "wait-for-jobs-required"}, annotations={WAIT_FOR_PODS_START_ANNOTATION: started}
    )
    assert driver_view(waiting, [], [], [], NOW).state_since == 7200.0
    failed = driver_view(node(labels={UPGRADE_STATE_LABEL: UPGRADE_FAILED}), [], [], [], NOW)
    assert (failed.upgrade_state, failed.state_since) == (UPGRADE_FAILED, None)
    assert driver_view(node(), [], [], [], NOW).upgrade_state is None


def test_timestamps():
    assert parse_timestamp("1700000000") == 1_700_000_000.0
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000.0
    assert parse_timestamp("soon") is None


def test_trimmed_node_keeps_what_the_view_reads():
    full = node(
        labels={UPGRADE_STATE_LABEL: "upgrade-done", "pool": "a", "kubernetes.io/hostname": "gpu-1"},
        annotations={VALIDATION_START_ANNOTATION: "1", "other": "x"},
    )
    trimmed = trimmed_node(full, {"pool"})
    assert trimmed["metadata"]["labels"] == {UPGRADE_STATE_LABEL: "upgrade-done", "pool": "a"}
    assert trimmed["metadata"]["annotations"] == {VALIDATION_START_ANNOTATION: "1"}
    assert driver_view(trimmed, [], [], [], NOW) == driver_view(full, [], [], [], NOW)


def test_without_the_daemonsets_the_pod_label_says_who_manages_it():
    assert driver_view(node(), [driver_pod()], [], [], NOW).managed_by == MANAGED_BY_CLUSTER_POLICY
    cr_pod = driver_pod(ds="nvidia-gpu-driver-ubuntu22.04-7c6d")
    cr_pod["metadata"]["labels"] = {
        "app": "nvidia-gpu-driver-ubuntu22.04-7c6d",
        "app.kubernetes.io/component": "nvidia-driver",
    }
    assert driver_view(node(), [cr_pod], [], [], NOW).managed_by == MANAGED_BY_NVIDIA_DRIVER
