"""The plan for one failed DRA device: the selector refused when it would pick more than that
device, the rule the collection owns, what the controller reports for effect None, who uses the
device and how, and which rules a release may delete."""

from __future__ import annotations

import re

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine import device as plan
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

REF = plan.DeviceRef("gpu.nvidia.com", "dra-h100", "gpu-1")
OWNER = {"who": "oncall", "why": "XID 79 on gpu-1", "when": "2026-12-03T10:00:00Z"}


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ([], "at least one device"),
        (None, "at least one device"),
        ([{}], "devices[0] lacks driver, pool, device"),
        ([{"driver": "gpu.nvidia.com", "pool": "dra-h100"}], "devices[0] lacks device"),
        ([{"driver": "gpu.nvidia.com", "pool": " ", "device": "gpu-1"}], "devices[0] lacks pool"),
        ([{"driver": "d", "pool": "p", "device": "x"}, "gpu-1"], "devices[1] lacks driver, pool, device"),
    ],
)
def test_an_empty_or_wide_selector_is_refused_naming_where(value, names):
    with pytest.raises(OptionError, match=re.escape(names)):
        plan.parse_devices(value)


def test_devices_parsed_sorted_and_once():
    item = {"driver": "gpu.nvidia.com", "pool": "dra-h100", "device": "gpu-1"}
    assert plan.parse_devices([item, dict(item)]) == [REF]


def test_a_device_no_slice_publishes_is_named():
    slices = [{"driver": "gpu.nvidia.com", "pool": "dra-h100", "node": "dra-h100", "devices": [{"name": "gpu-0"}]}]
    published = plan.published_devices(slices)
    assert published == {plan.DeviceRef("gpu.nvidia.com", "dra-h100", "gpu-0"): "dra-h100"}
    assert plan.unknown_devices([REF], published) == ["gpu.nvidia.com/dra-h100/gpu-1"]


def test_the_rule_selects_exactly_the_device_and_says_who_why_when():
    body = plan.rule_body(REF, plan.DEFAULT_TAINT_KEY, plan.EFFECT_NONE, OWNER)
    assert body["spec"]["deviceSelector"] == {"driver": "gpu.nvidia.com", "pool": "dra-h100", "device": "gpu-1"}
    assert body["spec"]["taint"]["effect"] == "None"
    assert body["metadata"]["annotations"][plan.WHY_ANNOTATION] == "XID 79 on gpu-1"
    assert plan.owned_rule(body) and plan.rule_device(body) == REF


def test_rule_names_are_stable_valid_and_distinct():
    other = plan.DeviceRef("gpu.nvidia.com", "dra-h100", "gpu-10")
    assert plan.rule_name(REF) == plan.rule_name(plan.DeviceRef(*REF.text().split("/")))
    assert plan.rule_name(REF) != plan.rule_name(other)
    long = plan.DeviceRef("gpu.nvidia.com", "Pool_" * 80, "gpu-1")
    name = plan.rule_name(long)
    assert len(name) <= 253 and name == name.lower() and "_" not in name


def _rule(effect: str, generation: int, condition: dict | None) -> dict:
    rule = plan.rule_body(REF, plan.DEFAULT_TAINT_KEY, effect, OWNER)
    rule["metadata"]["generation"] = generation
    rule["status"] = {"conditions": [condition] if condition else []}
    return rule


# The message the 1.37.2 controller writes (pkg/controller/devicetainteviction, maybeUpdateRuleStatus).
NONE_MESSAGE = (
    "1 published device selected. 1 allocated device selected. 2 pods would be evicted in 1 namespace "
    "if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule "
    "to trigger an update."
)


def test_the_simulation_is_read_only_for_the_current_generation():
    condition = {"type": "EvictionInProgress", "reason": "NoEffect", "observedGeneration": 1, "message": NONE_MESSAGE}
    assert plan.simulation(_rule("None", 1, condition)) == {"published": 1, "allocated": 1, "pods": 2, "namespaces": 1}
    assert plan.simulation(_rule("None", 2, condition)) is None
    assert plan.simulation(_rule("None", 1, None)) is None
    other = {**condition, "reason": "NotStarted"}
    assert plan.simulation(_rule("None", 1, other)) is None


def _claim(name: str, device: str, pods: list[str], extended: bool = False, admin: bool = False) -> dict:
    annotations = {"resource.kubernetes.io/extended-resource-claim": "true"} if extended else {}
    result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-h100", "device": device}
    if admin:
        result["adminAccess"] = True
    return {
        "metadata": {"namespace": "team", "name": name, "annotations": annotations},
        "status": {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": "u"} for pod in pods],
        },
    }


def test_device_users_say_how_they_hold_it():
    claims = [
        _claim("train-gpu", "gpu-1", ["train"]),
        _claim("ext-extended-resources-x", "gpu-1", ["ext"], extended=True),
        _claim("other", "gpu-0", ["elsewhere"]),
        _claim("monitor", "gpu-1", ["dcgm"], admin=True),
    ]
    assert plan.device_users(claims, REF) == [
        {"namespace": "team", "name": "ext", "claim": "ext-extended-resources-x", "through": "extended_resource"},
        {"namespace": "team", "name": "train", "claim": "train-gpu", "through": "claim"},
    ]


def test_steps_create_switch_none_and_a_foreign_rule_is_left_alone():
    ours = plan.rule_body(REF, plan.DEFAULT_TAINT_KEY, "None", OWNER)
    foreign = {**ours, "metadata": {"name": ours["metadata"]["name"], "labels": {}}}
    assert plan.rule_step(None, "NoExecute") == "create"
    assert plan.rule_step(ours, "NoExecute") == "switch"
    assert plan.rule_step(plan.rule_body(REF, plan.DEFAULT_TAINT_KEY, "NoExecute", OWNER), "NoExecute") == "none"
    assert plan.rule_step(foreign, "NoExecute") == "foreign"


def test_release_deletes_only_our_rules_on_those_devices():
    ours = plan.rule_body(REF, plan.DEFAULT_TAINT_KEY, "NoExecute", OWNER)
    other_device = plan.rule_body(plan.DeviceRef("gpu.nvidia.com", "dra-h100", "gpu-2"), "k", "NoExecute", OWNER)
    human = {**ours, "metadata": {"name": "maintenance", "labels": {}}}
    renamed = {**ours, "metadata": {**ours["metadata"], "name": "kubegpu-device-copy"}}
    assert plan.releasable([ours, other_device, human, renamed], [REF]) == [ours["metadata"]["name"]]


def test_breaker_members_count_each_device_of_its_pool_once():
    published = {plan.DeviceRef("gpu.nvidia.com", "dra-h100", f"gpu-{i}"): "dra-h100" for i in range(4)}
    members = plan.breaker_members(published, [REF])
    assert len(members) == 4
    assert sum(quarantined for _pools, _gpus, quarantined in members) == 1
    assert {pools for pools, _gpus, _q in members} == {(("pool", "gpu.nvidia.com/dra-h100"),)}


def test_only_no_schedule_and_no_execute_are_asked_for():
    assert plan.check_effect("NoExecute") == "NoExecute"
    with pytest.raises(OptionError, match="effect must be one of NoSchedule, NoExecute"):
        plan.check_effect("None")
