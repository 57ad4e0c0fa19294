"""The driver roll's plan: selection, skips with the reason, batch sizes, the canary first, the breaker's share."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.plan import (
    OPERATOR,
    SKIP_AT_TARGET,
    SKIP_LABEL,
    SKIP_NO_GPUS,
    RollOptions,
    batch_size,
    fail_budget,
    plan_roll,
    project_node,
    should_stop,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.record import (
    ROLL_ANNOTATION,
    roll_annotation,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import parse_label_selector

TARGET = "570.133.20"


def node(name, gpus=8, version="550.90.07", labels=None, annotations=None, unschedulable=False, taints=()):
    all_labels = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/cuda.driver-version.full": version,
        "pool": "a",
        **(labels or {}),
    }
    item = {
        "metadata": {"name": name, "labels": all_labels, "annotations": annotations or {}},
        "spec": {"unschedulable": unschedulable, "taints": list(taints)},
        "status": {"capacity": {"nvidia.com/gpu": str(gpus)}, "allocatable": {"nvidia.com/gpu": str(gpus)}},
    }
    return project_node(item)


def plan(nodes, names=(), selectors=(), blockers=None, **options):
    opts = RollOptions(target_version=TARGET, **options)
    return plan_roll(nodes, (list(names), [parse_label_selector(s) for s in selectors]), blockers or {}, opts)


def fleet(count=10):
    return [node(f"gpu-{i:02d}") for i in range(count)]


@pytest.mark.parametrize(
    ("value", "total", "size"),
    [(1, 10, 1), ("3", 10, 3), ("20%", 10, 2), ("25%", 10, 3), ("100%", 7, 7), ("1%", 10, 1), (" 10 % ", 100, 10)],
)
def test_batch_size_is_a_count_or_a_share_rounded_up(value, total, size):
    assert batch_size(value, total) == size


@pytest.mark.parametrize("value", ["0", "0%", "150%", "-1", "two", ""])
def test_a_batch_size_that_means_nothing_is_refused(value):
    with pytest.raises(OptionError, match="max_unavailable"):
        batch_size(value, 10)


def test_the_canary_comes_first_then_batches_of_max_unavailable():
    result = plan(fleet(7), selectors=["pool=a"], max_unavailable="2", max_share=1.0)
    assert [list(b) for b in result.batches] == [
        ["gpu-00"],
        ["gpu-01", "gpu-02"],
        ["gpu-03", "gpu-04"],
        ["gpu-05", "gpu-06"],
    ]
    assert result.expected_gpus["gpu-03"] == 8


def test_names_keep_their_order_and_unknown_names_are_missing():
    result = plan(fleet(4), names=["gpu-03", "gpu-01", "nope"], max_unavailable="5", max_share=1.0)
    assert result.batches == (("gpu-03",), ("gpu-01",))
    assert result.missing == ("nope",)


def test_nodes_are_skipped_with_why():
    nodes = [
        node("no-gpus", gpus=0),
        node("skip", labels={"nvidia.com/gpu-driver-upgrade.skip": "true"}),
        node("done", version=TARGET),
        node("blocked"),
        node("failed", annotations={ROLL_ANNOTATION: roll_annotation({"target": TARGET, "failed": "GPUs not back"})}),
        node("ok"),
    ]
    result = plan(nodes, selectors=["pool=a"], blockers={"blocked": ["ml/train: budget-allows-no-disruption: x"]})
    reasons = {s.node: s.reason for s in result.skipped}
    assert reasons["no-gpus"] == SKIP_NO_GPUS
    assert reasons["skip"] == SKIP_LABEL
    assert reasons["done"] == SKIP_AT_TARGET
    assert reasons["blocked"].startswith("blocked: ml/train")
    assert "failed before: GPUs not back" in reasons["failed"]
    assert result.batches == (("ok",),)


def test_the_rolls_own_skip_label_does_not_skip_the_node():
    held = {ROLL_ANNOTATION: roll_annotation({"target": TARGET, "held": True})}
    result = plan(
        [node("a", labels={"nvidia.com/gpu-driver-upgrade.skip": "true"}, annotations=held)], names=["a"], max_share=1.0
    )
    assert result.batches == (("a",),)


def test_a_node_the_operator_failed_is_skipped_in_operator_mode():
    failed = node("a", labels={"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"})
    assert plan([failed], names=["a"], mode=OPERATOR, max_share=1.0).batches == ()
    assert plan([failed], names=["a"], max_share=1.0).batches == (("a",),)


def test_the_breaker_splits_a_batch_that_takes_too_much_of_a_pool():
    # 10 nodes of 8 GPUs: a share of 0.2 lets 16 GPUs out at once, two nodes.
    result = plan(fleet(10), selectors=["pool=a"], max_unavailable="5", max_share=0.2, canary=1)
    assert [len(b) for b in result.batches] == [1, 2, 2, 2, 2, 1]


def test_cordoned_nodes_count_against_the_share():
    nodes = [
        *fleet(8),
        node("cordoned-1", unschedulable=True, labels={"pool": "b"}),
        node("cordoned-2", unschedulable=True, labels={"pool": "b"}),
    ]
    # 80 GPUs, 16 out already: a share of 0.3 leaves room for one more node of 8.
    result = plan(nodes, selectors=["pool=a"], max_unavailable="4", max_share=0.3)
    assert {len(b) for b in result.batches} == {1}


def test_a_node_the_breaker_never_lets_out_is_skipped():
    result = plan(fleet(3), names=["gpu-00"], max_share=0.1)
    assert result.batches == ()
    assert result.skipped[0].reason.startswith("held by the breaker: pool model=")


@pytest.mark.parametrize(
    ("total", "percent", "budget"), [(10, 0, 0), (10, 10, 1), (10, 25, 2), (3, 50, 1), (4, 100, 4)]
)
def test_fail_budget(total, percent, budget):
    assert fail_budget(total, percent) == budget


def test_the_roll_stops_past_its_fail_budget():
    assert should_stop(1, 10, 0)
    assert not should_stop(1, 10, 10)
    assert should_stop(2, 10, 10)


def test_check_options():
    with pytest.raises(OptionError, match="canary"):
        plan(fleet(2), names=["gpu-00"], canary=0)
    with pytest.raises(OptionError, match="max_fail_percentage"):
        plan(fleet(2), names=["gpu-00"], max_fail_percentage=101)


def test_a_quarantined_node_counts_out_of_service():
    taint = {"key": "kubegpu.io/quarantine", "effect": "NoSchedule"}
    assert node("q", taints=[taint]).quarantined
    assert not node("q").quarantined
