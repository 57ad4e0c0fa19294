"""Node quarantine, pure: the node change and its guarded patch, the record of who cordoned, the GPU
pods to evict (and those left), the budgets in their way, and the breaker's held-back nodes."""

from __future__ import annotations

import json

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects, project_claim, project_slice
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra_fleet import dra_fleet
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_quarantine import plan as q
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write import evictions as ev
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT,
    RECORD_ANNOTATION,
    Record,
    check_text,
    read_record,
    record_annotation,
)

OPTIONS = q.QuarantineOptions(reason="XID 79", quarantined_by="oncall", now="2026-12-03T10:00:00Z", max_share=1.0)
IS_GPU = gpu_resource_matcher()


def raw_node(
    name, gpus=8, model="NVIDIA-H100-80GB-HBM3", unschedulable=False, taints=None, annotations=None, labels=None
):
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.product": model, **(labels or {})},
            **({"annotations": annotations} if annotations is not None else {}),
        },
        "spec": {**({"unschedulable": True} if unschedulable else {}), **({"taints": taints} if taints else {})},
        "status": {"capacity": {"nvidia.com/gpu": str(gpus), "cpu": "64"}},
    }


def raw_pod(
    name, node, limits=None, labels=None, owner=None, annotations=None, phase="Running", namespace="ml", deleting=False
):
    metadata = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": "owner"}]
    if annotations:
        metadata["annotations"] = annotations
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-03T09:00:00Z"
    return {
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"limits": limits or {}}}]},
        "status": {"phase": phase},
    }


def raw_budget(name, selector, allowed=0, namespace="ml", generation=1, observed=1):
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": {"selector": selector} if selector is not None else {},
        "status": {"disruptionsAllowed": allowed, "observedGeneration": observed},
    }


def plan(asked, nodes, pods=(), budgets=(), options=OPTIONS, dra=None, holders=None):
    compact = [q.project_node(n, options) for n in nodes]
    wanted = frozenset(asked)
    projected = [p for p in (ev.project_pod(item, wanted, IS_GPU) for item in pods) if p is not None]
    budgets = [ev.project_budget(b) for b in budgets]
    return q.plan_quarantine(asked, q.QuarantineReads(compact, projected, budgets, dra, holders or {}), options)


def only(result):
    assert len(result.nodes) == 1
    return result.nodes[0]


def test_a_healthy_node_is_cordoned_tainted_and_recorded_as_cordoned_and_tainted_by_us_in_one_guarded_patch():
    node = only(plan(["gpu-0"], [raw_node("gpu-0")]))
    assert node.outcome == q.OUTCOME_QUARANTINE
    assert node.record == Record("oncall", "XID 79", "2026-12-03T10:00:00Z", cordoned=True, tainted=True)
    assert node.patch == [
        {"op": "test", "path": "/spec/unschedulable", "value": None},
        {"op": "test", "path": "/spec/taints", "value": None},
        {"op": "test", "path": "/metadata/annotations", "value": None},
        {"op": "add", "path": "/spec/unschedulable", "value": True},
        {"op": "add", "path": "/spec/taints", "value": [QUARANTINE_TAINT]},
        {"op": "add", "path": "/metadata/annotations", "value": {RECORD_ANNOTATION: record_annotation(node.record)}},
    ]


def test_a_node_someone_else_cordoned_is_recorded_not_cordoned_by_us_and_not_cordoned_again():
    node = only(plan(["gpu-0"], [raw_node("gpu-0", unschedulable=True, annotations={"a": "b"})]))
    assert node.record.cordoned is False and node.record.tainted is True
    assert not any(op["path"] == "/spec/unschedulable" for op in node.patch)
    assert {"op": "test", "path": "/metadata/annotations/kubegpu.io~1quarantine-record", "value": None} in node.patch
    assert node.after.unschedulable is True


def test_existing_taints_are_tested_whole_and_the_quarantine_taint_is_appended():
    other = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    node = only(plan(["gpu-0"], [raw_node("gpu-0", taints=[other])]))
    assert {"op": "test", "path": "/spec/taints", "value": [other]} in node.patch
    assert {"op": "add", "path": "/spec/taints/-", "value": QUARANTINE_TAINT} in node.patch
    assert node.after.taints == ("dedicated=ml:NoSchedule", "kubegpu.io/quarantine:NoSchedule")


def test_a_quarantined_node_is_unchanged_and_keeps_its_record():
    record = record_annotation(Record("someone", "earlier", "2026-12-01T00:00:00Z", cordoned=False, tainted=True))
    quarantined = raw_node(
        "gpu-0", unschedulable=True, taints=[QUARANTINE_TAINT], annotations={RECORD_ANNOTATION: record}
    )
    node = only(plan(["gpu-0"], [quarantined]))
    assert node.outcome == q.OUTCOME_UNCHANGED and node.patch is None
    assert node.after == node.before and node.after.record == record


def test_a_quarantined_node_uncordoned_since_is_cordoned_again_and_its_record_says_we_cordoned():
    record = record_annotation(Record("someone", "earlier", "2026-12-01T00:00:00Z", cordoned=False, tainted=True))
    uncordoned = raw_node("gpu-0", taints=[QUARANTINE_TAINT], annotations={RECORD_ANNOTATION: record})
    node = only(plan(["gpu-0"], [uncordoned]))
    assert node.outcome == q.OUTCOME_QUARANTINE and node.cordon and not node.taint
    updated = read_record(node.after.record)
    assert (updated.by, updated.at, updated.cordoned, updated.tainted) == (
        "someone",
        "2026-12-01T00:00:00Z",
        True,
        True,
    )
    assert {"op": "test", "path": "/metadata/annotations/kubegpu.io~1quarantine-record", "value": record} in node.patch


def test_a_taint_of_our_key_we_did_not_record_is_recorded_not_ours():
    node = only(plan(["gpu-0"], [raw_node("gpu-0", taints=[QUARANTINE_TAINT])]))
    assert node.record.tainted is False and node.record.cordoned is True and not node.taint


def test_a_record_that_does_not_parse_is_replaced_under_its_guard():
    node = only(plan(["gpu-0"], [raw_node("gpu-0", annotations={RECORD_ANNOTATION: "{not json"})]))
    assert {
        "op": "test",
        "path": "/metadata/annotations/kubegpu.io~1quarantine-record",
        "value": "{not json",
    } in node.patch
    assert node.record.by == "oncall"


def test_a_node_not_in_the_list_is_missing_and_planned_nothing():
    result = plan(["gone", "gpu-0"], [raw_node("gpu-0")])
    assert [(n.name, n.outcome, n.patch) for n in result.nodes][0] == ("gone", q.OUTCOME_MISSING, None)


def test_only_gpu_pods_on_the_node_are_evicted_and_system_pods_are_left_with_the_reason():
    pods = [
        raw_pod("train", "gpu-0", {"nvidia.com/gpu": "2"}),
        raw_pod("shared", "gpu-0", {"nvidia.com/gpu.shared": "1"}),
        raw_pod("gpumem", "gpu-0", {"aliyun.com/gpu-mem": "8"}),
        raw_pod("cpu-only", "gpu-0", {"cpu": "2"}),
        raw_pod("elsewhere", "gpu-1", {"nvidia.com/gpu": "1"}),
        raw_pod("done", "gpu-0", {"nvidia.com/gpu": "1"}, phase="Succeeded"),
        raw_pod("plugin", "gpu-0", {"nvidia.com/gpu": "1"}, owner="DaemonSet"),
        raw_pod("static", "gpu-0", {"nvidia.com/gpu": "1"}, annotations={"kubernetes.io/config.mirror": "x"}),
        raw_pod("leaving", "gpu-0", {"nvidia.com/gpu": "1"}, deleting=True),
    ]
    node = only(plan(["gpu-0"], [raw_node("gpu-0"), raw_node("gpu-1")], pods))
    assert [p.ref for p in node.evict] == ["ml/gpumem", "ml/shared", "ml/train"]
    assert node.evict[2].gpus == {"nvidia.com/gpu": 2}
    assert [(p.ref, p.reason) for p in node.left] == [
        ("ml/leaving", ev.LEFT_TERMINATING),
        ("ml/plugin", ev.LEFT_DAEMONSET),
        ("ml/static", ev.LEFT_MIRROR),
    ]


def test_pods_of_other_nodes_are_not_even_projected():
    assert ev.project_pod(raw_pod("x", "gpu-9", {"nvidia.com/gpu": "1"}), frozenset({"gpu-0"}), IS_GPU) is None
    assert ev.project_pod(raw_pod("x", None), frozenset({"gpu-0"}), IS_GPU) is None


def _claim(name, pod, driver="gpu.nvidia.com", admin=False):
    return project_claim(
        {
            "metadata": {"name": name, "namespace": "ml"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"driver": driver, "pool": "gpu-0", "device": "gpu-0", "adminAccess": admin}]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": pod}],
            },
        }
    )


def test_a_pod_that_holds_a_gpu_through_a_dra_claim_is_evicted_and_one_with_admin_access_or_another_driver_is_not():
    claims = [
        _claim("c1", "dra-job"),
        _claim("c2", "monitor", admin=True),
        _claim("c3", "nic", driver="net.example.com"),
    ]
    pods = [raw_pod("dra-job", "gpu-0"), raw_pod("monitor", "gpu-0"), raw_pod("nic", "gpu-0")]
    node = only(plan(["gpu-0"], [raw_node("gpu-0")], pods, holders=q.dra_holders(claims)))
    assert [(p.ref, dict(p.gpus)) for p in node.evict] == [("ml/dra-job", {"gpu.nvidia.com": 1})]


def test_budgets_that_select_a_pod_are_named_with_whether_they_allow_a_disruption_now():
    pods = [
        raw_pod("a", "gpu-0", {"nvidia.com/gpu": "1"}, labels={"app": "serve"}),
        raw_pod("b", "gpu-0", {"nvidia.com/gpu": "1"}, labels={"app": "batch", "tier": "x"}),
        raw_pod("c", "gpu-0", {"nvidia.com/gpu": "1"}, labels={"app": "serve"}, namespace="other"),
    ]
    budgets = [
        raw_budget("keep-serve", {"matchLabels": {"app": "serve"}}, allowed=0),
        raw_budget("batch", {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, allowed=1),
        raw_budget("stale", {"matchLabels": {"app": "batch"}}, allowed=1, generation=2, observed=1),
        raw_budget("no-selector", None, allowed=0),
    ]
    node = only(plan(["gpu-0"], [raw_node("gpu-0")], pods, budgets))
    by_pod = {p.ref: p for p in node.evict}
    assert [(b.name, b.allows) for b in by_pod["ml/a"].budgets] == [("keep-serve", False)]
    assert by_pod["ml/a"].blocking == ("keep-serve",)
    # Two budgets select b: the API server refuses to evict it, whatever they allow.
    assert [(b.name, b.allows) for b in by_pod["ml/b"].budgets] == [("batch", True), ("stale", False)]
    assert by_pod["ml/b"].blocking == ("batch", "stale")
    assert by_pod["other/c"].budgets == ()


def test_an_empty_selector_selects_every_pod_of_its_namespace():
    pods = [raw_pod("a", "gpu-0", {"nvidia.com/gpu": "1"})]
    node = only(plan(["gpu-0"], [raw_node("gpu-0")], pods, [raw_budget("all", {}, allowed=2)]))
    assert [(b.name, b.allows) for b in node.evict[0].budgets] == [("all", True)]
    assert node.evict[0].blocking == ()


def share(max_share, pool_by=("model",)):
    return q.QuarantineOptions("XID", "oncall", "now", max_share, pool_by)


def test_the_breaker_holds_back_nodes_past_the_share_of_their_model_in_the_order_asked():
    nodes = [raw_node(f"h{i}") for i in range(4)] + [raw_node("t0", model="Tesla-T4")]
    result = plan(["h3", "h2", "h1", "t0"], nodes, options=share(0.5))
    outcomes = {n.name: n.outcome for n in result.nodes}
    assert outcomes == {"h3": "quarantine", "h2": "quarantine", "h1": "held", "t0": "held"}
    held = result.nodes[2]
    assert held.patch is None and held.evict == () and held.after == held.before
    assert "model=NVIDIA-H100-80GB-HBM3" in held.held.reason and "at most 16" in held.held.reason
    assert result.used[("model", "NVIDIA-H100-80GB-HBM3")] == 16


def test_nodes_out_of_service_already_count_against_the_share():
    nodes = [raw_node("h0", taints=[QUARANTINE_TAINT]), raw_node("h1"), raw_node("h2"), raw_node("h3")]
    result = plan(["h1", "h2"], nodes, options=share(0.5))
    assert [n.outcome for n in result.nodes] == ["quarantine", "held"]


def test_a_node_cordoned_already_takes_nothing_more_out_of_service_and_is_never_held():
    nodes = [raw_node("h0", unschedulable=True), raw_node("h1")]
    result = plan(["h0"], nodes, options=share(0.5))
    assert result.nodes[0].outcome == q.OUTCOME_QUARANTINE


def test_the_breaker_pools_by_a_node_label_too():
    pool = "cloud.google.com/gke-nodepool"
    nodes = [raw_node(f"a{i}", labels={pool: "a"}) for i in range(2)] + [
        raw_node(f"b{i}", labels={pool: "b"}) for i in range(2)
    ]
    result = plan(["a0", "a1", "b0"], nodes, options=share(0.5, ("model", pool)))
    # Pool a holds 16 GPUs: half is one node; the model's 32 would allow both.
    assert [n.outcome for n in result.nodes] == ["quarantine", "held", "quarantine"]
    assert result.nodes[1].held.pool == (pool, "a")
    assert result.nodes[2].pools == (("model", "NVIDIA-H100-80GB-HBM3"), (pool, "b"))


def test_dra_gpus_count_for_the_breaker_and_name_the_model():
    raw_slice = {
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "dra-0",
            "pool": {"name": "dra-0", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": f"GPU-{i}"},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    },
                }
                for i in range(2)
            ],
        }
    }
    slices = [project_slice(raw_slice)]
    dra = dra_fleet(DraObjects(slices=slices))
    node = {"metadata": {"name": "dra-0"}, "spec": {}, "status": {}}
    result = plan(["dra-0"], [node], options=share(1.0), dra=dra)
    assert result.nodes[0].gpus == 2
    assert result.nodes[0].pools == (("model", "NVIDIA-H100-80GB-HBM3"),)


def test_replanning_after_someone_else_cordoned_keeps_the_verdict_and_records_not_cordoned_by_us():
    first = only(plan(["gpu-0"], [raw_node("gpu-0")]))
    again = q.replan_node(q.project_node(raw_node("gpu-0", unschedulable=True), OPTIONS), first, OPTIONS)
    assert again.record.cordoned is False and not any(op["path"] == "/spec/unschedulable" for op in again.patch)


def test_the_entry_and_the_diff_show_the_change():
    node = only(plan(["gpu-0"], [raw_node("gpu-0")], [raw_pod("a", "gpu-0", {"nvidia.com/gpu": "1"})]))
    entry = q.node_entry(node)
    assert entry["cordon"] and entry["taint"] and entry["record"]["cordoned"] is True
    assert entry["evict"] == [
        {"pod": "ml/a", "node": "gpu-0", "gpus": {"nvidia.com/gpu": 1}, "budgets": [], "blocked_by": []}
    ]
    diff = q.node_diff(node)
    assert diff["before"] == "spec.unschedulable: false\n"
    assert diff["after"].splitlines()[:2] == [
        "spec.unschedulable: true",
        "spec.taints: kubegpu.io/quarantine:NoSchedule",
    ]
    assert json.loads(diff["after"].splitlines()[2].split(": ", 1)[1])["by"] == "oncall"


@pytest.mark.parametrize("value", [None, [], "gpu-0", [""], [1]])
def test_nodes_must_name_nodes(value):
    with pytest.raises(OptionError, match="nodes must name at least one node"):
        q.check_nodes(value)


def test_nodes_keep_their_order_without_repeats():
    assert q.check_nodes(["b", "a", "b"]) == ["b", "a"]


def test_reason_must_be_said():
    with pytest.raises(OptionError, match="reason must be a non-empty string"):
        check_text("  ", "reason")
