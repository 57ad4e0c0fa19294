# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Kubeflow Trainer runtime as a TrainJob fills it, read from kubeflow/trainer (pkg/apis/trainer/v1alpha1,
pkg/runtime/framework/plugins/jobset/builder.go, pkg/runtime/core/trainingruntime.go):

- a TrainJob's `spec.runtimeRef` names its runtime by `name`, `apiGroup` (default trainer.kubeflow.org) and
  `kind` (default ClusterTrainingRuntime); a TrainingRuntime is the one in the TrainJob's namespace;
- in the replicated jobs labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, the container
  named `node` takes the trainer's `image`, `command` and `args` where set, its `env` upserted by name,
  and `resourcesPerNode` merged into its resources key by key (strategic merge) when the runtime has an
  mlPolicy; with MPI's `runLauncherAsNode`, the replicated job named `node` takes the env and resources too;
- in the replicated jobs labelled `dataset-initializer` (`model-initializer`), the container of that name
  takes `STORAGE_URI` from the initializer's `storageUri`, its `env` upserted, and its `secretRef` as an
  `envFrom` secret.

Pod template overrides and runtime patches are checked where the TrainJob writes them (workload_kinds.py).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, as_text

TRAINER_GROUP = "trainer.kubeflow.org"
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
DEFAULT_RUNTIME_KIND = "ClusterTrainingRuntime"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
NODE = "node"  # the trainer's container and the MPI node's replicated job (pkg/constants: Node)
INITIALIZERS = ("dataset-initializer", "model-initializer")  # job, container and label value of each
STORAGE_URI_ENV = "STORAGE_URI"  # jobset plugin constants: InitializerEnvStorageUri
REPLICATED_JOBS = "spec.template.spec.replicatedJobs"


@dataclass(frozen=True)
class RuntimeKey:
    kind: str
    namespace: str  # empty for a ClusterTrainingRuntime
    name: str

    def text(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class FilledRuntime:
    """The runtime object as the TrainJob fills it, and for each field the TrainJob gave it (a path below
    the runtime), the path of that field in the TrainJob."""

    runtime: dict[str, Any]
    given: dict[str, str]


def _group(api_version: Any) -> str:
    return as_text(api_version).rpartition("/")[0]


def runtime_key(obj: Mapping[str, Any]) -> RuntimeKey | None:
    """The key a TrainJob names this runtime by; None for any other object."""
    kind = as_text(obj.get("kind"))
    if _group(obj.get("apiVersion")) != TRAINER_GROUP or kind not in RUNTIME_KINDS:
        return None
    metadata = as_mapping(obj.get("metadata"))
    namespace = as_text(metadata.get("namespace")) if kind == "TrainingRuntime" else ""
    return RuntimeKey(kind, namespace, as_text(metadata.get("name")))


def is_trainjob(obj: Mapping[str, Any]) -> bool:
    return _group(obj.get("apiVersion")) == TRAINER_GROUP and obj.get("kind") == "TrainJob"


def referenced_runtime(trainjob: Mapping[str, Any]) -> RuntimeKey | None:
    """The runtime a TrainJob's `spec.runtimeRef` names; None when it names none or one of another group."""
    ref = as_mapping(as_mapping(trainjob.get("spec")).get("runtimeRef"))
    name = as_text(ref.get("name"))
    if not name or (as_text(ref.get("apiGroup")) or TRAINER_GROUP) != TRAINER_GROUP:
        return None
    kind = as_text(ref.get("kind")) or DEFAULT_RUNTIME_KIND
    if kind not in RUNTIME_KINDS:
        return None
    namespace = as_text(as_mapping(trainjob.get("metadata")).get("namespace")) if kind == "TrainingRuntime" else ""
    return RuntimeKey(kind, namespace, name)


def _upsert_env(container: dict[str, Any], items: list[tuple[Any, str]], given: dict[str, str], at: str) -> None:
    """Each env var replaces the container's of the same name in place, or is appended (apply.UpsertEnvVars)."""
    env = container.get("env")
    env = list(env) if isinstance(env, list) else []
    for item, source in items:
        name = as_mapping(item).get("name")
        index = next((i for i, e in enumerate(env) if isinstance(e, dict) and e.get("name") == name), len(env))
        if index == len(env):
            env.append(item)
        else:
            env[index] = item
        given[f"{at}.env[{index}]"] = source
    if env:
        container["env"] = env


def _merge_resources(container: dict[str, Any], override: Mapping[str, Any], given: dict[str, str], at: str) -> None:
    """`resourcesPerNode` over the container's resources, each of limits and requests merged by resource name."""
    own = as_mapping(container.get("resources"))
    merged = dict(own)
    for part in ("limits", "requests"):
        amounts = override.get(part)
        if not isinstance(amounts, dict):
            continue
        merged[part] = {**as_mapping(own.get(part)), **amounts}
        for name in amounts:
            if isinstance(name, str):
                given[f"{at}.resources.{part}['{name}']"] = f"spec.trainer.resourcesPerNode.{part}['{name}']"
    container["resources"] = merged


def _listed(items: Any, path: str) -> list[tuple[Any, str]]:
    return [(item, f"{path}[{index}]") for index, item in enumerate(items)] if isinstance(items, list) else []


def _fill_trainer(
    container: dict[str, Any], trainer: Mapping[str, Any], fields: bool, resources: bool, given: dict[str, str], at: str
) -> None:
    if fields:
        for key in ("image", "command", "args"):
            if trainer.get(key) is not None:
                container[key] = trainer[key]
                given[f"{at}.{key}"] = f"spec.trainer.{key}"
    _upsert_env(container, _listed(trainer.get("env"), "spec.trainer.env"), given, at)
    if resources and isinstance(trainer.get("resourcesPerNode"), dict):
        _merge_resources(container, trainer["resourcesPerNode"], given, at)


def _fill_initializer(
    container: dict[str, Any], initializer: Mapping[str, Any], source: str, given: dict[str, str], at: str
) -> None:
    items: list[tuple[Any, str]] = []
    if initializer.get("storageUri") is not None:
        items.append(({"name": STORAGE_URI_ENV, "value": initializer["storageUri"]}, f"{source}.storageUri"))
    _upsert_env(container, items + _listed(initializer.get("env"), f"{source}.env"), given, at)
    secret = as_mapping(initializer.get("secretRef")).get("name")
    if secret is not None:
        env_from = container.get("envFrom")
        env_from = list(env_from) if isinstance(env_from, list) else []
        given[f"{at}.envFrom[{len(env_from)}]"] = f"{source}.secretRef"
        container["envFrom"] = [*env_from, {"secretRef": {"name": secret}}]


def fill_runtime(runtime: Mapping[str, Any], trainjob: Mapping[str, Any]) -> FilledRuntime:
    """The runtime with the TrainJob's trainer and initializer fields where the Trainer puts them."""
    filled = copy.deepcopy(dict(runtime))
    given: dict[str, str] = {}
    job_spec = as_mapping(trainjob.get("spec"))
    trainer = as_mapping(job_spec.get("trainer"))
    initializer = as_mapping(job_spec.get("initializer"))
    ml_policy = as_mapping(as_mapping(filled.get("spec")).get("mlPolicy"))
    launcher_as_node = as_mapping(ml_policy.get("mpi")).get("runLauncherAsNode") is True
    jobs = as_mapping(as_mapping(as_mapping(filled.get("spec")).get("template")).get("spec")).get("replicatedJobs")
    for index, job in enumerate(jobs if isinstance(jobs, list) else []):
        template = as_mapping(as_mapping(job).get("template"))
        ancestor = as_mapping(as_mapping(template.get("metadata")).get("labels")).get(ANCESTOR_LABEL)
        containers = as_mapping(as_mapping(as_mapping(template.get("spec")).get("template")).get("spec")).get(
            "containers"
        )
        base = f"{REPLICATED_JOBS}[{index}].template.spec.template.spec.containers"
        for position, container in enumerate(containers if isinstance(containers, list) else []):
            if not isinstance(container, dict):
                continue
            name, at = container.get("name"), f"{base}[{position}]"
            is_trainer = ancestor == ANCESTOR_TRAINER
            if name == NODE and (is_trainer or (launcher_as_node and as_mapping(job).get("name") == NODE)):
                _fill_trainer(container, trainer, is_trainer, bool(ml_policy) or launcher_as_node, given, at)
            elif ancestor in INITIALIZERS and name == ancestor:
                part = "dataset" if ancestor == INITIALIZERS[0] else "model"
                if isinstance(initializer.get(part), dict):
                    _fill_initializer(container, initializer[part], f"spec.initializer.{part}", given, at)
    return FilledRuntime(filled, given)


def given_path(path: str, given: Mapping[str, str]) -> str | None:
    """The TrainJob's path of a field the TrainJob gave, for a path at or below that field."""
    for filled, source in given.items():
        if path == filled:
            return source
        if path.startswith(filled) and path[len(filled)] in ".[":
            return source + path[len(filled) :]
    return None
