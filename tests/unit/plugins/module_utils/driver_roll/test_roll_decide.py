"""The driver roll's decisions on a batch: the node patches, the GPUs back, the pods that failed admission,
where the operator's upgrade stands."""

from __future__ import annotations

import json

from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.decide import (
    DONE,
    FAILED,
    WAITING,
    admission_failures,
    failure_patch,
    gpus_back,
    hold_patch,
    kept_cordons,
    start_patch,
    upgrade_stand,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.plan import project_node
from ansible_collections.kubegpu.scheduling.plugins.module_utils.driver_roll.record import (
    ROLL_ANNOTATION,
    read_roll,
    roll_annotation,
)

SKIP = "nvidia.com/gpu-driver-upgrade.skip"
STATE = "nvidia.com/gpu-driver-upgrade-state"


def node(labels=None, annotations=None, allocatable=8):
    return project_node(
        {
            "metadata": {
                "name": "n1",
                "labels": {"kubernetes.io/hostname": "n1", **(labels or {})},
                "annotations": annotations or {},
            },
            "spec": {},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": str(allocatable)}},
        }
    )


def written(patch):
    return [op for op in patch if op["op"] != "test"]


def test_hold_puts_the_skip_label_and_records_it_as_the_rolls_own():
    plan = hold_patch(node(annotations={"other": "x"}), "570", "now")
    ops = written(plan.patch)
    assert {"op": "add", "path": "/metadata/labels/nvidia.com~1gpu-driver-upgrade.skip", "value": "true"} in ops
    record = read_roll(next(op["value"] for op in ops if op["path"].endswith("driver-upgrade")))
    assert record["held"] and record["target"] == "570"
    # Guarded: the label and the annotation as read.
    assert {"op": "test", "path": "/metadata/labels/nvidia.com~1gpu-driver-upgrade.skip", "value": None} in plan.patch


def test_hold_leaves_a_skip_label_already_there():
    assert hold_patch(node(labels={SKIP: "true"}), "570", "now").patch is None


def test_start_takes_off_only_the_rolls_own_skip_label():
    ours = node(labels={SKIP: "true"}, annotations={ROLL_ANNOTATION: roll_annotation({"target": "570", "held": True})})
    ops = written(start_patch(ours).patch)
    assert {"op": "remove", "path": "/metadata/labels/nvidia.com~1gpu-driver-upgrade.skip"} in ops
    assert start_patch(node(labels={SKIP: "true"})).patch is None


def test_failure_is_recorded_once():
    plan = failure_patch(node(), "570", "GPUs not back", "now")
    record = read_roll(written(plan.patch)[0]["value"]["kubegpu.io/driver-upgrade"])
    assert record["failed"] == "GPUs not back"
    recorded = node(
        annotations={ROLL_ANNOTATION: roll_annotation({"target": "570", "failed": "GPUs not back", "at": "now"})}
    )
    assert failure_patch(recorded, "570", "GPUs not back", "now").patch is None


def test_gpus_back():
    assert gpus_back(node(allocatable=8), 8)
    assert not gpus_back(node(allocatable=0), 8)


def pod(name, node_name="n1", reason="UnexpectedAdmissionError", owners=(), phase="Failed"):
    return {
        "metadata": {"namespace": "ml", "name": name, "ownerReferences": list(owners)},
        "spec": {"nodeName": node_name},
        "status": {"phase": phase, "reason": reason},
    }


def test_admission_failures_controller_owned_are_deleted_bare_are_listed():
    owner = {"kind": "ReplicaSet", "name": "web-1", "controller": True}
    owned, bare = admission_failures(
        [
            pod("a", owners=[owner]),
            pod("b"),
            pod("c", reason="Evicted"),
            pod("d", node_name="n2"),
            pod("e", phase="Running"),
        ],
        frozenset({"n1"}),
    )
    assert owned == [{"pod": "ml/a", "node": "n1", "owner": "ReplicaSet/web-1"}]
    assert bare == [{"pod": "ml/b", "node": "n1"}]


def test_upgrade_stand():
    assert upgrade_stand(node(labels={STATE: "upgrade-done"}), "570")[0] == DONE
    assert upgrade_stand(node(labels={STATE: "upgrade-failed"}), "570") == (FAILED, "upgrade-failed")
    assert upgrade_stand(node(labels={STATE: "validation-required"}), "570") == (WAITING, "validation-required")
    # An upgrade-done of an earlier upgrade: GFD still labels the old driver.
    old = node(labels={STATE: "upgrade-done", "nvidia.com/cuda.driver-version.full": "550.90.07"})
    assert upgrade_stand(old, "570") == (WAITING, "upgrade-done (GFD still labels driver 550.90.07)")
    assert upgrade_stand(old, "550.90.07")[0] == DONE
    # Still held: the operator has not been let at it.
    assert upgrade_stand(node(labels={STATE: "upgrade-done", SKIP: "true"}), "570")[0] == WAITING


def test_kept_cordons():
    initial = {"nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable": "true"}
    assert kept_cordons([node(annotations=initial), node()]) == ["n1"]


def test_a_record_that_does_not_parse_says_nothing():
    assert read_roll("{") == {}
    assert read_roll(json.dumps({"held": True})) == {}
