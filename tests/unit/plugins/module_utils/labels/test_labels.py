"""Decisions of gpu_node_label: which nodes get which `accelerator` value, and what is left alone.

Value format under test: the label holds the source label's full value made a valid label value,
MIG (`-MIG-<profile>`) and sharing (`-SHARED`) suffixes included.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import is_valid_label_value
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.patches import MAX_CONFLICT_ATTEMPTS, json_pointer
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.apply import (
    ApplyStatus,
    NodeResult,
    apply_plans,
    failure_message,
    summarize,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.plan import (
    OWNERSHIP_ANNOTATION,
    CompactNode,
    NodePlan,
    Outcome,
    build_options,
    compact_node,
    label_key_problem,
    plan_node,
    plan_nodes,
    read_ownership,
    same_model,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.labels.reads import patch_node

IS_GPU = gpu_resource_matcher()
DEFAULTS = build_options()
ACK = "aliyun.accelerator/nvidia_name"
GFD = "nvidia.com/gpu.product"
GKE = "cloud.google.com/gke-accelerator"


def node_item(
    name: str = "n1",
    labels: dict[str, Any] | None = None,
    owned: dict[str, str] | None = None,
    gpus: int | None = None,
    resource_version: str = "100",
    annotations: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Node as the API server returns it."""
    metadata: dict[str, Any] = {"name": name, "resourceVersion": resource_version, "labels": dict(labels or {})}
    metadata["annotations"] = dict(annotations or {})
    if owned is not None:
        metadata["annotations"][OWNERSHIP_ANNOTATION] = json.dumps(owned)
    capacity = {"cpu": "8", "memory": "32Gi"}
    if gpus is not None:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {"metadata": metadata, "status": {"capacity": capacity}}


def compact(item: dict[str, Any]) -> CompactNode:
    node = compact_node(item, IS_GPU)
    assert node is not None
    return node


def plan_for(item: dict[str, Any], **options: Any) -> NodePlan:
    return plan_node(compact(item), build_options(**options) if options else DEFAULTS, IS_GPU)


class PatchRefused(Exception):
    """The API server's 422 for a JSON patch that does not apply."""


def server_json(item: dict[str, Any]) -> dict[str, Any]:
    """The node as the API server encodes it: Go leaves an empty labels or annotations map out."""
    encoded = copy.deepcopy(item)
    for key in ("labels", "annotations"):
        if not encoded["metadata"].get(key):
            encoded["metadata"].pop(key, None)
    return encoded


def json_patch(item: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 as kube-apiserver applies it, all or none. Observed on kube-apiserver v1.37.2 (a
    ConfigMap's metadata, the code path of every resource): a `test` of a missing member against
    null passes, a missing map fails every operation below it, `add` replaces a present member,
    `remove` of a missing member fails; a failed operation is a 422."""
    doc = server_json(item)
    for operation in operations:
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]]
        target = doc
        for part in parents:
            if not isinstance(target, dict) or part not in target:
                raise PatchRefused(f"{operation['path']}: missing {part}")
            target = target[part]
        if operation["op"] == "test":
            if target.get(last) != operation["value"]:
                raise PatchRefused(f"test of {operation['path']} failed")
        elif operation["op"] == "add":
            target[last] = copy.deepcopy(operation["value"])
        elif operation["op"] == "remove":
            if last not in target:
                raise PatchRefused(f"remove of {operation['path']}: missing")
            del target[last]
        else:
            raise AssertionError(f"unexpected operation {operation}")
    return server_json(doc)


def apply(item: dict[str, Any], plan: NodePlan) -> dict[str, Any]:
    """The node after the API server applies the plan's patch (with a new resourceVersion)."""
    assert plan.patch is not None
    patched = json_patch(item, plan.patch)
    patched["metadata"]["resourceVersion"] = str(int(item["metadata"]["resourceVersion"]) + 1)
    return patched


RECORD_PATH = "/metadata/annotations/kubegpu.io~1managed-labels"
# Every path a labeling patch may name, with the default label key.
PATCH_PATHS = {"/metadata/labels", "/metadata/labels/accelerator", "/metadata/annotations", RECORD_PATH}


def owned_record(plan: NodePlan) -> str | None:
    """The ownership record the plan's patch writes."""
    assert plan.patch is not None
    for operation in plan.patch:
        if operation["op"] == "add" and operation["path"] == RECORD_PATH:
            return str(operation["value"])
        if operation["op"] == "add" and operation["path"] == "/metadata/annotations":
            return str(operation["value"][OWNERSHIP_ANNOTATION])
    return None


def heartbeat(item: dict[str, Any]) -> None:
    """What a kubelet's (here KWOK's) status update does to a node: new conditions, a new resourceVersion."""
    item.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "now"}]
    item["metadata"]["resourceVersion"] = str(int(item["metadata"]["resourceVersion"]) + 1)


# ---------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["accelerator", "example.com/gpu-model", "a.b-c/x_y.z", "A1"])
def test_valid_label_keys(key: str) -> None:
    assert label_key_problem(key) is None


@pytest.mark.parametrize("key", ["", "a/b/c", "/x", "Example.com/x", "x-", "has space", "a" * 64, 5, None])
def test_invalid_label_keys(key: object) -> None:
    assert label_key_problem(key)


def test_bad_label_key_is_a_clear_error() -> None:
    with pytest.raises(OptionError, match=r"label_key 'bad key' is not a valid label key"):
        build_options(label_key="bad key")


def test_bad_model_label_key_is_named() -> None:
    with pytest.raises(OptionError, match=r"model_label_keys: 'no good'"):
        build_options(model_label_keys=[GFD, "no good"])


def test_the_label_key_is_never_a_source_of_the_model() -> None:
    assert "accelerator" not in DEFAULTS.source_keys
    assert DEFAULTS.source_keys[0] == GFD
    with pytest.raises(OptionError, match="other than label_key"):
        build_options(model_label_keys=["accelerator"])


@pytest.mark.parametrize("value", ["", "has space", "x" * 64, 3, None, "-lead"])
def test_override_values_must_be_label_values(value: object) -> None:
    with pytest.raises(OptionError, match=r"value_overrides\['Tesla-T4'\]"):
        build_options(value_overrides={"Tesla-T4": value})


def test_unknown_mixed_models_choice() -> None:
    with pytest.raises(OptionError, match="mixed_models must be one of skip, first"):
        build_options(mixed_models="last")


# ---------------------------------------------------------------------------------------
# Compact nodes and ownership records
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("item", [None, "node", [], {}, {"metadata": []}, {"metadata": {"name": ""}}, {"metadata": {}}])
def test_items_without_a_name_are_dropped(item: object) -> None:
    assert compact_node(item, IS_GPU) is None


def test_compact_node_keeps_only_what_labeling_needs() -> None:
    item = node_item(labels={ACK: "NVIDIA-A10", "odd": 5}, owned={"accelerator": "NVIDIA-A10"}, gpus=8)
    item["metadata"]["annotations"]["other"] = "x" * 1000
    item["status"]["capacity"]["nvidia.com/mig-1g.5gb"] = "bad"
    node = compact(item)
    assert node.labels == {ACK: "NVIDIA-A10"}
    assert node.ownership == json.dumps({"accelerator": "NVIDIA-A10"})
    assert node.has_annotations
    assert node.gpu_capacity == {"nvidia.com/gpu": 8, "nvidia.com/mig-1g.5gb": 0}


@pytest.mark.parametrize("annotation", [None, "", "accelerator", "[1]", '{"accelerator": 3}', "{not json"])
def test_malformed_ownership_records_give_no_ownership(annotation: str | None) -> None:
    assert read_ownership(annotation) == {}


# ---------------------------------------------------------------------------------------
# Labeling decisions
# ---------------------------------------------------------------------------------------


def test_an_unlabeled_gpu_node_gets_the_model_and_an_ownership_record_in_one_patch() -> None:
    plan = plan_for(node_item(labels={ACK: "Tesla-V100-SXM2-16GB"}, gpus=4))
    assert plan.outcome is Outcome.LABEL
    assert (plan.before, plan.after) == (None, "Tesla-V100-SXM2-16GB")
    # Guards first (the label absent, no annotations at all), then the label and its record.
    assert plan.patch == [
        {"op": "test", "path": "/metadata/labels/accelerator", "value": None},
        {"op": "test", "path": "/metadata/annotations", "value": None},
        {"op": "add", "path": "/metadata/labels/accelerator", "value": "Tesla-V100-SXM2-16GB"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {OWNERSHIP_ANNOTATION: '{"accelerator":"Tesla-V100-SXM2-16GB"}'},
        },
    ]


def test_labeling_is_idempotent() -> None:
    item = node_item(labels={GFD: "NVIDIA-H100-80GB-HBM3", "team": "ml"}, gpus=8)
    labeled = apply(item, plan_for(item))
    again = plan_for(labeled)
    assert again.outcome is Outcome.UNCHANGED
    assert again.patch is None
    assert labeled["metadata"]["labels"] == {GFD: "NVIDIA-H100-80GB-HBM3", "team": "ml", "accelerator": again.after}


def test_the_first_source_key_in_order_wins() -> None:
    item = node_item(labels={GKE: "nvidia-tesla-t4", GFD: "Tesla-T4"}, gpus=1)
    assert plan_for(item).after == "Tesla-T4"
    assert plan_for(item, model_label_keys=[GKE, GFD]).after == "nvidia-tesla-t4"


def test_values_that_name_no_model_are_passed_over() -> None:
    item = node_item(labels={GFD: "true", "k8s.amazonaws.com/accelerator": "nvidia-tesla-v100"}, gpus=1)
    assert plan_for(item).after == "nvidia-tesla-v100"


def test_an_owned_value_follows_the_model() -> None:
    item = node_item(labels={ACK: "NVIDIA-A10", "accelerator": "Tesla-T4"}, owned={"accelerator": "Tesla-T4"}, gpus=8)
    plan = plan_for(item)
    assert plan.outcome is Outcome.LABEL and not plan.forced
    assert (plan.before, plan.after) == ("Tesla-T4", "NVIDIA-A10")
    assert read_ownership(owned_record(plan)) == {"accelerator": "NVIDIA-A10"}
    assert {"op": "test", "path": "/metadata/labels/accelerator", "value": "Tesla-T4"} in plan.patch


def test_a_foreign_value_is_a_conflict_and_left_alone() -> None:
    item = node_item(labels={ACK: "Tesla-P100-PCIE-16GB", "accelerator": "nvidia-tesla-p100"}, gpus=1)
    plan = plan_for(item)
    assert plan.outcome is Outcome.CONFLICT
    assert plan.patch is None
    assert (plan.before, plan.after, plan.desired) == ("nvidia-tesla-p100", "nvidia-tesla-p100", "Tesla-P100-PCIE-16GB")
    assert "force: true" in plan.reason


def test_a_value_changed_by_someone_else_is_no_longer_owned() -> None:
    item = node_item(labels={ACK: "NVIDIA-A10", "accelerator": "mine"}, owned={"accelerator": "NVIDIA-A10"}, gpus=8)
    assert plan_for(item).outcome is Outcome.CONFLICT


def test_force_overwrites_and_takes_over_a_foreign_value() -> None:
    item = node_item(labels={ACK: "Tesla-P100-PCIE-16GB", "accelerator": "nvidia-tesla-p100"}, gpus=1)
    plan = plan_for(item, force=True)
    assert plan.outcome is Outcome.LABEL and plan.forced
    assert plan_for(apply(item, plan)).outcome is Outcome.UNCHANGED


def test_a_foreign_value_equal_to_the_model_is_left_as_it_is() -> None:
    item = node_item(labels={ACK: "NVIDIA-A10", "accelerator": "NVIDIA-A10"}, gpus=8)
    for options in ({}, {"force": True}):
        plan = plan_for(item, **options)
        assert plan.outcome is Outcome.UNCHANGED and plan.patch is None


def test_a_malformed_ownership_record_is_no_licence_to_overwrite() -> None:
    item = node_item(labels={ACK: "NVIDIA-A10", "accelerator": "x"}, gpus=8, annotations={OWNERSHIP_ANNOTATION: "x"})
    assert plan_for(item).outcome is Outcome.CONFLICT


def test_other_ownership_records_are_kept() -> None:
    item = node_item(labels={ACK: "NVIDIA-A10"}, owned={"example.com/pool": "a"}, gpus=8)
    plan = plan_for(item)
    assert read_ownership(owned_record(plan)) == {"example.com/pool": "a", "accelerator": "NVIDIA-A10"}


def test_value_overrides_match_the_raw_or_the_sanitized_model() -> None:
    item = node_item(labels={ACK: "Tesla-P100-PCIE-16GB"}, gpus=1)
    assert plan_for(item, value_overrides={"Tesla-P100-PCIE-16GB": "nvidia-tesla-p100"}).after == "nvidia-tesla-p100"
    odd = node_item(labels={GFD: "NVIDIA TITAN X (Pascal)"}, gpus=1)
    assert plan_for(odd, value_overrides={"NVIDIA-TITAN-X-Pascal": "titan-x"}).after == "titan-x"
    assert plan_for(odd, value_overrides={"NVIDIA TITAN X (Pascal)": "titan-xp"}).after == "titan-xp"


@pytest.mark.parametrize(
    "model, value",
    [
        ("NVIDIA TITAN X (Pascal)", "NVIDIA-TITAN-X-Pascal"),
        ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"),
        ("Tesla V100-SXM2-16GB", "Tesla-V100-SXM2-16GB"),
        ("NVIDIA GeForce RTX 4090 D/24G", "NVIDIA-GeForce-RTX-4090-D-24G"),
    ],
)
def test_odd_model_names_become_valid_label_values(model: str, value: str) -> None:
    assert plan_for(node_item(labels={GFD: model}, gpus=1)).after == value


def test_over_long_model_names_are_cut_to_a_valid_label_value() -> None:
    long_name = "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition-with-a-very-long-suffix-MIG-1g.24gb"
    value = plan_for(node_item(labels={GFD: long_name}, gpus=1)).after
    assert value is not None and is_valid_label_value(value) and len(value) <= 63


def test_a_model_name_with_nothing_usable_is_skipped() -> None:
    plan = plan_for(node_item(labels={GFD: "(((", "accelerator": "keep"}, gpus=1))
    assert plan.outcome is Outcome.SKIP and plan.patch is None
    assert "nothing usable" in plan.reason
    assert plan.models == (), "only nodes whose labels disagree carry their models"


@pytest.mark.parametrize(
    "product", ["A100-SXM4-40GB-MIG-1g.5gb", "Tesla-T4-SHARED", "A100-SXM4-40GB-MIG-3g.20gb-SHARED"]
)
def test_mig_and_sharing_suffixes_are_kept_in_the_value(product: str) -> None:
    assert plan_for(node_item(labels={GFD: product}, gpus=7)).after == product


def test_a_mig_product_and_the_base_model_are_not_mixed_models() -> None:
    item = node_item(labels={GFD: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", ACK: "NVIDIA-A100-SXM4-40GB"}, gpus=7)
    plan = plan_for(item)
    assert plan.outcome is Outcome.LABEL and plan.models == ()
    assert plan.after == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"


def test_a_gpu_node_without_a_model_label_is_skipped_and_keeps_its_label() -> None:
    plan = plan_for(node_item(labels={"accelerator": "old"}, owned={"accelerator": "old"}, gpus=2))
    assert plan.outcome is Outcome.SKIP and plan.patch is None
    assert "without a model label" in plan.reason


# ---------------------------------------------------------------------------------------
# Mixed models
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first, second",
    [
        ("NVIDIA-A100-SXM4-40GB", "nvidia-tesla-a100"),
        ("NVIDIA-A100-SXM4-80GB", "nvidia-a100-80gb"),
        ("Tesla-T4", "nvidia-tesla-t4"),
        ("Tesla-T4", "t4"),
        ("NVIDIA-H100-80GB-HBM3", "nvidia-h100-80gb"),
        ("NVIDIA-A10G", "a10g"),
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-SXM4-40GB"),
        ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA TITAN X (Pascal)"),
    ],
)
def test_one_model_named_by_different_providers(first: str, second: str) -> None:
    pair = (first, second)
    assert same_model(*pair) and same_model(*reversed(pair))


@pytest.mark.parametrize(
    "first, second",
    [
        ("NVIDIA-A100-SXM4-40GB", "nvidia-a100-80gb"),
        ("NVIDIA-A10", "NVIDIA-A10G"),
        ("Tesla-T4", "nvidia-l4"),
        ("Tesla-V100-SXM2-16GB", "Tesla-P100-PCIE-16GB"),
    ],
)
def test_different_models(first: str, second: str) -> None:
    assert not same_model(first, second)


def test_mixed_models_are_skipped_by_default_naming_the_models() -> None:
    item = node_item(labels={GFD: "NVIDIA-A100-SXM4-40GB", GKE: "nvidia-l4"}, gpus=2)
    plan = plan_for(item)
    assert plan.outcome is Outcome.SKIP and plan.patch is None
    assert dict(plan.models) == {GFD: "NVIDIA-A100-SXM4-40GB", GKE: "nvidia-l4"}
    assert "NVIDIA-A100-SXM4-40GB" in plan.reason and "nvidia-l4" in plan.reason


def test_mixed_models_first_uses_the_first_key_and_says_so() -> None:
    item = node_item(labels={GFD: "NVIDIA-A100-SXM4-40GB", GKE: "nvidia-l4"}, gpus=2)
    plan = plan_for(item, mixed_models="first")
    assert plan.outcome is Outcome.LABEL and plan.after == "NVIDIA-A100-SXM4-40GB"
    summary = summarize([NodeResult(plan)], "accelerator")
    assert summary["mixed_models"] == [
        {"node": "n1", "models": {GFD: "NVIDIA-A100-SXM4-40GB", GKE: "nvidia-l4"}, "value": "NVIDIA-A100-SXM4-40GB"}
    ]


# ---------------------------------------------------------------------------------------
# Nodes without GPUs
# ---------------------------------------------------------------------------------------


def test_nodes_without_gpus_are_left_alone_by_default() -> None:
    item = node_item(labels={"accelerator": "Tesla-T4"}, owned={"accelerator": "Tesla-T4"})
    plan = plan_for(item)
    assert plan.outcome is Outcome.UNCHANGED and plan.patch is None


def test_the_own_label_does_not_make_a_node_look_like_a_gpu_node() -> None:
    item = node_item(labels={"accelerator": "Tesla-T4"}, owned={"accelerator": "Tesla-T4"}, gpus=0)
    plan = plan_for(item, remove_from_non_gpu=True)
    assert plan.outcome is Outcome.UNLABEL
    record = json.dumps({"accelerator": "Tesla-T4"})
    assert plan.patch == [
        {"op": "test", "path": "/metadata/labels/accelerator", "value": "Tesla-T4"},
        {"op": "test", "path": "/metadata/annotations/kubegpu.io~1managed-labels", "value": record},
        {"op": "remove", "path": "/metadata/labels/accelerator"},
        {"op": "remove", "path": "/metadata/annotations/kubegpu.io~1managed-labels"},
    ]
    removed = apply(item, plan)
    assert "labels" not in removed["metadata"] and "annotations" not in removed["metadata"], "they were the only ones"
    assert plan_for(removed, remove_from_non_gpu=True).outcome is Outcome.UNCHANGED


def test_removal_keeps_other_ownership_records() -> None:
    item = node_item(labels={"accelerator": "T4"}, owned={"accelerator": "T4", "example.com/pool": "a"})
    plan = plan_for(item, remove_from_non_gpu=True)
    assert read_ownership(owned_record(plan)) == {"example.com/pool": "a"}


@pytest.mark.parametrize(
    ("keys", "pointer"),
    [
        (("metadata", "labels", "accelerator"), "/metadata/labels/accelerator"),
        (("a~b/c",), "/a~0b~1c"),
        (("~1",), "/~01"),
    ],
)
def test_json_pointers_escape_tilde_then_slash(keys: tuple[str, ...], pointer: str) -> None:
    assert json_pointer(*keys) == pointer


def test_a_label_key_with_a_prefix_is_escaped_in_the_patch() -> None:
    item = node_item(labels={ACK: "NVIDIA-A10", "example.com/gpu-model": "old"}, gpus=8)
    item["metadata"]["annotations"]["other"] = "kept"
    item["metadata"]["annotations"][OWNERSHIP_ANNOTATION] = json.dumps({"example.com/gpu-model": "old"})
    plan = plan_for(item, label_key="example.com/gpu-model")
    assert plan.patch is not None
    assert plan.patch[0] == {"op": "test", "path": "/metadata/labels/example.com~1gpu-model", "value": "old"}
    after = apply(item, plan)
    assert after["metadata"]["labels"]["example.com/gpu-model"] == "NVIDIA-A10"
    assert after["metadata"]["annotations"]["other"] == "kept"
    assert read_ownership(after["metadata"]["annotations"][OWNERSHIP_ANNOTATION]) == {
        "example.com/gpu-model": "NVIDIA-A10"
    }


def test_a_node_without_labels_or_annotations_gets_both_maps() -> None:
    # A node whose model comes from its DRA devices may carry no label and no annotation at all.
    item = {"metadata": {"name": "bare", "resourceVersion": "5"}, "status": {}}
    plan = plan_node(replace(compact(item), dra_model="NVIDIA-A10"), DEFAULTS, IS_GPU)
    assert plan.patch is not None
    assert plan.patch[:2] == [
        {"op": "test", "path": "/metadata/labels", "value": None},
        {"op": "test", "path": "/metadata/annotations", "value": None},
    ]
    after = apply(item, plan)
    assert after["metadata"]["labels"] == {"accelerator": "NVIDIA-A10"}
    assert read_ownership(after["metadata"]["annotations"][OWNERSHIP_ANNOTATION]) == {"accelerator": "NVIDIA-A10"}
    # A label written meanwhile (the map now exists) stops it.
    with pytest.raises(PatchRefused):
        json_patch({"metadata": {"name": "bare", "labels": {"accelerator": "theirs"}}}, plan.patch)


def test_a_foreign_label_on_a_node_without_gpus_is_never_removed() -> None:
    item = node_item(labels={"accelerator": "nvidia"})
    for options in ({"remove_from_non_gpu": True}, {"remove_from_non_gpu": True, "force": True}):
        plan = plan_for(item, **options)
        assert plan.outcome is Outcome.CONFLICT and plan.patch is None


def test_nodes_without_gpus_or_label_need_nothing() -> None:
    plan = plan_for(node_item(labels={"kubernetes.io/os": "linux"}), remove_from_non_gpu=True)
    assert plan.outcome is Outcome.UNCHANGED and plan.patch is None


# ---------------------------------------------------------------------------------------
# Properties over arbitrary nodes
# ---------------------------------------------------------------------------------------

_MODEL_VALUES = st.sampled_from(
    ["NVIDIA-A10", "Tesla-T4", "nvidia-l4", "NVIDIA TITAN X (Pascal)", "A100-SXM4-40GB-MIG-1g.5gb", "true", "nvidia"]
)
_LABELS = st.fixed_dictionaries(
    {},
    optional={
        GFD: _MODEL_VALUES,
        ACK: _MODEL_VALUES,
        GKE: _MODEL_VALUES,
        "accelerator": st.sampled_from(["NVIDIA-A10", "Tesla-T4", "foreign"]),
        "nvidia.com/gpu.present": st.just("true"),
        "team": st.just("ml"),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    labels=_LABELS,
    owned=st.none() | st.sampled_from(["NVIDIA-A10", "Tesla-T4", "foreign"]),
    gpus=st.none() | st.integers(0, 8),
    remove=st.booleans(),
    force=st.booleans(),
    mixed=st.sampled_from(["skip", "first"]),
)
def test_any_node_converges_in_one_patch_that_touches_only_the_owned_key(
    labels: dict[str, str], owned: str | None, gpus: int | None, remove: bool, force: bool, mixed: str
) -> None:
    options = {"remove_from_non_gpu": remove, "force": force, "mixed_models": mixed}
    item = node_item(labels=labels, owned={"accelerator": owned} if owned else None, gpus=gpus)
    plan = plan_for(item, **options)
    if plan.patch is None:
        assert plan.outcome in (Outcome.UNCHANGED, Outcome.CONFLICT, Outcome.SKIP)
        assert plan.after == plan.before
        return
    assert {op["path"] for op in plan.patch} <= PATCH_PATHS
    # Two guards (the label and the ownership record as read) before any write.
    assert [op["op"] for op in plan.patch[:2]] == ["test", "test"]
    assert all(op["op"] != "test" for op in plan.patch[2:])
    # Someone else's label or record written meanwhile stops the patch; a heartbeat does not.
    for key, meddle in (("labels", "accelerator"), ("annotations", OWNERSHIP_ANNOTATION)):
        meddled = copy.deepcopy(item)
        meddled["metadata"][key][meddle] = "changed-meanwhile"
        with pytest.raises(PatchRefused):
            json_patch(meddled, plan.patch)
    heartbeat(item)
    after = apply(item, plan)
    others = {k: v for k, v in labels.items() if k != "accelerator"}
    assert {k: v for k, v in after["metadata"].get("labels", {}).items() if k != "accelerator"} == others
    assert after["metadata"].get("labels", {}).get("accelerator") == plan.after
    if plan.after is not None:
        assert is_valid_label_value(plan.after)
    again = plan_for(after, **options)
    assert again.outcome is Outcome.UNCHANGED and again.patch is None


# ---------------------------------------------------------------------------------------
# Applying plans
# ---------------------------------------------------------------------------------------


class FakeApiError(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class FakeNodes:
    """Nodes on a fake API server that applies JSON patches as kube-apiserver does (`json_patch`)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = {item["metadata"]["name"]: server_json(item) for item in items}
        self.sent: list[str] = []
        self.lock = threading.Lock()
        self.fail: dict[str, FakeApiError] = {}
        self.before_patch: dict[str, Any] = {}

    def send(self, name: str, patch: list[dict[str, Any]]) -> None:
        with self.lock:
            self.sent.append(name)
            if name in self.fail:
                raise self.fail[name]
            if name in self.before_patch:
                self.before_patch.pop(name)(self.items[name])
            item = self.items.get(name)
            if item is None:
                raise FakeApiError(f'nodes "{name}" not found', 404)
            try:
                self.items[name] = json_patch(item, patch)
            except PatchRefused as exc:
                raise FakeApiError(
                    f"the server rejected our request due to an error in our request ({exc})", 422
                ) from exc
            self.items[name]["metadata"]["resourceVersion"] = str(int(item["metadata"]["resourceVersion"]) + 1)

    def reread(self, name: str) -> CompactNode | None:
        item = self.items.get(name)
        return compact(item) if item else None

    def run(self, options: Any = DEFAULTS, parallelism: int = 4) -> list[NodeResult]:
        plans = plan_nodes([compact(i) for i in self.items.values()], options, IS_GPU)
        return apply_plans(
            plans,
            self.send,
            self.reread,
            lambda node: plan_node(node, options, IS_GPU),
            parallelism=parallelism,
            errors=(FakeApiError,),
        )


def gpu_fleet(count: int) -> list[dict[str, Any]]:
    return [node_item(f"gpu-{i:03d}", labels={ACK: "NVIDIA-A10"}, gpus=8) for i in range(count)]


def test_apply_patches_only_the_nodes_that_differ_and_converges() -> None:
    fake = FakeNodes(gpu_fleet(20) + [node_item("cpu-0")])
    results = fake.run()
    assert sorted(fake.sent) == [f"gpu-{i:03d}" for i in range(20)]
    assert all(r.status is ApplyStatus.DONE for r in results)
    fake.sent.clear()
    again = fake.run()
    assert fake.sent == []
    assert all(r.plan.outcome is Outcome.UNCHANGED for r in again)


def test_a_label_written_by_someone_else_meanwhile_is_not_overwritten() -> None:
    fake = FakeNodes(gpu_fleet(1))

    def foreign_write(item: dict[str, Any]) -> None:
        item["metadata"]["labels"]["accelerator"] = "theirs"
        item["metadata"]["resourceVersion"] = "200"

    fake.before_patch["gpu-000"] = foreign_write
    [result] = fake.run()
    assert result.status is ApplyStatus.DONE
    assert result.plan.outcome is Outcome.CONFLICT
    assert fake.items["gpu-000"]["metadata"]["labels"]["accelerator"] == "theirs"
    assert fake.sent == ["gpu-000"], "the refused patch is not sent again"


def test_heartbeats_between_read_and_write_cost_no_second_patch() -> None:
    fake = FakeNodes(gpu_fleet(20))
    for name in fake.items:
        fake.before_patch[name] = heartbeat
    results = fake.run()
    assert sorted(fake.sent) == sorted(fake.items), "one patch per node"
    assert all(r.status is ApplyStatus.DONE and r.plan.outcome is Outcome.LABEL for r in results)
    assert all(i["status"]["conditions"] for i in fake.items.values()), "the heartbeats stay"


def test_an_ownership_record_written_meanwhile_is_decided_again_and_kept() -> None:
    fake = FakeNodes(gpu_fleet(1))

    def other_record(item: dict[str, Any]) -> None:
        item["metadata"].setdefault("annotations", {})[OWNERSHIP_ANNOTATION] = json.dumps({"example.com/pool": "a"})

    fake.before_patch["gpu-000"] = other_record
    [result] = fake.run()
    assert result.status is ApplyStatus.DONE and result.plan.outcome is Outcome.LABEL
    assert fake.sent == ["gpu-000", "gpu-000"]
    metadata = fake.items["gpu-000"]["metadata"]
    assert metadata["labels"]["accelerator"] == "NVIDIA-A10"
    assert read_ownership(metadata["annotations"][OWNERSHIP_ANNOTATION]) == {
        "example.com/pool": "a",
        "accelerator": "NVIDIA-A10",
    }


def test_a_node_that_keeps_changing_fails_after_bounded_attempts() -> None:
    fake = FakeNodes(gpu_fleet(1))
    fake.fail["gpu-000"] = FakeApiError("the object has been modified", 409)
    [result] = fake.run()
    assert result.status is ApplyStatus.FAILED
    assert len(fake.sent) == MAX_CONFLICT_ATTEMPTS
    assert "409" in result.error


def test_a_node_deleted_meanwhile_is_skipped() -> None:
    fake = FakeNodes(gpu_fleet(2))
    fake.fail["gpu-001"] = FakeApiError('nodes "gpu-001" not found', 404)
    results = {r.plan.name: r for r in fake.run()}
    assert results["gpu-001"].plan.outcome is Outcome.SKIP and results["gpu-001"].status is ApplyStatus.DONE
    assert results["gpu-000"].plan.outcome is Outcome.LABEL
    assert failure_message(list(results.values())) is None


def test_an_invalid_patch_fails_that_node_only() -> None:
    fake = FakeNodes(gpu_fleet(5))
    fake.fail["gpu-002"] = FakeApiError("invalid (422 Unprocessable Entity)", 422)
    results = fake.run()
    assert [r.status for r in results].count(ApplyStatus.DONE) == 4
    assert [r.plan.name for r in results if r.status is ApplyStatus.FAILED] == ["gpu-002"]
    assert fake.sent.count("gpu-002") == 1, "a patch refused again unchanged is not sent again"
    message = failure_message(results)
    assert message is not None and "gpu-002: invalid" in message and "changed 4 node(s)" in message


def test_an_api_server_that_goes_away_stops_the_sending() -> None:
    fake = FakeNodes(gpu_fleet(10))
    fake.fail["gpu-003"] = FakeApiError("connection refused by the API server at https://127.0.0.1:36443")
    results = fake.run(parallelism=1)
    assert fake.sent == [f"gpu-{i:03d}" for i in range(4)]
    statuses = {r.plan.name: r.status for r in results}
    assert [n for n, s in statuses.items() if s is ApplyStatus.DONE] == ["gpu-000", "gpu-001", "gpu-002"]
    assert statuses["gpu-003"] is ApplyStatus.FAILED
    assert [n for n, s in statuses.items() if s is ApplyStatus.NOT_ATTEMPTED] == [f"gpu-{i:03d}" for i in range(4, 10)]
    message = failure_message(results)
    assert message is not None
    assert message.startswith("labeling stopped: connection refused")
    assert "changed 3 node(s): gpu-000, gpu-001, gpu-002" in message
    assert "not attempted 6 node(s): gpu-004" in message
    summary = summarize(results, "accelerator")
    assert summary["counts"]["labeled"] == 3 and summary["counts"]["not_attempted"] == 6
    # A rerun once the API server is back converges.
    fake.fail.clear()
    fake.sent.clear()
    fake.run()
    assert sorted(fake.sent) == [f"gpu-{i:03d}" for i in range(3, 10)]
    assert all(i["metadata"]["labels"]["accelerator"] == "NVIDIA-A10" for i in fake.items.values())


def test_summary_and_diff_show_only_the_managed_label() -> None:
    fake = FakeNodes(
        [
            node_item("a", labels={ACK: "NVIDIA-A10"}, gpus=8),
            node_item("b", labels={"accelerator": "T4"}, owned={"accelerator": "T4"}),
            node_item("c", labels={ACK: "NVIDIA-A10", "accelerator": "theirs"}, gpus=8),
            node_item("d", gpus=1),
            node_item("e"),
        ]
    )
    summary = summarize(fake.run(build_options(remove_from_non_gpu=True)), "accelerator")
    assert summary["labeled"] == ["a"] and summary["unlabeled"] == ["b"] and summary["unchanged"] == ["e"]
    assert [c["node"] for c in summary["conflicts"]] == ["c"]
    assert summary["conflicts"][0]["desired"] == "NVIDIA-A10"
    assert [s["node"] for s in summary["skipped_nodes"]] == ["d"]
    assert summary["diff"] == [
        {"before_header": "node/a", "after_header": "node/a", "before": "", "after": "accelerator=NVIDIA-A10\n"},
        {"before_header": "node/b", "after_header": "node/b", "before": "accelerator=T4\n", "after": ""},
    ]
    assert summary["counts"] == {
        "labeled": 1,
        "unlabeled": 1,
        "unchanged": 1,
        "conflicts": 1,
        "skipped": 1,
        "failed": 0,
        "not_attempted": 0,
    }


def test_the_patch_goes_to_the_node_as_a_json_patch() -> None:
    class Client:
        def patch_json(self, path: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
            self.sent = (path, operations)
            return {}

    client = Client()
    operations = [{"op": "test", "path": "/metadata/labels/accelerator", "value": None}]
    patch_node(client, "gpu/odd name", operations)  # type: ignore[arg-type]
    assert client.sent == ("/api/v1/nodes/gpu%2Fodd%20name", operations)
