# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The custom resources of ML platforms whose pod templates are checked, and where those templates are.

Each path below was read from the project's Go API types (the CRD is generated from them):

- Kubeflow Training Operator v1 (kubeflow/training-operator, pkg/apis/kubeflow.org/v1/*_types.go):
  `spec.<x>ReplicaSpecs` is a map from replica type (Master, Worker, PS, Chief, Launcher...) to a
  ReplicaSpec whose `template` is a PodTemplateSpec. MPIJob of the MPI Operator v2
  (kubeflow/mpi-operator, v2beta1) keeps the same `spec.mpiReplicaSpecs` shape.
- Kubeflow Trainer (kubeflow/trainer, pkg/apis/trainer/v1alpha1): a TrainJob has no pod template,
  only the trainer's container fields (`spec.trainer`: image, command, args, env, resourcesPerNode)
  and patches of the runtime's pods: `spec.podTemplateOverrides[]` (PodTemplateOverride of v2.1,
  its `metadata` and `spec` as a pod template's) and `spec.runtimePatches[].trainingRuntimeSpec.template.spec
  .replicatedJobs[].template.spec.template` (PodTemplatePatch, metadata and spec); their containers
  (ContainerPatch: env, volumeMounts, securityContext) are the runtime's, the trainer's one named
  `node`, whose resources are the trainer's `resourcesPerNode`. TrainingRuntime and
  ClusterTrainingRuntime hold a JobSet template (`spec.template.spec`).
- JobSet (kubernetes-sigs/jobset, api/jobset/v1alpha2): `spec.replicatedJobs[].template` is a
  JobTemplateSpec, so the pods are at `.spec.template`.
- LeaderWorkerSet (kubernetes-sigs/lws, api/leaderworkerset/v1): `spec.leaderWorkerTemplate`
  `.leaderTemplate` (optional) and `.workerTemplate`, both PodTemplateSpecs.
- KubeRay (ray-project/kuberay, ray-operator/apis/ray/v1): RayClusterSpec has
  `headGroupSpec.template` and `workerGroupSpecs[].template`; RayJob embeds it at
  `spec.rayClusterSpec` beside `spec.submitterPodTemplate`; RayService at `spec.rayClusterConfig`.
- Volcano (volcano-sh/apis, pkg/apis/batch/v1alpha1/job.go): `spec.tasks[].template`.
- Argo Workflows (argoproj/argo-workflows, pkg/apis/workflow/v1alpha1/workflow_types.go): a
  Template is not a pod spec; its containers are `container`, `script` (a Container with a
  source), `containerSet.containers[]`, `initContainers[]` and `sidecars[]`, its pod metadata
  `metadata`, its volumes `volumes`. CronWorkflow keeps the workflow spec at `spec.workflowSpec`.
- KServe (kserve/kserve, pkg/apis/serving/v1beta1): predictor, transformer and explainer inline
  a PodSpec and the component extension (whose `annotations` reach the pods); the predictor's
  framework fields (`model`, `sklearn`, `pytorch`, `triton`, `huggingface`...) each inline a
  Container, and `predictor.workerSpec` inlines another PodSpec (multi-node serving).
  ServingRuntime and ClusterServingRuntime (pkg/apis/serving/v1alpha1/servingruntime_types.go)
  inline a ServingRuntimePodSpec in `spec` (containers, volumes, `annotations` and `labels` for the
  pod) and another in `spec.workerSpec`. LLMInferenceService and LLMInferenceServiceConfig
  (v1alpha1 and v1alpha2, llm_inference_service_types.go) inline a WorkloadSpec in `spec` and
  `spec.prefill` whose `template` and `worker` are PodSpecs beside the pods' `annotations` and
  `labels`; `spec.router.scheduler.template` and its `tokenizer.template` are PodSpecs too.
- NVIDIA Dynamo (ai-dynamo/dynamo, deploy/operator/api): a DynamoGraphDeployment v1alpha1 has
  `spec.services`, a map from service name to a DynamoComponentDeploymentSharedSpec (the `spec` of
  a DynamoComponentDeployment): `extraPodSpec` inlines a PodSpec beside `mainContainer`, the
  component's main container, to which the operator adds `envs` (and the graph's `spec.envs`) and
  `resources`, whose `limits.gpu` is a count of `gpuType` (default `nvidia.com/gpu`); the pods'
  annotations are `annotations` and `extraPodMetadata.annotations`. v1beta1 lists
  `spec.components[]`, each with a PodTemplateSpec at `podTemplate`.
"""

from __future__ import annotations

from dataclasses import dataclass

# What sits at the end of a template path.
POD_TEMPLATE = "pod template"  # a PodTemplateSpec: metadata and spec
POD_SPEC = "pod spec"  # an inline PodSpec, with pod annotations in the same mapping (KServe)
ARGO_TEMPLATE = "Argo template"  # containers under several keys, pod metadata in `metadata`
CONTAINER_FIELDS = "container fields"  # the mapping holds single containers under `containers` keys
# The last step is an inline PodSpec; the mapping that holds it has the pods' `annotations` (KServe's LLM workloads).
POD_SPEC_BESIDE_METADATA = "pod spec beside its metadata"
DYNAMO_COMPONENT = "Dynamo component"  # a DynamoComponentDeploymentSharedSpec: extraPodSpec, envs, resources

# Path steps that fan out.
EACH_VALUE = "*"  # every value of a map (replica types)
EACH_ITEM = "[]"  # every item of a list


@dataclass(frozen=True)
class TemplatePath:
    steps: tuple[str, ...]
    form: str = POD_TEMPLATE
    containers: tuple[str, ...] = ()  # keys that hold one container each, for POD_SPEC and CONTAINER_FIELDS
    # Steps from the object to what it gives this template's pods: the TrainJob's `resourcesPerNode`
    # for the runtime's `node` container, the Dynamo graph's `envs` for each component's main container.
    inherited: tuple[str, ...] = ()

    def text(self) -> str:
        return ".".join(self.steps).replace(".[]", "[]")


@dataclass(frozen=True)
class WorkloadKind:
    group: str
    kind: str
    resource: str  # the plural name, for the live audit's list
    versions: tuple[str, ...]  # served versions the live audit tries, preferred first
    templates: tuple[TemplatePath, ...]
    namespaced: bool = True
    # The templates are overlays: partial pod specs the operator merges into another object's before any
    # pod exists, so what they leave out (a GPU limit above all) that object may give. KServe merges each
    # LLMInferenceServiceConfig an LLMInferenceService names in `spec.baseRefs` (and the well-known ones)
    # under the service's own spec, the service taking precedence (kserve/kserve
    # pkg/controller/v1alpha2/llmisvc/config_merge.go, combineBaseRefsConfig and mergeSpecs, a strategic
    # merge of LLMInferenceServiceSpec, at aaac4e294dae2c7b1aa1886447793f3aa1c30912). The Trainer applies a
    # TrainJob's trainer fields, `runtimePatches` and `podTemplateOverrides` to its runtime's pods, whose
    # containers keep their resources unless `resourcesPerNode` gives the trainer's (kubeflow/trainer
    # pkg/apis/trainer/v1alpha1/trainjob_types.go, "custom patches applied to the TrainJob's Runtime";
    # a ContainerPatch has no resources; at 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3).
    overlay: bool = False


def _replica_specs(field: str) -> tuple[TemplatePath, ...]:
    return (TemplatePath(("spec", field, EACH_VALUE, "template")),)


def _ray_cluster(*base: str) -> tuple[TemplatePath, ...]:
    return (
        TemplatePath((*base, "headGroupSpec", "template")),
        TemplatePath((*base, "workerGroupSpecs", EACH_ITEM, "template")),
    )


def _jobset(*base: str) -> tuple[TemplatePath, ...]:
    return (TemplatePath((*base, "replicatedJobs", EACH_ITEM, "template", "spec", "template")),)


def _llm_workload(*base: str) -> tuple[TemplatePath, ...]:
    return tuple(TemplatePath((*base, key), POD_SPEC_BESIDE_METADATA) for key in ("template", "worker"))


def _llm_service() -> tuple[TemplatePath, ...]:
    scheduler = ("spec", "router", "scheduler")
    return (
        *_llm_workload("spec"),
        *_llm_workload("spec", "prefill"),
        TemplatePath((*scheduler, "template"), POD_SPEC_BESIDE_METADATA),
        TemplatePath((*scheduler, "tokenizer", "template"), POD_SPEC_BESIDE_METADATA),
    )


def _serving_runtime() -> tuple[TemplatePath, ...]:
    return (TemplatePath(("spec",), POD_SPEC), TemplatePath(("spec", "workerSpec"), POD_SPEC))


TRAINER_NODE_CONTAINER = "node"  # the trainer's container in the runtimes (pkg/constants: Node)
TRAINER_NODE = ("spec", "trainer", "resourcesPerNode")
TRAINJOB_TEMPLATES = (
    TemplatePath(("spec",), CONTAINER_FIELDS, ("trainer",)),
    TemplatePath(("spec", "podTemplateOverrides", EACH_ITEM), inherited=TRAINER_NODE),
    *(
        TemplatePath(path.steps, inherited=TRAINER_NODE)
        for path in _jobset("spec", "runtimePatches", EACH_ITEM, "trainingRuntimeSpec", "template", "spec")
    ),
)
DYNAMO_TEMPLATES = (
    TemplatePath(("spec", "services", EACH_VALUE), DYNAMO_COMPONENT, inherited=("spec", "envs")),
    TemplatePath(("spec", "components", EACH_ITEM, "podTemplate")),
)


def _argo(*base: str) -> tuple[TemplatePath, ...]:
    return (TemplatePath((*base, "templates", EACH_ITEM), ARGO_TEMPLATE),)


KSERVE_PREDICTOR_CONTAINERS = (
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "huggingface",
    "pmml",
    "lightgbm",
    "paddle",
)
KSERVE_EXPLAINER_CONTAINERS = ("art", "alibi", "aix")
KSERVE_LLM_VERSIONS = ("v1alpha2", "v1alpha1")
DYNAMO_VERSIONS = ("v1beta1", "v1alpha1")
TRAINING_OPERATOR_VERSIONS = ("v1",)
ARGO_VERSIONS = ("v1alpha1",)
RAY_VERSIONS = ("v1",)

WORKLOAD_KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind("kubeflow.org", "PyTorchJob", "pytorchjobs", ("v1",), _replica_specs("pytorchReplicaSpecs")),
    WorkloadKind("kubeflow.org", "TFJob", "tfjobs", ("v1",), _replica_specs("tfReplicaSpecs")),
    WorkloadKind("kubeflow.org", "MPIJob", "mpijobs", ("v2beta1", "v1"), _replica_specs("mpiReplicaSpecs")),
    WorkloadKind("kubeflow.org", "XGBoostJob", "xgboostjobs", ("v1",), _replica_specs("xgbReplicaSpecs")),
    WorkloadKind("kubeflow.org", "PaddleJob", "paddlejobs", ("v1",), _replica_specs("paddleReplicaSpecs")),
    WorkloadKind("kubeflow.org", "JAXJob", "jaxjobs", ("v1",), _replica_specs("jaxReplicaSpecs")),
    WorkloadKind(
        "trainer.kubeflow.org",
        "TrainJob",
        "trainjobs",
        ("v1alpha1",),
        TRAINJOB_TEMPLATES,
        overlay=True,
    ),
    WorkloadKind(
        "trainer.kubeflow.org",
        "TrainingRuntime",
        "trainingruntimes",
        ("v1alpha1",),
        _jobset("spec", "template", "spec"),
    ),
    WorkloadKind(
        "trainer.kubeflow.org",
        "ClusterTrainingRuntime",
        "clustertrainingruntimes",
        ("v1alpha1",),
        _jobset("spec", "template", "spec"),
        namespaced=False,
    ),
    WorkloadKind("jobset.x-k8s.io", "JobSet", "jobsets", ("v1alpha2",), _jobset("spec")),
    WorkloadKind(
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        "leaderworkersets",
        ("v1",),
        (
            TemplatePath(("spec", "leaderWorkerTemplate", "leaderTemplate")),
            TemplatePath(("spec", "leaderWorkerTemplate", "workerTemplate")),
        ),
    ),
    WorkloadKind("ray.io", "RayCluster", "rayclusters", RAY_VERSIONS, _ray_cluster("spec")),
    WorkloadKind(
        "ray.io",
        "RayJob",
        "rayjobs",
        RAY_VERSIONS,
        (*_ray_cluster("spec", "rayClusterSpec"), TemplatePath(("spec", "submitterPodTemplate"))),
    ),
    WorkloadKind("ray.io", "RayService", "rayservices", RAY_VERSIONS, _ray_cluster("spec", "rayClusterConfig")),
    WorkloadKind(
        "batch.volcano.sh", "Job", "jobs", ("v1alpha1",), (TemplatePath(("spec", "tasks", EACH_ITEM, "template")),)
    ),
    WorkloadKind("argoproj.io", "Workflow", "workflows", ARGO_VERSIONS, _argo("spec")),
    WorkloadKind("argoproj.io", "WorkflowTemplate", "workflowtemplates", ARGO_VERSIONS, _argo("spec")),
    WorkloadKind(
        "argoproj.io",
        "ClusterWorkflowTemplate",
        "clusterworkflowtemplates",
        ARGO_VERSIONS,
        _argo("spec"),
        namespaced=False,
    ),
    WorkloadKind("argoproj.io", "CronWorkflow", "cronworkflows", ARGO_VERSIONS, _argo("spec", "workflowSpec")),
    WorkloadKind(
        "serving.kserve.io",
        "InferenceService",
        "inferenceservices",
        ("v1beta1",),
        (
            TemplatePath(("spec", "predictor"), POD_SPEC, KSERVE_PREDICTOR_CONTAINERS),
            TemplatePath(("spec", "predictor", "workerSpec"), POD_SPEC),
            TemplatePath(("spec", "transformer"), POD_SPEC),
            TemplatePath(("spec", "explainer"), POD_SPEC, KSERVE_EXPLAINER_CONTAINERS),
        ),
    ),
    WorkloadKind("serving.kserve.io", "ServingRuntime", "servingruntimes", ("v1alpha1",), _serving_runtime()),
    WorkloadKind(
        "serving.kserve.io",
        "ClusterServingRuntime",
        "clusterservingruntimes",
        ("v1alpha1",),
        _serving_runtime(),
        namespaced=False,
    ),
    WorkloadKind(
        "serving.kserve.io", "LLMInferenceService", "llminferenceservices", KSERVE_LLM_VERSIONS, _llm_service()
    ),
    WorkloadKind(
        "serving.kserve.io",
        "LLMInferenceServiceConfig",
        "llminferenceserviceconfigs",
        KSERVE_LLM_VERSIONS,
        _llm_service(),
        overlay=True,
    ),
    WorkloadKind("nvidia.com", "DynamoGraphDeployment", "dynamographdeployments", DYNAMO_VERSIONS, DYNAMO_TEMPLATES),
    WorkloadKind(
        "nvidia.com",
        "DynamoComponentDeployment",
        "dynamocomponentdeployments",
        DYNAMO_VERSIONS,
        (TemplatePath(("spec",), DYNAMO_COMPONENT), TemplatePath(("spec", "podTemplate"))),
    ),
)

WORKLOAD_KIND_BY_NAME: dict[tuple[str, str], WorkloadKind] = {(k.group, k.kind): k for k in WORKLOAD_KINDS}


def is_overlay(group: str, kind: str) -> bool:
    """Whether the kind's templates are overlays merged into another object's (WorkloadKind.overlay)."""
    known = WORKLOAD_KIND_BY_NAME.get((group, kind))
    return known is not None and known.overlay
