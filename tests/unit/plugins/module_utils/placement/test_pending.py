"""Why a pending GPU pod is pending: the scheduler's words per node, their sum, one sentence."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from fleets import GPU, GPU_CLASS, IS_GPU, build, claim, dra_objects, dra_slice, node, pod

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.dra import unserved_resource_note
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.options import placement_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.pending import explain_pending
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.result import with_findings

A10 = {"accelerator": "NVIDIA-A10"}
H100 = {"accelerator": "NVIDIA-H100"}
DRA_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "dra"


def explained(nodes, pods, dra=None):
    fleet, pending = build(nodes, pods, dra)
    return {e["pod"]: e for e in with_findings(explain_pending(pending, fleet, IS_GPU))}


def kinds(entry):
    return [f["kind"] for f in entry["findings"]]


def test_the_sum_is_written_as_the_scheduler_writes_it():
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    nodes = [node("c", 4, cordoned=True), node("t", 4, taints=[taint]), node("small", 2), node("cpu", None)]
    (entry,) = explained(nodes, [pod("want", 4)]).values()
    assert entry["message"] == (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, "
        "2 Insufficient nvidia.com/gpu."
    )
    assert kinds(entry) == ["placement.not_enough_gpus"]
    assert (
        entry["reason"]
        == "it asks for 4 nvidia.com/gpu; only 2 are free on the nodes it may use, at most 2 on one (small)"
    )


def test_enough_in_total_but_fragmented_names_the_best_node():
    nodes = [node("a", 8), node("b", 8)]
    pods = [pod("x", 5, node_name="a"), pod("y", 4, node_name="b"), pod("want", 6)]
    entry = explained(nodes, pods)["ml/want"]
    assert kinds(entry) == ["placement.fragmented"]
    assert "7 are free on the nodes it may use, at most 4 on one (b)" in entry["reason"]
    assert "Ask for at most 4 per pod" in entry["remedy"]


def test_a_selector_for_a_model_no_node_has_names_the_models_that_exist():
    nodes = [node("a", 8, labels=A10), node("h", 8, labels=H100)]
    entry = explained(nodes, [pod("want", 1, selector={"accelerator": "NVIDIA-B200"})])["ml/want"]
    assert kinds(entry) == ["placement.selector_matches_no_node"]
    assert entry["reason"] == (
        "it selects accelerator=NVIDIA-B200, which no GPU node carries; the values that exist: "
        "accelerator: NVIDIA-A10, NVIDIA-H100"
    )
    assert entry["reasons"] == {"node(s) didn't match Pod's node affinity/selector": 2}


def test_a_model_selector_on_a_key_no_node_carries_names_the_models_that_exist():
    # Nodes labeled by GPU feature discovery only; the pod selects the ACK guide's accelerator label.
    gfd = [node(n, 8, labels={"nvidia.com/gpu.product": m}) for n, m in (("a", "NVIDIA-A10"), ("l", "NVIDIA-L4"))]
    plain = node("cpu", None)
    entry = explained([*gfd, plain], [pod("want", 1, selector={"accelerator": "NVIDIA-B200"})])["ml/want"]
    assert kinds(entry) == ["placement.selector_matches_no_node"]
    assert entry["reason"] == (
        "it selects accelerator=NVIDIA-B200, which no GPU node carries; the values that exist: "
        "accelerator: no GPU node has it (the GPU models there are: NVIDIA-A10, NVIDIA-L4)"
    )
    assert entry["reasons"] == {"node(s) didn't match Pod's node affinity/selector": 3}
    bare = explained([plain], [pod("want", 1, selector={"accelerator": "NVIDIA-B200"})])["ml/want"]
    assert "no GPU node has it" in bare["reason"] and "models" not in bare["reason"]


def test_taints_and_cordons_on_every_selected_node():
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    nodes = [node("a", 8, labels=A10, taints=[taint]), node("b", 8, labels=A10, cordoned=True)]
    entry = explained(nodes, [pod("want", 1, selector=A10)])["ml/want"]
    assert kinds(entry) == ["placement.taints_not_tolerated"]
    assert "{nvidia.com/gpu: present}" in entry["reason"]
    tolerated = pod("ok", 1, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    entry = explained(nodes, [tolerated])["ml/ok"]
    assert kinds(entry) == ["placement.fits_now"] and entry["fits_on"] == {"a": 8}
    cordoned = explained([node("b", 8, cordoned=True)], [pod("want", 1)])["ml/want"]
    assert kinds(cordoned) == ["placement.nodes_cordoned"]


def test_cpu_short_with_gpus_free_says_what_is_short():
    nodes = [node("a", 8, cpu="4")]
    entry = explained(nodes, [pod("want", 2, cpu="8")])["ml/want"]
    assert entry["reasons"] == {"Insufficient cpu": 1}
    assert kinds(entry) == ["placement.resources_short"] and "Insufficient cpu" in entry["reason"]


def test_pod_slots_full():
    entry = explained([node("a", 8, pods="1")], [pod("there", 0, node_name="a"), pod("want", 1)])["ml/want"]
    assert entry["reasons"] == {"Too many pods": 1}


def test_dra_extended_resource_and_claims():
    dra = dra_objects(
        slices=[dra_slice("d", 4)],
        claims=[claim("held", 2, "d", ["gpu-0", "gpu-1"]), claim("big", 3), claim("fits", 2)],
    )
    # A device-plugin node with 2 free GPUs beside the DRA node: claims cannot use them.
    nodes = [node("d", None), node("dp", 2)]
    pods = [pod("ext", 2), pod("ext-big", 3), pod("claim-big", claims=["big"]), pod("claim-ok", claims=["fits"])]
    found = explained(nodes, pods, dra)
    assert found["ml/ext"]["fits_on"] == {"d": 1, "dp": 1}
    assert found["ml/ext-big"]["reasons"] == {"cannot allocate all claims": 1, "Insufficient nvidia.com/gpu": 1}
    assert kinds(found["ml/claim-big"]) == ["placement.claims_unallocatable"]
    assert found["ml/claim-big"]["reasons"] == {"cannot allocate all claims": 2}
    assert found["ml/claim-ok"]["fits_on"] == {"d": 1}


def test_dra_gpus_no_class_serves_as_an_extended_resource_are_out_of_its_reach():
    """As on 1.34 (DRAExtendedResource off): the class has no extendedResourceName, so a pod that asks for
    nvidia.com/gpu cannot get the DRA node's 4 free GPUs; the sentence counts none there."""
    unmapped = {"metadata": GPU_CLASS["metadata"], "spec": {"selectors": GPU_CLASS["spec"]["selectors"]}}
    dra = dra_objects(slices=[dra_slice("d", 4)], classes=[unmapped])
    entry = explained([node("d", None)], [pod("ext", 1)], dra)["ml/ext"]
    assert entry["reasons"] == {"Insufficient nvidia.com/gpu": 1}
    assert kinds(entry) == ["placement.not_enough_gpus"]
    assert entry["reason"].startswith("it asks for 1 nvidia.com/gpu; only 0 are free on the nodes it may use")
    # Where the class serves it, the same node's GPUs are in reach.
    served = explained([node("d", None)], [pod("ext", 1)], dra_objects(slices=[dra_slice("d", 4)]))["ml/ext"]
    assert served["fits_on"] == {"d": 4}


def test_dra_gpus_no_class_serves_are_named_once_in_a_note():
    unmapped = {"metadata": GPU_CLASS["metadata"], "spec": {"selectors": GPU_CLASS["spec"]["selectors"]}}
    nodes = [node("d", None), node("dp", 2)]
    fleet, _pending = build(nodes, [], dra_objects(slices=[dra_slice("d", 4)], classes=[unmapped]))
    note = unserved_resource_note(fleet.dra, GPU, fleet.nodes)
    assert note is not None and note.startswith("no DeviceClass serves nvidia.com/gpu (spec.extendedResourceName;")
    assert "on 1 node(s) (d); they need a ResourceClaim" in note
    # A class that serves it, or a fleet without DRA GPUs: nothing to say.
    fleet, _pending = build(nodes, [], dra_objects(slices=[dra_slice("d", 4)]))
    assert unserved_resource_note(fleet.dra, GPU, fleet.nodes) is None
    fleet, _pending = build([node("dp", 2)], [], dra_objects(classes=[unmapped]))
    assert unserved_resource_note(fleet.dra, GPU, fleet.nodes) is None


def test_what_cannot_be_known_is_said():
    other = pod("custom", 1, schedulerName="volcano")
    ported = pod("ported", 1)
    ported["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    found = explained([node("a", 8)], [other, ported])
    assert kinds(found["ml/custom"]) == ["placement.other_scheduler", "placement.fits_now"]
    assert found["ml/custom"]["reason"].startswith("1 nvidia.com/gpu per pod fits now")
    assert kinds(found["ml/ported"]) == ["placement.fits_now", "placement.not_modelled"]


def test_pods_without_gpus_are_not_explained():
    assert explained([node("a", 8)], [pod("plain", 0, cpu="1")]) == {}


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"sizes": [0]}, "sizes must be"),
        ({"shape": {"cpu": "lots"}}, "shape.cpu must be a Kubernetes quantity"),
        ({"shape": {"tolerations": [{"key": "x", "operator": "Maybe"}]}}, "operator must be Exists or Equal"),
    ],
)
def test_bad_options_are_named(kwargs, words):
    with pytest.raises(OptionError, match=words):
        placement_options(**kwargs)


def test_nodes_alike_but_for_their_name_are_told_apart_by_a_hostname_selector_and_by_what_is_free():
    nodes = [node("a", 8, labels=A10), node("b", 8, labels=A10)]
    pods = [pod("x", 7, node_name="a"), pod("anywhere", 2), pod("pinned", 1, selector={"kubernetes.io/hostname": "a"})]
    found = explained(nodes, pods)
    assert found["ml/anywhere"]["fits_on"] == {"b": 4}
    assert found["ml/pinned"]["fits_on"] == {"a": 1}
    pinned_big = explained(nodes, [pod("x", 7, node_name="a"), pod("big", 2, selector={"kubernetes.io/hostname": "a"})])
    assert pinned_big["ml/big"]["reasons"] == {
        "Insufficient nvidia.com/gpu": 1,
        "node(s) didn't match Pod's node affinity/selector": 1,
    }


def test_a_pod_whose_template_claim_is_not_made_yet_says_what_it_asks_for_is_not_known():
    """The DRA driver's quickstart pod as the API server holds it before kube-controller-manager
    made its claim from the template: no resourceClaimStatuses yet."""
    items = yaml.safe_load((DRA_FIXTURES / "demo-claimtemplate-pods.yaml").read_text())["items"]
    published = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "pod1")
    waiting = {**copy.deepcopy(published), "status": {"phase": "Pending"}}
    made = copy.deepcopy(waiting)
    made["metadata"]["name"] = "pod2"
    made["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "pod2-gpu-x7k2p"}]
    found = explained([node("d", None)], [waiting, made], dra_objects(slices=[dra_slice("d", 4)]))
    entry = found["gpu-test1/pod1"]
    (note,) = [f for f in entry["findings"] if f["id"] == "placement.claims_not_made"]
    assert (note["severity"], note["where"]) == ("info", {"pod": "gpu-test1/pod1"})
    assert note["message"] == "its ResourceClaim templates have no claims yet, so what they ask for is not known here"
    assert "kube-controller-manager" in note["remedy"]
    assert entry["reason"] != note["message"], "the note is not the sentence"
    assert "placement.claims_not_made" not in kinds(found["gpu-test1/pod2"])
