"""The GPU health event source's decisions: a Node in, a transition or nothing out. Heartbeats give no
event, each class change gives one, a relist after an expired watch gives each change meanwhile once
and every deletion, the pool's share out and the breaker's verdict, and the release hold."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.transitions import (
    DELETED,
    HEALTHY_FOR,
    SEEN_IN_RELIST,
    SEEN_ON_WATCH,
    TRANSITION,
    Holds,
    change_of,
    due,
    healthy_for_event,
    next_due,
    observe,
    relist,
    transition_event,
    update_hold,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.views import (
    ViewOptions,
    view_of,
    view_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import (
    DEGRADED,
    FAILED,
    HEALTHY,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT,
    RECORD_ANNOTATION,
    Record,
    record_annotation,
)

MODEL = "NVIDIA-A100-SXM4-80GB"
OPTIONS = ViewOptions()


def node(name="gpu-1", *, gpus=8, allocatable=None, conditions=(), taints=(), heartbeat="2026-12-05T10:00:00Z", **spec):
    """A Node as the API server returns it, with the kubelet's Ready condition and its heartbeat time."""
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }
    capacity = {"nvidia.com/gpu": str(gpus), "cpu": "64"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": "100",
            "labels": {"nvidia.com/gpu.product": MODEL, "kubernetes.io/hostname": name},
            "annotations": spec.pop("annotations", {}),
        },
        "spec": {"taints": list(taints), **spec},
        "status": {
            "capacity": capacity,
            "allocatable": {**capacity, "nvidia.com/gpu": str(gpus if allocatable is None else allocatable)},
            "conditions": [ready, *conditions],
        },
    }


def xid(status="True", heartbeat="2026-12-05T10:00:00Z"):
    return {
        "type": "XidCriticalError",
        "status": status,
        "reason": '{"79": 1}',
        "message": "GPU has fallen off the bus",
        "lastHeartbeatTime": heartbeat,
    }


def heartbeat_of(item, when, version):
    """The same node after a heartbeat: new heartbeat times, a new resourceVersion, nothing else."""
    beat = copy.deepcopy(item)
    beat["metadata"]["resourceVersion"] = version
    for condition in beat["status"]["conditions"]:
        condition["lastHeartbeatTime"] = when
    return beat


def quarantined(item):
    """The node as the quarantine leaves it: cordoned, tainted, recorded."""
    done = copy.deepcopy(item)
    done["spec"]["unschedulable"] = True
    done["spec"]["taints"] = [*done["spec"]["taints"], dict(QUARANTINE_TAINT)]
    record = Record("kubegpu.scheduling.gpu_health", "XID 79", "2026-12-05T10:00:00Z", True, True)
    done["metadata"]["annotations"][RECORD_ANNOTATION] = record_annotation(record)
    return done


def test_a_node_without_gpus_is_no_gpu_node():
    plain = node()
    plain["metadata"]["labels"] = {}
    plain["status"]["capacity"] = plain["status"]["allocatable"] = {"cpu": "8"}
    assert view_of(plain) is None
    assert view_of({"kind": "Node"}) is None


def test_heartbeats_alone_give_no_event_and_change_nothing_known():
    known = {}
    first = node(conditions=[xid("False")])
    assert observe(known, "gpu-1", view_of(first)) is None  # a new healthy node: nothing to say
    stored = known["gpu-1"]
    for second in range(1, 20):
        beat = heartbeat_of(first, f"2026-12-05T10:00:{second:02d}Z", str(100 + second))
        assert observe(known, "gpu-1", view_of(beat)) is None
        assert known["gpu-1"] is stored


def test_a_failed_node_keeps_failing_through_heartbeats_without_more_events():
    known = {"gpu-1": view_of(node())}
    failing = node(conditions=[xid()])
    change = observe(known, "gpu-1", view_of(failing))
    assert (change.from_health, change.to_health) == (HEALTHY, FAILED)
    for second in range(1, 10):
        assert observe(known, "gpu-1", view_of(heartbeat_of(failing, f"2026-12-05T10:01:{second:02d}Z", "x"))) is None


def test_a_different_problem_of_the_same_class_gives_no_event():
    known = {"gpu-1": view_of(node(conditions=[xid()]))}
    other = node(taints=[{"key": "nvidia.com/gpu-xid-error", "effect": "NoSchedule"}])
    assert observe(known, "gpu-1", view_of(other)) is None
    assert known["gpu-1"].problems[0].kind == "gpu_health_taint"


@pytest.mark.parametrize(
    ("before", "after", "classes"),
    [
        (node(), node(conditions=[xid()]), (HEALTHY, FAILED)),
        (node(conditions=[xid()]), node(conditions=[xid("False")]), (FAILED, HEALTHY)),
        (node(), node(allocatable=6), (HEALTHY, DEGRADED)),
        (node(allocatable=6), node(allocatable=0), (DEGRADED, FAILED)),
        (node(allocatable=0), node(), (FAILED, HEALTHY)),
    ],
)
def test_each_class_change_gives_one_event(before, after, classes):
    known = {"gpu-1": view_of(before)}
    change = observe(known, "gpu-1", view_of(after))
    assert (change.from_health, change.to_health) == classes
    assert observe(known, "gpu-1", view_of(after)) is None
    event = transition_event(change, known, OPTIONS, SEEN_ON_WATCH, act=False)
    assert (event["type"], event["node"], event["from"], event["to"]) == (TRANSITION, "gpu-1", *classes)
    assert event["pool"] == f"model={MODEL}" and event["act"] is False


def test_the_event_names_the_problems_in_the_registry_s_words():
    known = {"gpu-1": view_of(node())}
    change = observe(known, "gpu-1", view_of(node(conditions=[xid()])))
    event = transition_event(change, known, OPTIONS, SEEN_ON_WATCH, act=True)
    (problem,) = event["problems"]
    assert problem["kind"] == "gpu_health_condition" and problem["status"] == FAILED
    assert "XidCriticalError" in problem["message"]
    assert event["summary"] == "GPU node gpu-1 healthy to failed: GPU health condition reported"
    assert event["act"] is True


def test_a_deleted_node_says_so_and_a_new_node_only_when_not_healthy():
    known = {"gpu-1": view_of(node())}
    gone = observe(known, "gpu-1", None)
    assert gone.to_health == DELETED and "gpu-1" not in known
    event = transition_event(gone, known, OPTIONS, SEEN_ON_WATCH, act=False)
    assert (event["from"], event["to"], event["problems"]) == (HEALTHY, DELETED, [])
    assert observe(known, "gpu-2", view_of(node("gpu-2"))) is None
    new = observe(known, "gpu-3", view_of(node("gpu-3", conditions=[xid()])))
    assert (new.from_health, new.to_health) == (None, FAILED)
    assert change_of(None, None) is None


def test_relist_gives_each_change_meanwhile_once_no_duplicate_no_loss_and_deletions():
    before = {n: view_of(node(n)) for n in ("a", "b", "c", "d")}
    before["b"] = view_of(node("b", conditions=[xid()]))
    fresh_nodes = [
        heartbeat_of(node("a"), "2026-12-05T11:00:00Z", "900"),  # heartbeats only: nothing
        node("b", conditions=[xid("False")]),  # recovered meanwhile
        node("c", conditions=[xid()]),  # failed meanwhile
        # d deleted meanwhile
        node("e", allocatable=4),  # new, degraded
        node("f"),  # new, healthy: nothing
    ]
    now, changes = relist(before, [view_of(n) for n in fresh_nodes])
    assert [(c.node, c.from_health, c.to_health) for c in changes] == [
        ("b", FAILED, HEALTHY),
        ("c", HEALTHY, FAILED),
        ("d", HEALTHY, DELETED),
        ("e", None, DEGRADED),
    ]
    assert sorted(now) == ["a", "b", "c", "e", "f"]
    # The same list again: nothing happened since.
    assert relist(now, [view_of(n) for n in fresh_nodes])[1] == []
    event = transition_event(changes[1], now, OPTIONS, SEEN_IN_RELIST, act=False)
    assert event["seen"] == SEEN_IN_RELIST


def test_the_pool_share_counts_nodes_not_healthy_or_cordoned():
    known = {}
    for name, item in (
        ("a", node("a")),
        ("b", node("b", unschedulable=True)),  # cordoned by someone
        ("c", node("c", allocatable=4)),  # degraded
        ("d", node("d")),
    ):
        observe(known, name, view_of(item))
    other = node("x")
    other["metadata"]["labels"]["nvidia.com/gpu.product"] = "Tesla-T4"
    observe(known, "x", view_of(other))
    change = observe(known, "a", view_of(node("a", conditions=[xid()])))
    event = transition_event(change, known, OPTIONS, SEEN_ON_WATCH, act=False)
    assert (event["pool_gpus"], event["pool_gpus_out"], event["pool_share_out"]) == (32, 24, 0.75)
    # The breaker counts only what is cordoned or quarantined: 8 of 32, and a's 8 make 16, the limit.
    assert event["breaker_holds"] is False and event["breaker"] == ""


def test_the_event_says_when_the_breaker_holds():
    known = {}
    for name in "abcd":
        observe(known, name, view_of(quarantined(node(name, conditions=[xid()])) if name in "ab" else node(name)))
    change = observe(known, "c", view_of(node("c", conditions=[xid()])))
    event = transition_event(change, known, OPTIONS, SEEN_ON_WATCH, act=False)
    assert event["breaker_holds"] is True
    assert "24 of its 32 GPUs would be out of service" in event["breaker"]
    assert event["pool_share_out"] == 0.75
    loose = view_options({"max_share": 0.75})
    assert transition_event(change, known, loose, SEEN_ON_WATCH, act=False)["breaker_holds"] is False
    # A node quarantined already is never held back.
    change = observe(known, "a", view_of(quarantined(node("a"))))
    assert transition_event(change, known, OPTIONS, SEEN_ON_WATCH, act=False)["breaker_holds"] is False


def test_pools_follow_pool_by_labels():
    options = view_options({"pool_by": ["model", "pool"]})
    item = node()
    item["metadata"]["labels"]["pool"] = "train"
    assert view_of(item, options).pools == (("model", MODEL), ("pool", "train"))
    with pytest.raises(OptionError, match="pool_by"):
        view_options({"pool_by": []})
    with pytest.raises(OptionError, match="max_share"):
        view_options({"max_share": 2})


def test_the_release_hold_runs_while_a_quarantined_node_stays_healthy_and_is_given_once():
    holds = Holds()
    failed = view_of(quarantined(node(conditions=[xid()])))
    recovered = view_of(quarantined(node()))
    update_hold(holds, "gpu-1", failed, 0)
    assert next_due(holds, 60) is None
    update_hold(holds, "gpu-1", recovered, 10)
    update_hold(holds, "gpu-1", recovered, 30)  # a heartbeat does not restart the stretch
    assert next_due(holds, 60) == 70
    assert due(holds, 69, 60) == []
    assert due(holds, 70, 60) == ["gpu-1"]
    assert due(holds, 200, 60) == [] and next_due(holds, 60) is None
    known = {"gpu-1": recovered}
    event = healthy_for_event(recovered, known, OPTIONS, 60, act=True)
    assert (event["type"], event["node"], event["quarantined"], event["healthy_for"]) == (
        HEALTHY_FOR,
        "gpu-1",
        True,
        60,
    )
    # Failing again ends the stretch; recovering starts a new one, given once more.
    update_hold(holds, "gpu-1", failed, 210)
    update_hold(holds, "gpu-1", recovered, 220)
    assert due(holds, 280, 60) == ["gpu-1"]
    # A healthy node the collection did not quarantine waits for nothing, nor does a released one.
    update_hold(holds, "gpu-2", view_of(node("gpu-2")), 0)
    update_hold(holds, "gpu-1", view_of(node()), 300)
    assert holds.since == {}
