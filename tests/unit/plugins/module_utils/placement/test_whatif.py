"""The what-if: would the GPU pods of these manifests fit now, and where."""

from __future__ import annotations

from fleets import IS_GPU, build, node, pod

from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.summary import what_if_summary
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import load_manifests

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: ml}
spec:
  replicas: 3
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      containers:
        - name: main
          image: cuda
          resources: {limits: {nvidia.com/gpu: 4}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: eval, namespace: ml}
spec:
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {accelerator: NVIDIA-B200}
      containers:
        - name: main
          image: cuda
          resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
"""


def run(text, nodes, pods=()):
    fleet, _pending = build(nodes, list(pods))
    return what_if_summary(load_manifests((), text), fleet, IS_GPU)


def test_replicas_are_weighed_against_what_is_free_now():
    nodes = [node("a", 8, labels={"accelerator": "NVIDIA-H100"}), node("b", 8, labels={"accelerator": "NVIDIA-H100"})]
    result = run(DEPLOYMENT, nodes, [pod("x", 4, node_name="b", phase="Running")])
    train, job = result["what_if"]
    assert (train["object"], train["replicas"], train["pods_that_fit"], train["fits"]) == (
        "Deployment ml/train",
        3,
        3,
        True,
    )
    assert train["fits_on"] == {"a": 2, "b": 1} and train["path"] == "spec.template.spec"
    assert (job["object"], job["replicas"], job["fits"]) == ("Job ml/eval", 2, False)
    assert job["reason"].endswith("the values that exist: accelerator: NVIDIA-H100")
    assert job["message"] == "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def test_too_few_free_for_all_replicas_does_not_fit():
    result = run(DEPLOYMENT, [node("a", 8)])
    train = result["what_if"][0]
    assert (train["pods_that_fit"], train["fits"]) == (2, False)


def test_a_claim_template_among_the_manifests_gives_the_claims_devices():
    text = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus, namespace: ml}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}]
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: two-gpus}]
  containers: [{name: main, image: cuda, resources: {claims: [{name: gpu}]}}]
"""
    (entry,) = run(text, [node("a", 8)])["what_if"]
    assert entry["gpus"] == 2 and entry["resource"] is None
    # No DRA devices in this fleet: the claim cannot be allocated on the device-plugin node.
    assert entry["reasons"] == {"cannot allocate all claims": 1} and entry["fits"] is False


def test_a_deployment_of_which_only_some_replicas_fit_says_how_many_and_why_not_the_rest():
    """Two of three 4-GPU replicas fit on the 8-GPU node; the third would stay Pending with the words the
    scheduler's FailedScheduling event sums once the two sit there (the sum is held to the real scheduler's
    in tests/integration/test_placement_oracle.py)."""
    nodes = [
        node("a", 8),
        node("b", 8, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        node("c", None),
    ]
    train = run(DEPLOYMENT, nodes)["what_if"][0]
    assert (train["replicas"], train["pods_that_fit"], train["fits"]) == (3, 2, False)
    assert train["fits_on"] == {"a": 2}
    assert train["reasons"] == {"Insufficient nvidia.com/gpu": 2, "node(s) had untolerated taint(s)": 1}
    assert train["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu."
    )
    assert train["findings"][0]["id"] == "placement.fits_partly"
    assert train["findings"][0]["severity"] == "error"
    assert train["reason"] == (
        "2 of 3 pods of 4 nvidia.com/gpu fit now, on a (2); the other 1 would stay Pending: " + train["message"]
    )
    assert "fits now on" not in train["reason"]


def test_once_the_pods_that_fit_are_placed_a_node_full_of_pod_slots_or_cpu_says_so():
    """The node that takes the pods runs out of what runs out first: pod slots, CPU, or both with the GPUs."""
    deployment = (
        DEPLOYMENT.split("---", maxsplit=1)[0]
        .replace("replicas: 3", "replicas: 5")
        .replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 1")
    )
    cpu = deployment.replace("limits: {nvidia.com/gpu: 1}", "limits: {nvidia.com/gpu: 1}, requests: {cpu: '2'}")
    slots = run(deployment, [node("a", 8, pods="3")])["what_if"][0]
    assert (slots["pods_that_fit"], slots["reasons"]) == (3, {"Too many pods": 1})
    both = run(cpu, [node("a", 2, cpu="4")])["what_if"][0]
    assert both["pods_that_fit"] == 2
    assert both["reasons"] == {"Insufficient cpu": 1, "Insufficient nvidia.com/gpu": 1}


def test_replicas_that_all_fit_or_none_keep_their_sentence():
    fits = run(DEPLOYMENT, [node("a", 8), node("b", 8)])["what_if"][0]
    assert fits["fits"] and fits["findings"][0]["id"] == "placement.fits_now" and fits["message"] == ""
    none = run(DEPLOYMENT, [node("a", 2)])["what_if"][0]
    assert none["pods_that_fit"] == 0 and none["findings"][0]["id"] == "placement.not_enough_gpus"
