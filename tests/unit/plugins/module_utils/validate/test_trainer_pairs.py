"""Kubeflow Trainer runtimes judged as the TrainJobs of the same run fill them."""

import copy
import io
import json
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.trainer_runtimes import (
    RuntimeKey,
    fill_runtime,
    given_path,
    referenced_runtime,
    runtime_key,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate import cli as validate_cli
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.batches import (
    BatchResult,
    compact_scan,
    merge_batch,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import PodChecker, RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import (
    DocumentScan,
    finish_scan,
    scan_documents,
    validate_documents,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.env import DocumentEnvSources
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import (
    Document,
    Manifests,
    parse_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.reads import live_report

GROUP = "trainer.kubeflow.org/v1alpha1"
NODE = "spec.template.spec.replicatedJobs[0].template.spec.template.spec"


def runtime(container, kind="ClusterTrainingRuntime", namespace=None, ancestor="trainer", ml_policy=True):
    metadata = {"name": "torch", **({"namespace": namespace} if namespace else {})}
    job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}},
            "spec": {"template": {"spec": {"containers": [container]}}},
        },
    }
    spec = {"template": {"spec": {"replicatedJobs": [job]}}}
    if ml_policy:
        spec["mlPolicy"] = {"numNodes": 1, "torch": {}}
    return {"apiVersion": GROUP, "kind": kind, "metadata": metadata, "spec": spec}


def trainjob(trainer, name="job", runtime_ref=None, namespace=None):
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    ref = runtime_ref or {"name": "torch"}
    return {
        "apiVersion": GROUP,
        "kind": "TrainJob",
        "metadata": metadata,
        "spec": {"runtimeRef": ref, "trainer": trainer},
    }


CUDA_NODE = {"name": "node", "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"}
GPU = {"limits": {"nvidia.com/gpu": 1}}


def findings(*objects):
    documents = [Document("in.yaml", i, obj, i + 1) for i, obj in enumerate(objects)]
    result = validate_documents(documents, RuleConfig())
    return [(f.rule, f.ref.kind, f.path) for f in result.findings], result


def test_a_runtime_ref_defaults_to_a_cluster_runtime_and_a_training_runtime_is_the_trainjobs_namespace():
    assert referenced_runtime(trainjob({}, namespace="a")) == RuntimeKey("ClusterTrainingRuntime", "", "torch")
    named = trainjob({}, namespace="a", runtime_ref={"name": "torch", "kind": "TrainingRuntime"})
    assert referenced_runtime(named) == RuntimeKey("TrainingRuntime", "a", "torch")
    assert runtime_key(runtime(CUDA_NODE, "TrainingRuntime", "a")) == referenced_runtime(named)
    assert runtime_key(runtime(CUDA_NODE, "TrainingRuntime", "b")) != referenced_runtime(named)
    assert referenced_runtime(trainjob({}, runtime_ref={"name": "torch", "apiGroup": "example.com"})) is None


def test_the_trainer_fills_the_node_container_as_the_trainer_builds_it():
    node = {
        "name": "node",
        "image": "runtime-image",
        "env": [{"name": "A", "value": "runtime"}, {"name": "B", "value": "runtime"}],
        "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": 2}},
    }
    job = trainjob(
        {
            "image": "job-image",
            "env": [{"name": "B", "value": "job"}, {"name": "C", "value": "job"}],
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}},
        }
    )
    original = runtime(node)
    kept = copy.deepcopy(original)
    filled = fill_runtime(original, job)
    container = filled.runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert container["image"] == "job-image"
    assert container["env"] == [
        {"name": "A", "value": "runtime"},
        {"name": "B", "value": "job"},
        {"name": "C", "value": "job"},
    ]
    assert container["resources"] == {"limits": {"cpu": "1", "nvidia.com/gpu": 4}}
    assert original == kept
    at = f"{NODE}.containers[0]"
    assert given_path(f"{at}.env[1].value", filled.given) == "spec.trainer.env[0].value"
    assert given_path(f"{at}.env[0].value", filled.given) is None
    assert given_path(f"{at}.image", filled.given) == "spec.trainer.image"
    assert given_path(f"{at}.resources.limits['nvidia.com/gpu']", filled.given) == (
        "spec.trainer.resourcesPerNode.limits['nvidia.com/gpu']"
    )


def test_only_the_trainers_node_container_takes_the_trainer_fields():
    other = {"name": "trainer", "image": "runtime-image"}
    for document in (runtime(other), runtime({**CUDA_NODE, "image": "runtime-image"}, ancestor="dataset-initializer")):
        filled = fill_runtime(document, trainjob({"image": "job-image"}))
        assert filled.runtime == document and filled.given == {}


def test_an_initializer_takes_its_storage_uri_env_and_secret():
    loader = {"name": "dataset-initializer", "image": "loader", "env": [{"name": "STORAGE_URI", "value": "hf://a"}]}
    document = runtime(loader, ancestor="dataset-initializer")
    job = trainjob({})
    job["spec"]["initializer"] = {"dataset": {"storageUri": "hf://b", "secretRef": {"name": "hf"}}}
    filled = fill_runtime(document, job)
    container = filled.runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert container["env"] == [{"name": "STORAGE_URI", "value": "hf://b"}]
    assert container["envFrom"] == [{"secretRef": {"name": "hf"}}]


def test_a_cuda_runtime_filled_with_gpus_per_node_passes_where_alone_it_warns():
    alone = findings(runtime(CUDA_NODE))[0]
    assert alone == [("KGPU501", "ClusterTrainingRuntime", f"{NODE}.containers[0].image")]
    paired, result = findings(runtime(CUDA_NODE), trainjob({"resourcesPerNode": GPU}))
    assert paired == []
    assert len(result.notes) == 2


def test_a_bypass_the_trainjob_adds_is_reported_on_the_trainjob_at_its_field():
    # The runtime gives one GPU; the TrainJob's env widens it to all of the node's GPUs.
    widen = {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    # Alone, the TrainJob's variable reads as GPUs without a limit; with its runtime, as more GPUs than the limit.
    assert findings(trainjob(widen))[0] == [("KGPU101", "TrainJob", "spec.trainer.env[0].value")]
    paired = findings(runtime({**CUDA_NODE, "resources": GPU}), trainjob(widen))[0]
    assert paired == [("KGPU102", "TrainJob", "spec.trainer.env[0].value")]


def test_a_runtime_bypass_is_reported_once_on_the_runtime_for_every_trainjob_that_names_it():
    bypass = {**CUDA_NODE, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    paired, result = findings(runtime(bypass), trainjob({}, "a"), trainjob({}, "b"))
    assert paired == [("KGPU101", "ClusterTrainingRuntime", f"{NODE}.containers[0].env[0].value")]
    assert len([n for n in result.notes if "checked as" in n]) == 2


def test_a_trainjob_whose_runtime_is_elsewhere_is_checked_alone_and_a_runtime_no_trainjob_names_too():
    paired, result = findings(runtime(CUDA_NODE), trainjob({"resourcesPerNode": GPU}, runtime_ref={"name": "other"}))
    assert paired == [("KGPU501", "ClusterTrainingRuntime", f"{NODE}.containers[0].image")]
    assert result.notes == []


def test_a_runtime_and_its_trainjob_in_different_batches_merge_to_the_serial_result():
    files = [("a.yaml", [runtime(CUDA_NODE)]), ("b.yaml", [trainjob({"resourcesPerNode": GPU})])]
    serial = validate_documents(
        [Document(source, i, obj, i + 1) for source, objects in files for i, obj in enumerate(objects)], RuleConfig()
    )
    sources = DocumentEnvSources()
    scan = DocumentScan()
    for source, objects in files:
        batch_sources = DocumentEnvSources()
        documents = [Document(source, i, obj, i + 1) for i, obj in enumerate(objects)]
        batch_scan = compact_scan(scan_documents(documents, PodChecker(RuleConfig(), batch_sources), batch_sources))
        merge_batch(scan, sources, Manifests.of_files([], 1000), BatchResult(batch_scan, batch_sources, [source]))
    merged = finish_scan(scan, PodChecker(RuleConfig(), sources))
    assert merged == serial and merged.findings == [] and len(merged.notes) == 2


# Published runtimes with published TrainJobs that name them, one file per document (see each file's first line).
PAIRS = Path(__file__).resolve().parents[3] / "fixtures" / "manifests" / "custom-resources" / "trainer-pairs"
CTR, TR, TJ = "ClusterTrainingRuntime", "TrainingRuntime", "TrainJob"
IMAGE = f"{NODE}.containers[0].image"
SECOND_JOB_IMAGE = IMAGE.replace("replicatedJobs[0]", "replicatedJobs[1]")
GPU_REQUEST = "spec.trainer.resourcesPerNode.requests['nvidia.com/gpu']"
# Each pair: the findings of its runtimes judged alone (as before) and of the whole run, how many TrainJobs fill a
# runtime of the run, and how many runtime pod specs are judged as a TrainJob fills them.
EXPECTED_PAIRS = {
    # The Trainer's torch-distributed runtime runs a CUDA image; the TrainJobs give it GPUs per node.
    "trainer-torch-distributed-kueue-trainjob": ([("KGPU501", CTR, IMAGE)], [], 1, 1),
    "trainer-torch-distributed-team-trainjobs": ([("KGPU501", CTR, IMAGE)], [], 2, 2),
    # Kueue's TrainJob requests a GPU without a limit; the namespaced runtime's container is not `node`.
    "kueue-trainjobs-runtimes": (
        [("KGPU501", CTR, IMAGE), ("KGPU501", TR, IMAGE)],
        [("KGPU401", TJ, GPU_REQUEST), ("KGPU501", CTR, IMAGE), ("KGPU501", TR, IMAGE)],
        2,
        2,
    ),
    # CPU-only TrainJobs of a CUDA runtime: the warning stands, now for the pods they make.
    "trainer-04-volcano-integration": ([("KGPU501", CTR, IMAGE)], [("KGPU501", CTR, IMAGE)], 1, 1),
    "trainer-05-multi-step": ([("KGPU501", TR, SECOND_JOB_IMAGE)], [("KGPU501", TR, SECOND_JOB_IMAGE)], 1, 2),
}


def pair_documents(name):
    documents = []
    for path in sorted((PAIRS / name).glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert text.startswith("# Source: "), path
        parsed, error = parse_text(text, path.name)
        assert error is None and len(parsed) == 1
        documents += parsed
    return documents


def judged(documents):
    result = validate_documents(documents, RuleConfig())
    return [(f.rule, f.ref.kind, f.path) for f in result.findings], result


def test_every_pair_is_listed():
    assert sorted(p.name for p in PAIRS.iterdir()) == sorted(EXPECTED_PAIRS)


@pytest.mark.parametrize("name", sorted(EXPECTED_PAIRS))
def test_a_published_runtime_is_judged_as_the_published_trainjobs_fill_it(name):
    alone, together, filled, pod_specs = EXPECTED_PAIRS[name]
    documents = pair_documents(name)
    runtimes = [d for d in documents if d.data["kind"] != TJ]
    assert judged(runtimes)[0] == alone
    found, result = judged(documents)
    assert found == together
    assert len([n for n in result.notes if " checked as TrainJob " in n]) == pod_specs
    assert len([n for n in result.notes if "trainer fields checked in" in n]) == filled
    assert result.not_checked == []


def test_the_command_line_pairs_a_runtime_and_its_trainjob_in_other_files_serial_or_in_workers(tmp_path):
    files = sorted(str(p) for p in (PAIRS / "trainer-torch-distributed-team-trainjobs").glob("*.yaml"))
    for jobs in ("1", "2"):
        report = tmp_path / f"report-{jobs}.json"
        out, err = io.StringIO(), io.StringIO()
        code = validate_cli.run(["--jobs", jobs, "--json", str(report), *files], stdout=out, stderr=err)
        assert code == 0, out.getvalue()
        assert json.loads(report.read_text())["findings"] == []
    out = io.StringIO()
    assert validate_cli.run([files[0]], stdout=out, stderr=io.StringIO()) == 0  # a warning alone
    assert "KGPU501" in out.getvalue()


class TrainerCluster:
    """A cluster that serves the Trainer's API and lists the given items (as list responses give them)."""

    def __init__(self, collections):
        self.collections = collections

    def list_items(self, path):
        return iter(copy.deepcopy(self.collections.get(path, [])))

    def get(self, path):
        if path == "/apis":
            version = {"groupVersion": "trainer.kubeflow.org/v1alpha1", "version": "v1alpha1"}
            return {"kind": "APIGroupList", "groups": [{"name": "trainer.kubeflow.org", "versions": [version]}]}
        raise ClusterError(f"GET {path}: 404", 404)


def listed(obj):
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def test_the_live_audit_judges_a_runtime_as_the_trainjobs_it_lists_fill_it():
    base = "/apis/trainer.kubeflow.org/v1alpha1"
    alone = TrainerCluster({f"{base}/clustertrainingruntimes": [listed(runtime(CUDA_NODE))]})
    assert [(f.rule, f.ref.kind) for f in live_report(alone, RuleConfig()).findings] == [("KGPU501", CTR)]
    job = {**listed(trainjob({"resourcesPerNode": GPU})), "metadata": {"name": "job", "namespace": "ml"}}
    paired = TrainerCluster(
        {f"{base}/clustertrainingruntimes": [listed(runtime(CUDA_NODE))], f"{base}/trainjobs": [job]}
    )
    report = live_report(paired, RuleConfig())
    assert report.findings == []
    assert any("checked as TrainJob ml/job (cluster)" in n for n in report.notes)
