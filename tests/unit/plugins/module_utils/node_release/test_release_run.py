"""Running release plans through handed functions: the patch is sent only after the proof pod
Succeeded, the proof pod is deleted whatever its outcome, a pod of the proof's name that is not
the collection's is never touched, a node changed meanwhile is decided again, and the summary."""

from __future__ import annotations

from dataclasses import replace

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import release as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.apply import (
    NodeCalls,
    PodCalls,
    failure_message,
    planned,
    release_all,
    summarize,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    ProofOptions,
    ReleaseNode,
    plan_release,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import (
    QUARANTINE_TAINT,
    RECORD_ANNOTATION,
    Record,
    record_annotation,
)

RECORD = record_annotation(Record("on-call", "XID 79", "2026-12-03T10:00:00Z", cordoned=True))


class Refused(Exception):
    def __init__(self, status: int):
        super().__init__(f"refused with {status}")
        self.status = status


def quarantined(name: str, record: str | None = RECORD) -> ReleaseNode:
    return ReleaseNode(name, True, (dict(QUARANTINE_TAINT),), record, {"nvidia.com/gpu": "8"})


class FakeCluster:
    """Pods that end in the phase given per node, and nodes that take patches."""

    def __init__(self, phases: dict[str, str], foreign: set[str] = frozenset(), refuse: list[int] | None = None):
        self.phases, self.foreign, self.refuse = phases, foreign, list(refuse or [])
        self.pods: dict[str, dict] = {}
        self.log: list[tuple[str, str]] = []

    def pod_calls(self) -> PodCalls:
        def read(namespace: str, name: str) -> dict | None:
            if name in self.foreign:
                return {"metadata": {"name": name, "labels": {"app": "other"}}}
            return self.pods.get(name)

        def create(body: dict) -> None:
            node = body["metadata"]["annotations"]["kubegpu.io/release-proof-node"]
            self.log.append(("create", node))
            self.pods[body["metadata"]["name"]] = {**body, "status": {"phase": self.phases[node]}}

        def delete(namespace: str, name: str) -> None:
            self.log.append(("delete", name))
            self.pods.pop(name, None)

        def wait(probe, done, timeout):
            value = probe()
            return value, done(value)

        return PodCalls(read, create, delete, lambda ns, name: ["step 999", "done"], wait)

    def node_calls(self, reread: dict[str, ReleaseNode] | None = None) -> NodeCalls:
        def send(name: str, patch: list) -> None:
            self.log.append(("patch", name))
            if self.refuse:
                raise Refused(self.refuse.pop(0))

        return NodeCalls(send, (reread or {}).get, lambda node: plan_release(node, ProofOptions()))


def run(cluster: FakeCluster, nodes: list[ReleaseNode], reread: dict[str, ReleaseNode] | None = None):
    plans = [plan_release(n, ProofOptions()) for n in nodes]
    return release_all(plans, cluster.pod_calls(), cluster.node_calls(reread), 60, errors=(Refused,))


def test_a_node_is_patched_only_after_its_proof_succeeded_and_the_proof_pod_is_gone():
    cluster = FakeCluster({"good": "Succeeded", "bad": "Failed"})
    results = run(cluster, [quarantined("good"), quarantined("bad")])
    summary = summarize(results, check_mode=False)
    assert summary["released"] == ["good"]
    assert [h["node"] for h in summary["held"]] == ["bad"]
    held = summary["held"][0]
    assert (held["phase"], held["logs"]) == ("Failed", ["step 999", "done"])
    assert "last log line: done" in held["reason"]
    assert ("patch", "bad") not in cluster.log and ("patch", "good") in cluster.log
    assert cluster.pods == {}, "every proof pod is deleted"
    steps_on_good = [step for step, where in cluster.log if "good" in where]
    assert steps_on_good == ["create", "delete", "patch"]
    assert failure_message(summary).startswith("1 node(s) stay quarantined: bad: proof pod ")


def test_a_proof_still_running_at_the_timeout_holds_the_node():
    cluster = FakeCluster({"slow": "Running"})
    summary = summarize(run(cluster, [quarantined("slow")]), check_mode=False)
    assert [f["kind"] for f in summary["findings"]] == [kinds.PROOF_TIMED_OUT]
    assert summary["released"] == [] and ("patch", "slow") not in cluster.log


def test_a_pod_of_the_proofs_name_that_is_not_the_collections_is_left_alone():
    plan = plan_release(quarantined("gpu-0"), ProofOptions())
    cluster = FakeCluster({"gpu-0": "Succeeded"}, foreign={plan.proof["metadata"]["name"]})
    summary = summarize(run(cluster, [quarantined("gpu-0")]), check_mode=False)
    assert [f["kind"] for f in summary["findings"]] == [kinds.PROOF_POD_IN_THE_WAY]
    assert cluster.log == []


def test_a_node_changed_since_the_read_is_decided_again():
    changed = quarantined("gpu-0", record_annotation(Record("someone", "again", "later", cordoned=True)))
    cluster = FakeCluster({"gpu-0": "Succeeded"}, refuse=[422])
    summary = summarize(run(cluster, [quarantined("gpu-0")], {"gpu-0": changed}), check_mode=False)
    assert summary["released"] == ["gpu-0"]
    assert [step for step, node in cluster.log if step == "patch"] == ["patch", "patch"]


def test_a_node_released_by_someone_else_meanwhile_is_not_patched_again():
    gone = replace(quarantined("gpu-0", None), taints=(), unschedulable=False)
    cluster = FakeCluster({"gpu-0": "Succeeded"}, refuse=[422])
    summary = summarize(run(cluster, [quarantined("gpu-0")], {"gpu-0": gone}), check_mode=False)
    assert summary["not_quarantined"] == ["gpu-0"] and summary["held"] == []


def test_nothing_runs_when_no_node_is_the_collections_to_release():
    cluster = FakeCluster({})
    nodes = [ReleaseNode("free", False, (), None, {}), ReleaseNode("theirs", True, (dict(QUARANTINE_TAINT),), None, {})]
    summary = summarize(run(cluster, nodes), check_mode=False)
    assert cluster.log == []
    assert summary["not_quarantined"] == ["free"] and [n["node"] for n in summary["not_ours"]] == ["theirs"]
    assert failure_message(summary) is None


def test_check_mode_lists_the_plan_and_what_would_be_released():
    plans = [plan_release(quarantined("gpu-0"), ProofOptions())]
    summary = summarize(planned(plans), check_mode=True)
    assert summary["released"] == ["gpu-0"]
    (entry,) = summary["plan"]
    assert entry["verdict"] == "release" and entry["proof_pod"]["kind"] == "Pod"
    assert entry["removes"] == ["taint kubegpu.io/quarantine:NoSchedule", "cordon", f"annotation {RECORD_ANNOTATION}"]
    assert summary["diff"][0]["before_header"] == "node/gpu-0"


def _kept(record: Record, *, unschedulable: bool = True) -> ReleaseNode:
    return ReleaseNode(
        "gpu-3", unschedulable, (dict(QUARANTINE_TAINT),), record_annotation(record), {"nvidia.com/gpu": "8"}
    )


def test_a_release_names_the_cordon_someone_else_set_as_kept():
    record = Record("on-call", "XID 79", "2026-12-03T10:00:00Z", cordoned=False)
    cluster = FakeCluster({"gpu-3": "Succeeded"})
    summary = summarize(run(cluster, [_kept(record)]), check_mode=False)
    assert summary["released"] == ["gpu-3"]
    (finding,) = summary["findings"]
    assert (finding["id"], finding["severity"], finding["where"]) == (kinds.CORDON_KEPT, "info", {"node": "gpu-3"})
    assert finding["message"] == "gpu-3 was already cordoned when it was quarantined: the release leaves it cordoned"
    assert "kubectl uncordon gpu-3" in finding["remedy"]
    assert summary["plan"][0]["keeps"] == [finding["message"]]


def test_a_release_names_the_taint_that_was_there_before_the_quarantine_as_kept():
    record = Record("on-call", "XID 79", "2026-12-03T10:00:00Z", cordoned=True, tainted=False)
    cluster = FakeCluster({"gpu-3": "Succeeded"})
    summary = summarize(run(cluster, [_kept(record)]), check_mode=False)
    assert summary["released"] == ["gpu-3"]
    (finding,) = summary["findings"]
    assert (finding["id"], finding["where"]) == (kinds.TAINT_KEPT, {"node": "gpu-3"})
    assert finding["message"].startswith("gpu-3 carried the taint kubegpu.io/quarantine:NoSchedule before")
    assert "kubectl taint nodes gpu-3 kubegpu.io/quarantine:NoSchedule-" in finding["remedy"]


def test_a_node_without_the_gpu_resource_is_held_without_a_proof_pod():
    bare = ReleaseNode("cpu-0", True, (dict(QUARANTINE_TAINT),), RECORD, {"cpu": "64"})
    cluster = FakeCluster({})
    summary = summarize(run(cluster, [bare]), check_mode=False)
    assert cluster.log == [], "no proof pod, no patch"
    (finding,) = summary["findings"]
    assert (finding["id"], finding["severity"], finding["where"]) == (kinds.NO_GPU_TO_PROVE, "error", {"node": "cpu-0"})
    assert "cpu-0 has no nvidia.com/gpu in its capacity" in finding["message"]
    assert [h["node"] for h in summary["held"]] == ["cpu-0"]
    assert failure_message(summary).startswith("1 node(s) stay quarantined: cpu-0: cpu-0 has no nvidia.com/gpu")


def test_a_proof_pod_the_api_server_refuses_holds_the_node_and_names_the_error():
    cluster = FakeCluster({"gpu-0": "Succeeded"})
    pods = cluster.pod_calls()

    def refuse(body: dict) -> None:
        raise Refused(403)

    plans = [plan_release(quarantined("gpu-0"), ProofOptions())]
    results = release_all(plans, replace(pods, create=refuse), cluster.node_calls(), 60, errors=(Refused,))
    summary = summarize(results, check_mode=False)
    assert ("patch", "gpu-0") not in cluster.log and summary["released"] == []
    (finding,) = summary["findings"]
    pod = f"{plans[0].proof['metadata']['namespace']}/{plans[0].proof['metadata']['name']}"
    assert (finding["id"], finding["where"]) == (kinds.PROOF_NOT_RUN, {"node": "gpu-0", "pod": pod})
    assert (
        finding["message"] == f"the proof pod {pod} could not be run on gpu-0: refused with 403; it stays quarantined"
    )
    assert summary["held"][0]["node"] == "gpu-0"


def test_a_release_patch_the_api_server_refuses_holds_the_node_after_a_passed_proof():
    cluster = FakeCluster({"gpu-0": "Succeeded"}, refuse=[403])
    summary = summarize(run(cluster, [quarantined("gpu-0")]), check_mode=False)
    assert summary["released"] == [] and ("patch", "gpu-0") in cluster.log
    assert cluster.pods == {}, "the proof pod is deleted"
    (finding,) = summary["findings"]
    assert (finding["id"], finding["severity"], finding["where"]) == (kinds.PATCH_FAILED, "error", {"node": "gpu-0"})
    assert (
        finding["message"] == "the proof passed, but the patch of gpu-0 failed: refused with 403; it stays quarantined"
    )
    assert summary["held"][0]["node"] == "gpu-0"
