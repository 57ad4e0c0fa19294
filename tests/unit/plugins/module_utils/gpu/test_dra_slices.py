"""The DRA vocabulary and projections, against objects in the shape NVIDIA's DRA driver publishes
(tests/unit/fixtures/dra: each file names its source)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    MODEL_SOURCE,
    admin_access_requests,
    cel_terms,
    claims_by_device,
    class_selects,
    current_pools,
    devices_by_node,
    is_gpu_class,
    model_from_devices,
    project_claim,
    project_device_class,
    project_slice,
    request_classes,
    unavailable_note,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"


def documents(name: str, kind: str) -> list[dict]:
    return [d for d in yaml.safe_load((FIXTURES / name).read_text())["items"] if d["kind"] == kind]


def slices(name: str) -> list[dict]:
    return [s for s in map(project_slice, documents(name, "ResourceSlice")) if s]


def classes() -> dict[str, dict]:
    projected = (project_device_class(c) for c in documents("deviceclasses-nvidia-helm.yaml", "DeviceClass"))
    return {c["name"]: c for c in projected if c}


# --- slices -------------------------------------------------------------------------------------


def test_a_full_gpu_slice_gives_its_devices_with_model_uuid_and_memory():
    full, mig = slices("resourceslice-full-gpu.example.yaml")
    assert (full["driver"], full["node"], full["pool"], full["generation"], full["slice_count"]) == (
        "gpu.nvidia.com",
        "gpu-node-1",
        "gpu-node-1",
        1,
        1,
    )
    gpu0 = full["devices"][0]
    assert (gpu0["name"], gpu0["type"], gpu0["product"], gpu0["memory"]) == (
        "gpu-0",
        "gpu",
        "NVIDIA H100 80GB HBM3",
        "80Gi",
    )
    assert gpu0["uuid"] == "GPU-4d5c8a0e-0000-0000-0000-000000000000"
    assert gpu0["attributes"]["resource.kubernetes.io/pciBusID"] == "0000:18:00.0"
    assert gpu0["attributes"]["cudaComputeCapability"] == "9.0.0"
    [static_mig] = mig["devices"]
    assert (static_mig["type"], static_mig["profile"], static_mig["parent_uuid"]) == (
        "mig",
        "1g.10gb",
        "GPU-a4f34abc-0000-0000-0000-000000000000",
    )
    assert static_mig["counter_sets"] == []


def test_partitionable_devices_name_the_counter_set_they_consume():
    counters, devices = slices("resourceslice-dynamic-mig.example.yaml")
    assert counters["devices"] == [] and counters["slice_count"] == 2
    assert {d["name"]: d["counter_sets"] for d in devices["devices"]} == {
        "gpu-0": ["gpu-0-counter-set"],
        "gpu-0-mig-1g5gb-19-0": ["gpu-0-counter-set"],
        "gpu-0-mig-7g40gb-0-0": ["gpu-0-counter-set"],
    }
    # An abstract MIG device has no UUID until it is prepared.
    assert devices["devices"][1]["uuid"] is None


def test_other_drivers_and_malformed_slices_are_left_out():
    other = {"spec": {"driver": "dra.net", "nodeName": "n", "pool": {"name": "n"}, "devices": [{"name": "eth0"}]}}
    assert project_slice(other) is None
    assert project_slice({"spec": {"driver": "gpu.nvidia.com", "pool": {}}}) is None
    assert project_slice("garbage") is None
    odd = {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "p"}, "devices": [{"name": 3}, "x", {"name": "d"}]}}
    assert [d["name"] for d in project_slice(odd)["devices"]] == ["d"]


def test_attributes_written_with_the_driver_domain_read_the_same():
    item = {
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {"gpu.nvidia.com/type": {"string": "gpu"}, "index": {"int": 0}}}
            ],
        }
    }
    [device] = project_slice(item)["devices"]
    assert device["type"] == "gpu" and device["attributes"]["index"] == "0"


def slice_of(node, generation, count=1, devices=("gpu-0",), pool=None):
    return project_slice(
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": node,
                "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
                "devices": [{"name": d, "attributes": {"type": {"string": "gpu"}}} for d in devices],
            }
        }
    )


def test_only_the_newest_generation_of_a_pool_counts():
    pools = current_pools([slice_of("a", 1, devices=("gpu-0", "gpu-1")), slice_of("a", 2, devices=("gpu-0",))])
    assert [d["name"] for d in devices_by_node(pools.slices)["a"]] == ["gpu-0"]
    assert pools.incomplete == []


def test_a_pool_with_fewer_slices_than_it_announces_is_a_note():
    pools = current_pools([slice_of("a", 3, count=2), slice_of("b", 1)])
    [note] = pools.incomplete
    assert note.startswith("pool a of driver gpu.nvidia.com: 1 of 2 ResourceSlices of generation 3 published")


# --- models ----------------------------------------------------------------------------------------


def test_model_of_full_gpus_is_spelled_as_gpu_feature_discovery_spells_it():
    [full, mig] = slices("resourceslice-full-gpu.example.yaml")
    detected = model_from_devices(full["devices"])
    assert (detected.model, detected.source, detected.label_value, detected.mig_profile) == (
        "NVIDIA-H100-80GB-HBM3",
        MODEL_SOURCE,
        "NVIDIA-H100-80GB-HBM3",
        None,
    )
    detected = model_from_devices(mig["devices"])
    assert (detected.model, detected.label_value, detected.mig_profile) == (
        "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        "1g.10gb",
    )


def test_mixed_devices_name_the_most_common_model_and_no_profile():
    _counters, devices = slices("resourceslice-dynamic-mig.example.yaml")
    # The whole GPU and two placements of different profiles: one each, the shortest name first.
    detected = model_from_devices(devices["devices"])
    assert (detected.model, detected.mig_profile) == ("NVIDIA-A100-SXM4-40GB", None)
    mig_only = [d for d in devices["devices"] if d["type"] == "mig"]
    assert model_from_devices(mig_only + mig_only[:1]).model == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert model_from_devices(mig_only).mig_profile is None
    assert model_from_devices([]).model is None


# --- claims ----------------------------------------------------------------------------------------


def test_claims_give_their_devices_node_and_consumers():
    template_claim, extended = map(project_claim, documents("resourceclaim-allocated.example.yaml", "ResourceClaim"))
    assert template_claim["results"] == [
        {"driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-0", "admin": False}
    ]
    assert (template_claim["node"], template_claim["reserved_for"], template_claim["extended_resource"]) == (
        "gpu-node-1",
        ["pod1"],
        False,
    )
    assert template_claim["classes"] == ["gpu.nvidia.com"]
    assert extended["extended_resource"] is True
    assert [r["device"] for r in extended["results"]] == ["gpu-0", "gpu-1"]
    assert extended["reserved_for"] == ["trainer-0"]


def test_admin_access_results_do_not_hold_a_device():
    claim = project_claim(
        {
            "metadata": {"name": "monitor", "namespace": "gpu-operator"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0", "adminAccess": True},
                            {"driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-1"},
                        ]
                    }
                }
            },
        }
    )
    assert list(claims_by_device([claim])) == [("gpu.nvidia.com", "n", "gpu-1")]


def test_requests_name_their_classes_and_admin_access_in_every_api_shape():
    spec = {
        "devices": {
            "requests": [
                {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "adminAccess": True}},
                {"name": "b", "firstAvailable": [{"name": "big", "deviceClassName": "mig.nvidia.com"}]},
                {"name": "c", "deviceClassName": "vfio.gpu.nvidia.com", "adminAccess": True},
            ]
        }
    }
    assert request_classes(spec) == ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    assert admin_access_requests(spec, "spec") == [
        ("a", "spec.devices.requests[0].exactly.adminAccess"),
        ("c", "spec.devices.requests[2].adminAccess"),
    ]
    assert project_claim({"metadata": {}}) is None


# --- device classes ---------------------------------------------------------------------------------


def test_the_chart_classes_select_their_device_types():
    chart = classes()
    assert chart["gpu.nvidia.com"]["extended_resource"] == "nvidia.com/gpu"
    assert chart["mig.nvidia.com"]["extended_resource"] is None
    [full, mig] = slices("resourceslice-full-gpu.example.yaml")
    gpu, mig_device = full["devices"][0], mig["devices"][0]
    assert class_selects(chart["gpu.nvidia.com"], gpu) and not class_selects(chart["gpu.nvidia.com"], mig_device)
    assert class_selects(chart["mig.nvidia.com"], mig_device) and not class_selects(chart["mig.nvidia.com"], gpu)
    assert not class_selects(chart["vfio.gpu.nvidia.com"], gpu)
    # The per-profile class of the driver's demo: the profile decides.
    assert not class_selects(chart["mig-1g-12gb.gpu.nvidia.com"], mig_device)
    assert all(is_gpu_class(c) for c in chart.values())


def test_kwok_folded_expression_reads_the_same():
    [kwok_class] = documents("kwok-nvidia-gpu-simulation.yaml", "DeviceClass")
    terms = cel_terms(project_device_class(kwok_class)["selectors"][0])
    assert (terms.driver, terms.attributes, terms.exact) == (
        "gpu.nvidia.com",
        {("gpu.nvidia.com", "type"): "gpu"},
        True,
    )


@pytest.mark.parametrize(
    "expression, selects",
    [
        # Read inexactly: taken to select every device of the driver it names.
        (
            "device.driver == 'gpu.nvidia.com' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
            True,
        ),
        # No driver named as a term of its own: nothing can be said, so nothing is selected.
        ("device.driver == 'gpu.nvidia.com' || device.driver == 'other'", False),
        ("device.attributes['gpu.nvidia.com'].type == 'gpu'", False),
        ("device.driver == 'dra.net'", False),
    ],
)
def test_expressions_beyond_the_driver_terms(expression, selects):
    [full, _mig] = slices("resourceslice-full-gpu.example.yaml")
    device_class = {"name": "custom", "extended_resource": None, "selectors": [expression]}
    assert class_selects(device_class, full["devices"][0]) is selects


def test_a_class_of_another_driver_is_no_gpu_class():
    assert not is_gpu_class({"name": "nic", "extended_resource": None, "selectors": ["device.driver == 'dra.net'"]})


# --- what cannot be read ----------------------------------------------------------------------------


def test_notes_say_why_dra_objects_cannot_be_read():
    assert "does not serve resource.k8s.io/v1 (deviceclasses: 404)" in unavailable_note(404, "deviceclasses")
    assert 'not allowed to list "resourceslices" (apiGroup "resource.k8s.io")' in unavailable_note(
        403, "resourceslices"
    )
    assert unavailable_note(500, "resourceclaims") is None
