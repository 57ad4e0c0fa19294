# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The custom resources of ML platforms whose pod templates are checked, and where those templates are.

Each path below was read from the project's Go API types (the CRD is generated from them):

- Kubeflow Training Operator v1 (kubeflow/training-operator, pkg/apis/kubeflow.org/v1/*_types.go):
  `spec.<x>ReplicaSpecs` is a map from replica type (Master, Worker, PS, Chief, Launcher...) to a
  ReplicaSpec whose `template` is a PodTemplateSpec. MPIJob of the MPI Operator v2
  (kubeflow/mpi-operator, v2beta1) keeps the same `spec.mpiReplicaSpecs` shape.
- Kubeflow Trainer (kubeflow/trainer, pkg/apis/trainer/v1alpha1): a TrainJob has no pod template,
  only the trainer's container fields (`spec.trainer`: image, command, args, env, resourcesPerNode);
  TrainingRuntime and ClusterTrainingRuntime hold a JobSet template (`spec.template.spec`).
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
"""

from __future__ import annotations

from dataclasses import dataclass

# What sits at the end of a template path.
POD_TEMPLATE = "pod template"  # a PodTemplateSpec: metadata and spec
POD_SPEC = "pod spec"  # an inline PodSpec, with pod annotations in the same mapping (KServe)
ARGO_TEMPLATE = "Argo template"  # containers under several keys, pod metadata in `metadata`
CONTAINER_FIELDS = "container fields"  # the mapping holds single containers under `containers` keys

# Path steps that fan out.
EACH_VALUE = "*"  # every value of a map (replica types)
EACH_ITEM = "[]"  # every item of a list


@dataclass(frozen=True)
class TemplatePath:
    steps: tuple[str, ...]
    form: str = POD_TEMPLATE
    containers: tuple[str, ...] = ()  # keys that hold one container each, for POD_SPEC and CONTAINER_FIELDS

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


def _replica_specs(field: str) -> tuple[TemplatePath, ...]:
    return (TemplatePath(("spec", field, EACH_VALUE, "template")),)


def _ray_cluster(*base: str) -> tuple[TemplatePath, ...]:
    return (
        TemplatePath((*base, "headGroupSpec", "template")),
        TemplatePath((*base, "workerGroupSpecs", EACH_ITEM, "template")),
    )


def _jobset(*base: str) -> tuple[TemplatePath, ...]:
    return (TemplatePath((*base, "replicatedJobs", EACH_ITEM, "template", "spec", "template")),)


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
        (TemplatePath(("spec",), CONTAINER_FIELDS, ("trainer",)),),
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
)

WORKLOAD_KIND_BY_NAME: dict[tuple[str, str], WorkloadKind] = {(k.group, k.kind): k for k in WORKLOAD_KINDS}
