"""Release decisions: only what the record says the collection set is undone (its taint, its
cordon, the record), a human's cordon and a taint that was there before stay, nodes without the
collection's record are left alone; the guarded patch; the proof pod pinned to the node through
the scheduler; and the verdict on the pod, which passes only when it Succeeded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import release as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    PROOF_NODE_ANNOTATION,
    SAMPLE_COMMAND,
    SAMPLE_IMAGE,
    SAMPLE_TOLERATIONS,
    UNSCHEDULABLE_TOLERATION,
    ProofOptions,
    Verdict,
    build_proof_options,
    compact_node,
    finding_dict,
    is_proof_pod,
    judge_proof,
    missing_plan,
    plan_release,
    proof_hit,
    proof_pod,
    proof_pod_name,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT,
    QUARANTINE_TOLERATION,
    RECORD_ANNOTATION,
    Record,
    record_annotation,
)

REPO = Path(__file__).resolve().parents[5]
RECORD_POINTER = "/metadata/annotations/kubegpu.io~1quarantine-record"
OTHER_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node(
    name: str = "gpu-0",
    *,
    unschedulable: bool = False,
    taints: list[dict] | None = None,
    record: Record | str | None = None,
    gpus: str | None = "8",
) -> dict:
    annotations = {"node.alpha.kubernetes.io/ttl": "0"}
    if record is not None:
        annotations[RECORD_ANNOTATION] = record if isinstance(record, str) else record_annotation(record)
    spec: dict = {"taints": taints} if taints else {}
    if unschedulable:
        spec["unschedulable"] = True
    capacity = {"cpu": "64", "memory": "512Gi"} | ({"nvidia.com/gpu": gpus} if gpus is not None else {})
    return {"metadata": {"name": name, "annotations": annotations}, "spec": spec, "status": {"capacity": capacity}}


def plan_of(item: dict, options: ProofOptions | None = None):
    compact = compact_node(item)
    assert compact is not None
    return plan_release(compact, options or ProofOptions())


def ours(cordoned: bool = True, tainted: bool = True) -> Record:
    return Record("on-call", "XID 79", "2026-12-03T10:00:00Z", cordoned=cordoned, tainted=tainted)


def kinds_of(plan) -> list[str]:
    return [hit.kind for hit in plan.hits]


def test_the_sample_defaults_are_the_sample_workload_roles():
    defaults = yaml.safe_load((REPO / "roles/sample_workload/defaults/main.yml").read_text())
    assert defaults["sample_workload_image"] == SAMPLE_IMAGE
    assert list(SAMPLE_COMMAND) == defaults["sample_workload_command"]
    assert list(SAMPLE_TOLERATIONS) == defaults["sample_workload_tolerations"]


def test_a_node_quarantined_by_the_collection_loses_its_taint_cordon_and_record_in_one_guarded_patch():
    record = record_annotation(ours())
    plan = plan_of(node(unschedulable=True, taints=[OTHER_TAINT, dict(QUARANTINE_TAINT)], record=record))
    assert plan.verdict is Verdict.RELEASE
    assert plan.removes == ("taint kubegpu.io/quarantine:NoSchedule", "cordon", f"annotation {RECORD_ANNOTATION}")
    assert plan.patch == [
        {"op": "test", "path": RECORD_POINTER, "value": record},
        {"op": "test", "path": "/spec/taints/1", "value": dict(QUARANTINE_TAINT)},
        {"op": "test", "path": "/spec/unschedulable", "value": True},
        {"op": "remove", "path": "/spec/taints/1"},
        {"op": "remove", "path": "/spec/unschedulable"},
        {"op": "remove", "path": RECORD_POINTER},
    ]
    assert plan.hits == ()
    assert "taint: kubegpu.io/quarantine:NoSchedule" in plan.before and "unschedulable: true" in plan.before
    assert plan.after == "unschedulable: false\ntaint: nvidia.com/gpu=present:NoSchedule\n"


def test_a_cordon_that_was_there_before_the_quarantine_stays():
    plan = plan_of(node(unschedulable=True, taints=[dict(QUARANTINE_TAINT)], record=ours(cordoned=False)))
    assert plan.verdict is Verdict.RELEASE
    assert "cordon" not in plan.removes
    assert not any(op["path"] == "/spec/unschedulable" for op in plan.patch or [])
    assert kinds_of(plan) == [kinds.CORDON_KEPT]
    assert plan.after.startswith("unschedulable: true\n")


def test_a_taint_of_the_key_that_was_there_before_the_quarantine_stays():
    plan = plan_of(node(unschedulable=True, taints=[dict(QUARANTINE_TAINT)], record=ours(tainted=False)))
    assert plan.removes == ("cordon", f"annotation {RECORD_ANNOTATION}")
    assert not any(op["path"].startswith("/spec/taints") for op in plan.patch or [])
    assert kinds_of(plan) == [kinds.TAINT_KEPT]


def test_marks_someone_else_already_removed_are_not_removed_again():
    plan = plan_of(node(record=ours()))
    assert plan.verdict is Verdict.RELEASE
    assert plan.removes == (f"annotation {RECORD_ANNOTATION}",)
    assert plan.patch == [
        {"op": "test", "path": RECORD_POINTER, "value": record_annotation(ours())},
        {"op": "remove", "path": RECORD_POINTER},
    ]


@pytest.mark.parametrize(
    "item, verdict, kind",
    [
        (node(), Verdict.NOT_QUARANTINED, kinds.NOT_QUARANTINED),
        (node(unschedulable=True), Verdict.NOT_QUARANTINED, kinds.NOT_QUARANTINED),
        (node(taints=[dict(QUARANTINE_TAINT)]), Verdict.NOT_OURS, kinds.NOT_OURS),
        (node(record="not json", unschedulable=True), Verdict.NOT_OURS, kinds.NOT_OURS),
        # A record that does not say whether the collection cordoned the node proves nothing.
        (node(record='{"by":"x","reason":"y","at":"z"}', unschedulable=True), Verdict.NOT_OURS, kinds.NOT_OURS),
    ],
)
def test_a_node_without_the_collections_record_is_not_touched(item, verdict, kind):
    plan = plan_of(item)
    assert (plan.verdict, plan.patch, plan.proof, kinds_of(plan)) == (verdict, None, None, [kind])


def test_findings_say_what_stays_and_how_to_lift_it_by_hand():
    cordoned = finding_dict(plan_of(node(unschedulable=True)).hits[0])
    assert cordoned["message"].endswith("(it is cordoned, by someone else: it stays cordoned)")
    tainted = finding_dict(plan_of(node(taints=[dict(QUARANTINE_TAINT)])).hits[0])
    assert tainted["severity"] == "warning" and tainted["node"] == "gpu-0"
    assert "kubectl taint nodes gpu-0 kubegpu.io/quarantine:NoSchedule-" in tainted["remedy"]
    missing = finding_dict(missing_plan("gone-0").hits[0])
    assert (missing["kind"], missing["severity"]) == (kinds.NO_SUCH_NODE, "warning")


def test_a_node_without_the_gpu_resource_cannot_be_proven_and_stays():
    plan = plan_of(node(gpus=None, unschedulable=True, taints=[dict(QUARANTINE_TAINT)], record=ours()))
    assert (plan.verdict, plan.patch, plan.proof) == (Verdict.CANNOT_PROVE, None, None)
    assert kinds_of(plan) == [kinds.NO_GPU_TO_PROVE]
    assert plan.after == plan.before


def test_the_proof_pod_is_the_sample_pinned_to_the_node_tolerating_quarantine_and_cordon():
    plan = plan_of(node("gpu-7", unschedulable=True, taints=[dict(QUARANTINE_TAINT)], record=ours()))
    pod = plan.proof
    assert pod is not None
    spec = pod["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-7"]}]}]
    assert "nodeName" not in spec and "nodeSelector" not in spec
    assert spec["tolerations"] == [*SAMPLE_TOLERATIONS, QUARANTINE_TOLERATION, UNSCHEDULABLE_TOLERATION]
    (container,) = spec["containers"]
    assert (container["image"], container["command"]) == (SAMPLE_IMAGE, list(SAMPLE_COMMAND))
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert spec["restartPolicy"] == "Never"
    assert pod["metadata"]["namespace"] == "kubegpu-release-proof"
    assert is_proof_pod(pod, "gpu-7") and not is_proof_pod(pod, "gpu-8")


def test_proof_options_override_the_sample_and_are_checked():
    options = build_proof_options(
        {"image": "busybox", "command": ["true"], "gpus": 1, "tolerations": [], "annotations": {"a": "b"}}, "ns"
    )
    pod = proof_pod("gpu-0", 1, options)
    assert pod["spec"]["containers"][0]["command"] == ["true"]
    assert pod["spec"]["tolerations"] == [QUARANTINE_TOLERATION, UNSCHEDULABLE_TOLERATION]
    assert pod["metadata"]["annotations"] == {"a": "b", PROOF_NODE_ANNOTATION: "gpu-0"}
    assert build_proof_options(None).command == SAMPLE_COMMAND
    for bad, named in (
        ({"gpus": 0}, "proof.gpus"),
        ({"command": []}, "proof.command"),
        ({"resource": "gpu"}, "proof.resource"),
        ({"annotations": {"a": 1}}, "proof.annotations"),
        ({"tolerations": ["x"]}, "proof.tolerations"),
    ):
        with pytest.raises(OptionError, match=named):
            build_proof_options(bad)


@pytest.mark.parametrize("name", ["gpu-0", "ip-10-0-0-1.ec2.internal", "A" * 253, "x" * 40 + ".y"])
def test_proof_pod_names_are_valid_and_differ_per_node(name):
    pod_name = proof_pod_name(name)
    assert len(pod_name) <= 63 and pod_name == pod_name.lower()
    assert all(part and part[0].isalnum() and part[-1].isalnum() for part in pod_name.split("."))
    assert proof_pod_name(name + "1") != pod_name


def _pod(phase: str, state: dict | None = None, conditions: list | None = None) -> dict:
    status: dict = {"phase": phase, "conditions": conditions or []}
    if state is not None:
        status["containerStatuses"] = [{"name": "proof", "state": state}]
    return {"status": status}


def test_the_proof_passes_only_when_its_pod_succeeded():
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    assert judge_proof(_pod("Succeeded", done), True).passed
    assert not judge_proof(_pod("Running", {"running": {}}), False).passed
    gone = judge_proof(None, True)
    assert not gone.passed and not gone.timed_out
    assert finding_dict(proof_hit("gpu-0", "ns/p", gone, 60))["kind"] == kinds.PROOF_FAILED


def test_a_failed_proof_names_its_exit_and_last_log_line():
    failed = _pod("Failed", {"terminated": {"exitCode": 3, "reason": "Error", "message": "CUDA error: XID 79"}})
    outcome = judge_proof(failed, True, ["step 1", "CUDA error"])
    assert (outcome.passed, outcome.phase, outcome.exit_code, outcome.exit_reason) == (False, "Failed", 3, "Error")
    finding = finding_dict(proof_hit("gpu-0", "ns/p", outcome, 60))
    assert finding["kind"] == kinds.PROOF_FAILED and finding["pod"] == "ns/p"
    assert "exit code 3, Error, CUDA error: XID 79" in finding["message"]
    assert "last log line: CUDA error" in finding["message"]


def test_a_proof_that_was_never_scheduled_times_out_with_the_schedulers_reason():
    unscheduled = [
        {"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available: 1 Insufficient nvidia.com/gpu"}
    ]
    outcome = judge_proof(_pod("Pending", conditions=unscheduled), False)
    assert outcome.timed_out and not outcome.passed
    finding = finding_dict(proof_hit("gpu-0", "ns/p", outcome, 30))
    assert finding["kind"] == kinds.PROOF_TIMED_OUT
    assert (
        "never scheduled onto gpu-0 in 30s (0/3 nodes are available: 1 Insufficient nvidia.com/gpu)"
        in (finding["message"])
    )
    assert "still Pending on" not in finding["message"]


def test_a_proof_bound_to_its_node_but_not_started_is_still_pending_there():
    pulling = {**_pod("Pending", {"waiting": {"reason": "ErrImagePull", "message": "pull access denied"}})}
    pulling["spec"] = {"nodeName": "gpu-0"}
    outcome = judge_proof(pulling, False)
    assert outcome.scheduled and outcome.timed_out
    finding = finding_dict(proof_hit("gpu-0", "ns/p", outcome, 30))
    assert "proof pod ns/p was still Pending on gpu-0 after 30s (pull access denied)" in finding["message"]


def test_every_release_kind_is_registered():
    declared = {value for value in vars(kinds).values() if isinstance(value, str) and value.startswith("release.")}
    assert {k.id for k in KINDS.of_check("release")} == declared == {k.id for k in kinds.KINDS}


# The PodScheduled conditions of a pod that was never scheduled, as kubernetes writes them (kubernetes/kubernetes
# pkg/scheduler/schedule_one.go: reason Unschedulable with the FitError's message; pkg/registry/core/pod/strategy.go,
# applySchedulingGatedCondition: reason SchedulingGated with its fixed message).
UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, "
    "3 Preemption is not helpful for scheduling.",
}
GATED = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
}


def test_a_proof_never_scheduled_says_why_in_the_schedulers_reason_and_message():
    outcome = judge_proof(_pod("Pending", conditions=[UNSCHEDULABLE]), False)
    assert not outcome.scheduled
    message = finding_dict(proof_hit("gpu-0", "ns/p", outcome, 30))["message"]
    assert message.startswith(
        "proof pod ns/p was never scheduled onto gpu-0 in 30s (Unschedulable: 0/4 nodes are available: "
        "1 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node affinity/selector."
    )
    gated = finding_dict(proof_hit("gpu-0", "ns/p", judge_proof(_pod("Pending", conditions=[GATED]), False), 30))
    assert (
        "never scheduled onto gpu-0 in 30s (SchedulingGated: Scheduling is blocked due to non-empty"
        in (gated["message"])
    )


def test_a_proof_no_scheduler_has_tried_says_so():
    message = finding_dict(proof_hit("gpu-0", "ns/p", judge_proof(_pod("Pending"), False), 30))["message"]
    assert message == (
        "proof pod ns/p was never scheduled onto gpu-0 in 30s (no scheduler has said why: the pod has no "
        "PodScheduled condition); it stays quarantined"
    )
