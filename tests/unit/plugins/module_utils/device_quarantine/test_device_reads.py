"""What device quarantine reads: DeviceTaintRules by name, and a clear refusal where they are not served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.reads import read_rules
from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.run import run_device_quarantine
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import quarantine as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import CheckFailed, ClusterError

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"


class Lists:
    """A client whose lists yield `items`, or fail with `status` once iterated, as KubeClient's pages do."""

    def __init__(self, items: list[dict] | None = None, status: int | None = None):
        self.items = items or []
        self.status = status
        self.paths: list[str] = []

    def list_items(self, path: str, page_size: int = 500) -> Iterator[dict]:
        self.paths.append(path)
        if self.status is not None:
            raise ClusterError(f"the server said {self.status}", self.status)
        yield from self.items


def test_rules_are_read_by_name_and_nameless_ones_left_out():
    client = Lists([{"metadata": {"name": "a"}, "spec": {}}, {"metadata": {}}])
    assert read_rules(client) == {"a": {"metadata": {"name": "a"}, "spec": {}}}
    assert client.paths == ["/apis/resource.k8s.io/v1/devicetaintrules"]


def test_a_cluster_without_device_taint_rules_is_refused_naming_the_api_and_the_alternative():
    with pytest.raises(ClusterError) as raised:
        read_rules(Lists(status=404))
    assert raised.value.status == 404
    assert raised.value.message.startswith("this cluster does not serve devicetaintrules in resource.k8s.io/v1")
    assert "nothing was written" in raised.value.message and "gpu_node_quarantine" in raised.value.message


def test_other_failures_keep_their_step():
    with pytest.raises(ClusterError) as raised:
        read_rules(Lists(status=403))
    assert raised.value.message == "cannot list DeviceTaintRules: the server said 403" and raised.value.status == 403


class Cluster:
    """A client whose lists answer by path: the ResourceSlices given, no DeviceTaintRules."""

    def __init__(self, slices: list[dict]):
        self.slices = slices
        self.paths: list[str] = []

    def list_items(self, path: str, page_size: int = 500) -> Iterator[dict]:
        self.paths.append(path)
        yield from self.slices if path.endswith("/resourceslices") else []


def test_a_device_no_resource_slice_publishes_refuses_the_run_before_any_write():
    published = yaml.safe_load((FIXTURES / "resourceslice-full-gpu.example.yaml").read_text())["items"]
    client = Cluster([d for d in published if d["kind"] == "ResourceSlice"])
    params = {
        "devices": [
            {"driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-1"},
            {"driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-7"},
        ],
        "state": "present",
        "quarantined_by": "oncall",
        "reason": "XID 79",
        "simulation_timeout": 30,
        "max_share": 0.5,
        "taint_key": "kubegpu.io/quarantine",
    }
    with pytest.raises(CheckFailed) as raised:
        run_device_quarantine(params, client, check_mode=False)
    assert raised.value.message.startswith("refused, nothing written: gpu.nvidia.com/gpu-node-1/gpu-7:")
    assert raised.value.result["changed"] is False and raised.value.result["devices"] == []
    (finding,) = raised.value.result["findings"]
    assert (finding["id"], finding["severity"]) == (kinds.DEVICE_NOT_PUBLISHED, "error")
    assert finding["where"] == {"subject": "gpu.nvidia.com/gpu-node-1/gpu-7"}
    assert finding["message"] == (
        "gpu.nvidia.com/gpu-node-1/gpu-7: no ResourceSlice publishes it, so a DeviceTaintRule on it would taint "
        "nothing now"
    )
    assert all("/resourceclaims" not in path for path in client.paths), "no users read for a refused run"
