"""Pod templates inside custom resources: the table of ML workload kinds, the shape fallback, live listing."""

import io
import json
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.live_objects import (
    live_custom_lists,
    served_group_versions,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workload_kinds import WORKLOAD_KINDS, is_overlay
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import (
    find_pod_spec_shapes,
    iter_containers,
    walk_document,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate import cli as validate_cli
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import parse_text
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.reads import live_report

CUSTOM = Path(__file__).resolve().parents[3] / "fixtures" / "manifests" / "custom-resources"

BAD_CUSTOM = {
    "pytorchjob.yaml": ("KGPU101", "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[1].value"),
    "rayservice.yaml": ("KGPU201", "spec.rayClusterConfig.workerGroupSpecs[0].template.spec.volumes[0].hostPath.path"),
    "volcano-job.yaml": ("KGPU401", "spec.tasks[0].template.spec.containers[0].resources.requests['nvidia.com/gpu']"),
    "jobset.yaml": (
        "KGPU202",
        "spec.replicatedJobs[1].template.spec.template.spec.containers[0].volumeMounts[0].mountPath",
    ),
    "argo-workflow.yaml": ("KGPU101", "spec.templates[0].container.env[0].value"),
}


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = validate_cli.run(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", sorted(BAD_CUSTOM))
def test_a_bypass_inside_a_custom_resource_fails_the_command_line_with_its_path(name, tmp_path):
    report = tmp_path / "report.json"
    code, out, _err = cli("--json", str(report), str(CUSTOM / "bad" / name))
    assert code == 1
    rule, path = BAD_CUSTOM[name]
    assert [(f["rule"], f["path"]) for f in json.loads(report.read_text())["findings"]] == [(rule, path)]
    assert f"at {path}" in out


def test_the_fixtures_cover_the_same_manifests_good_and_bad():
    assert sorted(p.name for p in (CUSTOM / "bad").glob("*.yaml")) == sorted(BAD_CUSTOM)
    assert sorted(p.name for p in (CUSTOM / "good").glob("*.yaml")) == sorted(BAD_CUSTOM)


@pytest.mark.parametrize("name", sorted(BAD_CUSTOM))
def test_the_same_custom_resource_without_the_bypass_passes(name):
    code, out, _err = cli(str(CUSTOM / "good" / name))
    assert code == 0, out
    assert out.splitlines()[-1].startswith("0 errors, 0 warnings in ")
    assert "not checked" not in out and "checked by shape" not in out


# Published manifests of the kinds the walker did not read before: each object is walked by the table
# (no shape search, nothing left unchecked), to these pod specs, with these findings.
PUBLISHED = {
    # KServe's GPU runtime runs its CUDA image with no GPU limit (the limit comes from the InferenceService):
    # likely CUDA by its name (huggingfaceserver-gpu), and the known family in the chart's rendering.
    "kserve-huggingfaceserver-multinode.yaml": (
        ["spec", "spec.workerSpec"],
        [("KGPU501", "spec.containers[0].image"), ("KGPU501", "spec.workerSpec.containers[0].image")],
    ),
    "kserve-chart-huggingfaceserver-multinode.yaml": (
        ["spec", "spec.workerSpec"],
        [("KGPU501", "spec.containers[0].image"), ("KGPU501", "spec.workerSpec.containers[0].image")],
    ),
    "kserve-tritonserver.yaml": (["spec"], []),
    "llmisvc-qwen2-7b-nvidia.yaml": (["spec.template"], []),
    "llmisvc-gpt-oss-pd-disaggregation.yaml": (["spec.template", "spec.prefill.template"], []),
    # llm-d's CUDA image (likely CUDA by its name, llm-d-cuda) without a GPU limit, in configs: overlays merged
    # into the LLMInferenceServices that name them, which give the limit, so no KGPU501.
    "llmisvc-config-default.yaml": (["spec.template", "spec.router.scheduler.template"], []),
    "llmisvc-config-llm-template.yaml": (["spec.template"], []),
    # The frontend runs the CUDA runtime image without a GPU; the workers' `resources.limits.gpu` is their limit.
    "dynamo-vllm-agg.yaml": (
        ["spec.services.Frontend.extraPodSpec", "spec.services.VllmDecodeWorker.extraPodSpec"],
        [("KGPU501", "spec.services.Frontend.extraPodSpec.mainContainer.image")],
    ),
    "dynamo-vllm-disagg.yaml": (
        [f"spec.services.{name}.extraPodSpec" for name in ("Frontend", "VllmDecodeWorker", "VllmPrefillWorker")],
        [("KGPU501", "spec.services.Frontend.extraPodSpec.mainContainer.image")],
    ),
    "dynamo-vllm-agg-v1beta1.yaml": (
        ["spec.components[0].podTemplate.spec", "spec.components[1].podTemplate.spec"],
        [],
    ),
    "trainjob-lammps-gpus.yaml": (["spec"], []),
    "trainjob-runtime-patches.yaml": (
        [
            "spec",
            "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec",
        ],
        [],
    ),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_a_published_manifest_of_a_table_kind_is_walked_to_each_pod_spec(name):
    text = (CUSTOM / "published" / name).read_text(encoding="utf-8")
    assert text.startswith("# Source: ")
    documents, error = parse_text(text, name)
    assert error is None
    result = validate_documents(documents, RuleConfig())
    sites = [site.path for document in documents for site in walk_document(document.data)[0]]
    paths, findings = PUBLISHED[name]
    assert sites == paths
    assert [(f.rule, f.path) for f in result.findings] == findings
    assert result.not_checked == [] and result.notes == []


def test_every_published_custom_resource_fixture_is_listed():
    assert sorted(p.name for p in (CUSTOM / "published").glob("*.yaml")) == sorted(PUBLISHED)


def dynamo_graph(**worker):
    return obj("nvidia.com/v1alpha1", "DynamoGraphDeployment", {"services": {"Worker": worker}})


def test_a_dynamo_component_gpu_count_is_its_main_container_limit_of_its_gpu_type():
    image = {"extraPodSpec": {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.1"}}}
    [site], _skipped = walk_document(
        dynamo_graph(resources={"limits": {"gpu": "2", "gpuType": "amd.com/gpu"}}, **image)
    )
    [main] = list(iter_containers(site))
    assert (main.path, main.container["resources"]) == (
        "spec.services.Worker.extraPodSpec.mainContainer",
        {"limits": {"amd.com/gpu": "2"}},
    )
    assert finding_paths(dynamo_graph(resources={"limits": {"gpu": "1"}}, **image))[0] == []
    assert finding_paths(dynamo_graph(**image))[0] == [
        ("KGPU501", "spec.services.Worker.extraPodSpec.mainContainer.image")
    ]


def test_a_dynamo_component_env_and_the_graph_env_reach_its_main_container():
    graph = dynamo_graph(envs=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    graph["spec"]["envs"] = [{"name": "HF_HOME", "value": "/cache"}]
    [site], _skipped = walk_document(graph)
    [main] = list(iter_containers(site))
    assert [e["name"] for e in main.container["env"]] == ["HF_HOME", "NVIDIA_VISIBLE_DEVICES"]
    assert finding_paths(graph)[0] == [("KGPU101", "spec.services.Worker.extraPodSpec.mainContainer.env[1].value")]
    allowed = dynamo_graph(
        envs=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
        extraPodMetadata={"annotations": {"kubegpu.io/allow-bypass": "benchmark"}},
    )
    found, result = finding_paths(allowed)
    assert found == [] and [a.reason for a in result.allowed] == ["benchmark"]


def test_an_llm_inference_service_workload_annotations_reach_its_pods():
    service = obj(
        "serving.kserve.io/v1alpha2",
        "LLMInferenceService",
        {
            "model": {"uri": "hf://x"},
            "prefill": {
                "annotations": {"kubegpu.io/allow-bypass": "vendor"},
                "template": {"containers": [env_bypass()]},
            },
            "worker": {"containers": [env_bypass()]},
        },
    )
    found, result = finding_paths(service)
    assert found == [("KGPU101", "spec.worker.containers[0].env[0].value")]
    assert [(a.finding.path, a.reason) for a in result.allowed] == [
        ("spec.prefill.template.containers[0].env[0].value", "vendor")
    ]


def test_a_trainjob_patch_of_the_node_container_gets_the_trainer_resources_per_node():
    def trainjob(patched):
        pod = {"metadata": {}, "spec": {"containers": [patched]}}
        patch = {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod}}}]}}}
        return obj(
            "trainer.kubeflow.org/v1alpha1",
            "TrainJob",
            {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}},
                "runtimePatches": [{"manager": "x", "trainingRuntimeSpec": patch}],
            },
        )

    at = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec"
    device = {"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}
    node = {"name": "node", "volumeMounts": [{"name": "dev", "mountPath": "/dev/nvidia0"}]}
    job = trainjob(node)
    job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"
    ]["template"]["spec"]["volumes"] = [device]
    [_trainer, patched], _skipped = walk_document(job)
    assert patched.path == at
    assert patched.spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert finding_paths(trainjob({"name": "sidecar", **env_bypass("sidecar")}))[0] == [
        ("KGPU101", f"{at}.containers[0].env[0].value")
    ]


def test_a_trainjob_with_only_patches_is_checked_without_a_note_on_its_trainer():
    override = {"targetJobs": [{"name": "node"}], "metadata": {}, "spec": {"containers": [env_bypass("node")]}}
    job = obj(
        "trainer.kubeflow.org/v1alpha1", "TrainJob", {"runtimeRef": {"name": "x"}, "podTemplateOverrides": [override]}
    )
    found, result = finding_paths(job)
    assert found == [("KGPU101", "spec.podTemplateOverrides[0].spec.containers[0].env[0].value")]
    assert result.not_checked == []


def llm_workload(kind, container, **pod):
    return obj("serving.kserve.io/v1alpha2", kind, {"template": {"containers": [container], **pod}})


CUDA = {"name": "main", "image": "ghcr.io/llm-d/llm-d-cuda:v0.9.0"}


def test_an_llm_inference_service_config_is_not_judged_for_the_gpu_limit_the_service_gives():
    assert finding_paths(llm_workload("LLMInferenceServiceConfig", CUDA))[0] == []
    assert finding_paths(llm_workload("LLMInferenceService", CUDA))[0] == [
        ("KGPU501", "spec.template.containers[0].image")
    ]
    requested = {**CUDA, "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    assert finding_paths(llm_workload("LLMInferenceServiceConfig", requested))[0] == []
    found = finding_paths(llm_workload("LLMInferenceService", requested))[0]
    assert [rule for rule, _path in found] == ["KGPU401", "KGPU501"]


def test_an_llm_inference_service_config_is_judged_for_what_its_template_holds():
    privileged = {**CUDA, "securityContext": {"privileged": True}}
    assert finding_paths(llm_workload("LLMInferenceServiceConfig", privileged))[0] == [
        ("KGPU301", "spec.template.containers[0].securityContext.privileged")
    ]
    mounted = {**CUDA, "volumeMounts": [{"name": "dev", "mountPath": "/dev"}]}
    config = llm_workload("LLMInferenceServiceConfig", mounted, volumes=[{"name": "dev", "hostPath": {"path": "/dev"}}])
    assert finding_paths(config)[0] == [("KGPU201", "spec.template.volumes[0].hostPath.path")]
    # NVIDIA_VISIBLE_DEVICES=all is a bypass whether the service gives the container a GPU limit or not.
    selecting = {**CUDA, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    assert finding_paths(llm_workload("LLMInferenceServiceConfig", selecting))[0] == [
        ("KGPU101", "spec.template.containers[0].env[0].value")
    ]
    limited = {**selecting, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    assert finding_paths(llm_workload("LLMInferenceServiceConfig", limited))[0] == [
        ("KGPU102", "spec.template.containers[0].env[0].value")
    ]


def test_a_trainjob_trainer_is_not_judged_for_the_gpu_limit_its_runtime_gives():
    job = obj(
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
        {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}},
    )
    assert finding_paths(job)[0] == []


def test_only_the_overlay_kinds_of_the_table_are_overlays():
    overlays = sorted(k.kind for k in WORKLOAD_KINDS if k.overlay)
    assert overlays == ["LLMInferenceServiceConfig", "TrainJob"]
    assert is_overlay("serving.kserve.io", "LLMInferenceServiceConfig")
    assert not is_overlay("serving.kserve.io", "LLMInferenceService") and not is_overlay("apps", "Deployment")


def env_bypass(name="main"):
    return {"name": name, "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}


def pod_template(container=None):
    return {"metadata": {"annotations": {}}, "spec": {"containers": [container or env_bypass()]}}


def obj(api_version, kind, spec, **metadata):
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", **metadata}, "spec": spec}


def finding_paths(document):
    result = validate_documents(parse_text(json.dumps(document), "inline.json", as_json=True)[0], RuleConfig())
    return [(f.rule, f.path) for f in result.findings], result


@pytest.mark.parametrize(
    "document, paths",
    [
        (
            obj(
                "kubeflow.org/v1",
                "TFJob",
                {"tfReplicaSpecs": {"PS": {"template": pod_template()}, "Worker": {"template": pod_template()}}},
            ),
            [
                "spec.tfReplicaSpecs.PS.template.spec.containers[0].env[0].value",
                "spec.tfReplicaSpecs.Worker.template.spec.containers[0].env[0].value",
            ],
        ),
        (
            obj("kubeflow.org/v2beta1", "MPIJob", {"mpiReplicaSpecs": {"Launcher": {"template": pod_template()}}}),
            ["spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].env[0].value"],
        ),
        (
            obj(
                "trainer.kubeflow.org/v1alpha1",
                "TrainJob",
                {"runtimeRef": {"name": "torch-distributed"}, "trainer": env_bypass()},
            ),
            ["spec.trainer.env[0].value"],
        ),
        (
            obj(
                "trainer.kubeflow.org/v1alpha1",
                "ClusterTrainingRuntime",
                {
                    "template": {
                        "spec": {
                            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_template()}}}]
                        }
                    }
                },
            ),
            ["spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[0].value"],
        ),
        (
            obj(
                "leaderworkerset.x-k8s.io/v1",
                "LeaderWorkerSet",
                {"leaderWorkerTemplate": {"leaderTemplate": pod_template(), "workerTemplate": pod_template()}},
            ),
            [
                "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].env[0].value",
                "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].env[0].value",
            ],
        ),
        (
            obj(
                "ray.io/v1",
                "RayJob",
                {
                    "rayClusterSpec": {
                        "headGroupSpec": {"template": pod_template()},
                        "workerGroupSpecs": [{"template": pod_template()}],
                    },
                    "submitterPodTemplate": pod_template(),
                },
            ),
            [
                "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].env[0].value",
                "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].env[0].value",
                "spec.submitterPodTemplate.spec.containers[0].env[0].value",
            ],
        ),
        (
            obj(
                "argoproj.io/v1alpha1",
                "CronWorkflow",
                {
                    "workflowSpec": {
                        "templates": [
                            {"name": "steps", "steps": [[{"name": "a", "template": "s"}]]},
                            {
                                "name": "s",
                                "script": {**env_bypass(), "source": "print(1)"},
                                "initContainers": [env_bypass("init")],
                            },
                            {
                                "name": "set",
                                "containerSet": {"containers": [env_bypass("a")]},
                                "sidecars": [env_bypass("side")],
                            },
                        ]
                    }
                },
            ),
            [
                "spec.workflowSpec.templates[1].script.env[0].value",
                "spec.workflowSpec.templates[1].initContainers[0].env[0].value",
                "spec.workflowSpec.templates[2].containerSet.containers[0].env[0].value",
                "spec.workflowSpec.templates[2].sidecars[0].env[0].value",
            ],
        ),
        (
            obj(
                "serving.kserve.io/v1beta1",
                "InferenceService",
                {
                    "predictor": {"model": {"modelFormat": {"name": "pytorch"}, **env_bypass("kserve-container")}},
                    "transformer": {"containers": [env_bypass()]},
                },
            ),
            ["spec.predictor.model.env[0].value", "spec.transformer.containers[0].env[0].value"],
        ),
    ],
    ids=lambda value: value["kind"] if isinstance(value, dict) else "",
)
def test_every_template_of_a_table_kind_is_checked_at_its_path(document, paths):
    found, result = finding_paths(document)
    assert found == [("KGPU101", path) for path in paths]
    assert result.not_checked == [] and result.notes == []


def test_kserve_component_annotations_reach_the_pod_and_allow_it():
    service = obj(
        "serving.kserve.io/v1beta1",
        "InferenceService",
        {"predictor": {"annotations": {"kubegpu.io/allow-bypass": "vendor runtime"}, "containers": [env_bypass()]}},
    )
    found, result = finding_paths(service)
    assert found == []
    assert [(a.finding.path, a.reason) for a in result.allowed] == [
        ("spec.predictor.containers[0].env[0].value", "vendor runtime")
    ]


def test_the_allow_annotation_of_a_custom_resource_covers_its_templates():
    job = obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        {"pytorchReplicaSpecs": {"Worker": {"template": pod_template()}}},
        annotations={"kubegpu.io/allow-bypass": "driver test"},
    )
    found, result = finding_paths(job)
    assert found == [] and [a.reason for a in result.allowed] == ["driver test"]


def test_a_trainjob_trainer_gpu_resources_per_node_count_as_its_limits():
    trainer = {
        "image": "pytorch/pytorch:2.5.0-cuda12.4-cudnn9-runtime",
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}},
    }
    job = obj(
        "trainer.kubeflow.org/v1alpha1", "TrainJob", {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}
    )
    [site], _skipped = walk_document(job)
    [container] = list(iter_containers(site))
    assert (container.path, container.container["resources"]) == ("spec.trainer", trainer["resourcesPerNode"])
    assert finding_paths(job)[0] == []


def test_a_known_kind_without_its_template_is_not_checked_and_says_where_it_looked():
    sites, [entry] = walk_document(obj("ray.io/v1", "RayCluster", {"rayVersion": "2.9.0"}))
    assert sites == []
    assert (
        entry.reason
        == "RayCluster (ray.io) has no pod template at spec.headGroupSpec.template or spec.workerGroupSpecs[].template"
    )


def test_the_table_names_each_kind_once_with_its_resource():
    names = [(k.group, k.kind) for k in WORKLOAD_KINDS]
    assert len(names) == len(set(names))
    assert all(k.resource == k.resource.lower() and k.resource.endswith("s") and k.versions for k in WORKLOAD_KINDS)


# ---------------------------------------------------------------------------------------------
# Shape fallback

KATIB = {
    # kubeflow/katib examples/v1beta1/hp-tuning/random.yaml, trimmed, with a bypass in the trial's Job.
    "apiVersion": "kubeflow.org/v1beta1",
    "kind": "Experiment",
    "metadata": {"namespace": "kubeflow", "name": "random"},
    "spec": {
        "objective": {"type": "maximize", "goal": 0.99, "objectiveMetricName": "Validation-accuracy"},
        "algorithm": {"algorithmName": "random"},
        "trialTemplate": {
            "primaryContainerName": "training-container",
            "trialSpec": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "spec": {
                    "template": {
                        "metadata": {"annotations": {"kubegpu.io/allow-bypass": "benchmark"}},
                        "spec": {
                            "containers": [env_bypass("training-container")],
                            "restartPolicy": "Never",
                        },
                    }
                },
            },
        },
    },
}


def test_an_unknown_kind_is_checked_by_shape_with_its_path_and_a_note():
    found, result = finding_paths(KATIB)
    assert found == []  # allowed by the annotation of the embedded pod template's metadata
    [allowed] = result.allowed
    assert allowed.finding.path == "spec.trialTemplate.trialSpec.spec.template.spec.containers[0].env[0].value"
    assert allowed.reason == "benchmark"
    assert result.notes == [
        "checked by shape: Experiment kubeflow/random (kubeflow.org/v1beta1) in inline.json document 0: "
        "pod spec at spec.trialTemplate.trialSpec.spec.template.spec"
    ]


def test_a_built_in_kind_of_a_foreign_group_is_checked_by_shape(tmp_path):
    deployment = obj(
        "example.com/v1", "Deployment", {"template": pod_template(), "canary": {"containers": [env_bypass("c")]}}
    )
    manifest = tmp_path / "foreign.json"
    manifest.write_text(json.dumps(deployment))
    report = tmp_path / "report.json"
    code, out, _err = cli("--json", str(report), str(manifest))
    assert code == 1
    data = json.loads(report.read_text())
    # Breadth-first: the shallower spec comes first.
    assert [f["path"] for f in data["findings"]] == [
        "spec.canary.containers[0].env[0].value",
        "spec.template.spec.containers[0].env[0].value",
    ]
    assert [n.split(": pod spec at ")[1] for n in data["notes"]] == ["spec.canary", "spec.template.spec"]
    assert f"checked by shape: Deployment x (example.com/v1) in {manifest} document 0: pod spec at spec.canary" in out


def test_shape_search_finds_every_spec_and_stays_bounded():
    items = [{"n": [i]} for i in range(30_000)]
    assert find_pod_spec_shapes({"items": items + [{"containers": [{"image": "a"}]}]}) == []
    specs = find_pod_spec_shapes(
        {"spec": {"a": {"containers": [{"image": "a"}]}, "b": [{"containers": [{"name": "x", "image": "b"}]}]}}
    )
    assert [path for _spec, path, _parent in specs] == ["spec.a", "spec.b[0]"]
    assert (
        find_pod_spec_shapes(
            {"status": {"containers": [{"image": "a"}]}, "spec": {"containers": [{"name": "no-image"}]}}
        )
        == []
    )


# ---------------------------------------------------------------------------------------------
# Live mode


DISCOVERY = {
    "kind": "APIGroupList",
    "groups": [
        {"name": "kubeflow.org", "versions": [{"groupVersion": "kubeflow.org/v1", "version": "v1"}]},
        {"name": "ray.io", "versions": [{"groupVersion": "ray.io/v1", "version": "v1"}]},
        {"name": "resource.k8s.io", "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}]},
    ],
}


class CustomResourceCluster:
    def __init__(self, collections, errors, discovery=None):
        self.collections = collections
        self.errors = errors
        self.discovery = DISCOVERY if discovery is None else discovery
        self.listed = []

    def list_items(self, path):
        self.listed.append(path)
        if path in self.errors:
            raise ClusterError(f"GET {path}: {self.errors[path]}", self.errors[path])
        return iter(self.collections.get(path, []))

    def get(self, path):
        if path == "/apis" and isinstance(self.discovery, dict):
            return self.discovery
        raise ClusterError(f"GET {path}: {self.discovery}", self.discovery if path == "/apis" else 404)


def suspended_pytorchjob():
    job = obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {"Worker": {"template": pod_template()}}},
        namespace="ml",
        uid="job-1",
    )
    del job["apiVersion"], job["kind"]  # as list responses give their items
    return job


def test_live_mode_lists_served_custom_resources_and_covers_their_pods():
    pod = {
        "metadata": {
            "name": "w-0",
            "namespace": "ml",
            "uid": "p1",
            "ownerReferences": [{"uid": "job-1", "controller": True}],
        },
        "spec": {"containers": [env_bypass()]},
        "status": {"phase": "Running"},
    }
    client = CustomResourceCluster(
        {"/apis/kubeflow.org/v1/pytorchjobs": [suspended_pytorchjob()], "/api/v1/pods": [pod]},
        {"/apis/kubeflow.org/v1/tfjobs": 404, "/apis/ray.io/v1/rayclusters": 403},
    )
    report = live_report(client, RuleConfig())
    assert [(f.ref.kind, f.ref.name, f.path) for f in report.findings] == [
        ("PyTorchJob", "x", "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[0].value")
    ]
    assert "/apis/resource.k8s.io/v1/resourceclaimtemplates" in client.listed
    assert "/apis/argoproj.io/v1alpha1/workflows" not in client.listed  # not served: never asked
    assert report.notes[0].startswith("live: checked 1 workloads and 0 pods in full")
    assert (
        "live: not allowed to list RayCluster (/apis/ray.io/v1/rayclusters), so their pod templates were not checked"
        in report.notes
    )


def test_live_mode_notes_a_forbidden_discovery_and_skips_a_missing_one():
    forbidden = live_report(CustomResourceCluster({}, {}, discovery=403), RuleConfig())
    assert any(n.startswith("live: cannot read the API discovery (/apis)") for n in forbidden.notes)
    missing = live_report(CustomResourceCluster({}, {}, discovery=404), RuleConfig())
    assert len(missing.notes) == 1


def test_live_mode_lists_each_kind_at_the_first_served_version_and_cluster_kinds_only_cluster_wide():
    served = served_group_versions(
        {"groups": [{"versions": [{"groupVersion": "kubeflow.org/v1"}, {"groupVersion": "kubeflow.org/v2beta1"}]}]}
    )
    chosen = {(entry.kind, entry.api_version) for entry in live_custom_lists(served)}
    assert ("MPIJob", "kubeflow.org/v2beta1") in chosen and ("MPIJob", "kubeflow.org/v1") not in chosen
    client = CustomResourceCluster(
        {}, {}, discovery={"groups": [{"versions": [{"groupVersion": "argoproj.io/v1alpha1"}]}]}
    )
    live_report(client, RuleConfig(), ["ml"])
    assert "/apis/argoproj.io/v1alpha1/namespaces/ml/workflows" in client.listed
    assert not any("clusterworkflowtemplates" in path for path in client.listed)


def test_the_reader_role_lists_every_custom_resource_the_live_audit_may_list():
    reader = yaml.safe_load((Path(__file__).resolve().parents[5] / "rbac" / "kubegpu-reader.yaml").read_text())
    granted = {
        (group, resource)
        for rule in reader["rules"]
        if "list" in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    served = {f"{k.group}/{v}" for k in WORKLOAD_KINDS for v in k.versions} | {"resource.k8s.io/v1"}
    wanted = {(entry.api_version.split("/")[0], entry.resource) for entry in live_custom_lists(served)}
    assert wanted - granted == set()


def test_sarif_and_junit_stay_valid_for_custom_resources_and_shapes(tmp_path):
    schema = json.loads((CUSTOM.parents[1] / "sarif" / "sarif-schema-2.1.0.json").read_text())
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps(obj("example.com/v1", "Deployment", {"template": pod_template()})))
    sarif, junit = tmp_path / "r.sarif", tmp_path / "r.xml"
    code, _out, _err = cli(
        "--sarif", str(sarif), "--junit", str(junit), str(CUSTOM / "bad" / "pytorchjob.yaml"), str(foreign)
    )
    assert code == 1
    report = json.loads(sarif.read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    assert [e.message for e in validator.iter_errors(report)] == []
    assert len(report["runs"][0]["results"]) == 2
    assert len(ElementTree.parse(junit).getroot().findall(".//failure")) == 2
