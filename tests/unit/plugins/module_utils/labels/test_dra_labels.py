"""gpu_node_label on nodes whose GPUs come through DRA: the model from their ResourceSlices.

Slices are in the shape NVIDIA's DRA driver publishes (tests/unit/fixtures/dra, with sources).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    CompactNode,
    Outcome,
    build_options,
    plan_node,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.reads import read_dra_models, with_dra_model

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"
IS_GPU = gpu_resource_matcher()


class SliceClient:
    def __init__(self, items=(), status=None):
        self.items, self.status, self.paths = list(items), status, []

    def list_items(self, path, **_query):
        self.paths.append(path)
        if self.status:
            raise ClusterError(f"GET {path}: {self.status}", self.status)
        return iter(self.items)


def fixture_slices(name):
    return [d for d in yaml.safe_load((FIXTURES / name).read_text())["items"] if d["kind"] == "ResourceSlice"]


def test_models_come_from_the_slices_in_gpu_feature_discovery_spelling():
    client = SliceClient(fixture_slices("resourceslice-full-gpu.example.yaml"))
    models, warning = read_dra_models(client)
    assert warning is None
    assert client.paths == ["/apis/resource.k8s.io/v1/resourceslices"]
    assert models == {"gpu-node-1": "NVIDIA-H100-80GB-HBM3", "gpu-node-2": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}


def test_a_dra_node_without_model_labels_is_labeled_with_its_model():
    models, _warning = read_dra_models(SliceClient(fixture_slices("resourceslice-full-gpu.example.yaml")))
    node = with_dra_model(CompactNode("gpu-node-1", {"kubernetes.io/os": "linux"}), models)
    plan = plan_node(node, build_options(), IS_GPU)
    assert (plan.outcome, plan.after) == (Outcome.LABEL, "NVIDIA-H100-80GB-HBM3")
    assert {"op": "add", "path": "/metadata/labels/accelerator", "value": "NVIDIA-H100-80GB-HBM3"} in plan.patch
    mig = plan_node(with_dra_model(CompactNode("gpu-node-2", {}), models), build_options(), IS_GPU)
    assert mig.after == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"


def test_a_model_label_wins_over_the_slices():
    node = CompactNode("n", {"nvidia.com/gpu.product": "Tesla-T4"}, dra_model="NVIDIA-H100-80GB-HBM3")
    assert plan_node(node, build_options(), IS_GPU).after == "Tesla-T4"


def test_value_overrides_apply_to_the_dra_model():
    node = CompactNode("n", {}, dra_model="NVIDIA-H100-80GB-HBM3")
    options = build_options(value_overrides={"NVIDIA-H100-80GB-HBM3": "h100"})
    assert plan_node(node, options, IS_GPU).after == "h100"


def test_a_node_that_left_dra_keeps_nothing_it_does_not_own():
    node = CompactNode("n", {"accelerator": "NVIDIA-H100-80GB-HBM3"})
    options = build_options(remove_from_non_gpu=True)
    assert plan_node(node, options, IS_GPU).outcome is Outcome.CONFLICT


@pytest.mark.parametrize("status, words", [(404, "does not serve resource.k8s.io/v1"), (403, "not allowed to list")])
def test_slices_that_cannot_be_read_give_a_warning_and_no_models(status, words):
    models, warning = read_dra_models(SliceClient(status=status))
    assert models == {}
    assert words in warning and "labeled from their labels alone" in warning


def test_another_failure_stops_the_run():
    with pytest.raises(ClusterError) as info:
        read_dra_models(SliceClient(status=500))
    assert info.value.message.startswith("cannot list ResourceSlices")


def test_a_reread_node_keeps_its_dra_model():
    assert with_dra_model(None, {"n": "x"}) is None
    assert with_dra_model(CompactNode("n", {}), {"n": "x"}).dra_model == "x"
