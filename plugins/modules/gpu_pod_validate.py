# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_pod_validate
short_description: Find GPU use that bypasses the Kubernetes scheduler, in manifests and in running pods
version_added: 1.0.0
description:
  - Checks pod specs for every known way to use a GPU without the scheduler counting it, as the Alibaba
    ACK guide lists them, and for GPU quantities the API server rejects.
  - Walks Pod, PodTemplate, Deployment, ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job,
    CronJob and List objects, their containers, init containers and ephemeral containers, and pod-level
    resources, and the device requests of ResourceClaim and ResourceClaimTemplate objects (group
    C(resource.k8s.io)).
  - Walks the pod templates of the custom resources of ML platforms (Kubeflow PyTorchJob, TFJob, MPIJob,
    TrainJob and its runtimes, JobSet, LeaderWorkerSet, RayCluster, RayJob, RayService, Volcano Job, Argo
    workflows, KServe InferenceService), each finding at its path inside the resource. Any other object
    is searched for embedded pod specs by shape (a C(containers) list of mappings with an C(image)); each
    one found is checked and named in RV(notes) as C(checked by shape). Objects with none are listed in
    RV(not_checked) with the reason.
  - A container that uses one of the pod's DRA resource claims (C(resources.claims) naming an entry of
    C(spec.resourceClaims), made from a template or naming a claim) requests GPUs, as one with a GPU limit does.
  - The environment is resolved as the kubelet builds it (C(envFrom) with its C(prefix) first, then C(env),
    the last duplicate winning, C($(VAR\)) expanded) and read as the NVIDIA container toolkit reads it
    (split on commas and trimmed; V(void) or empty select nothing, V(none) selects no GPU).
  - Rules, each with its id, severity, the JSON path of the offending field, a message and a remedy.
    V(KGPU101) error, C(NVIDIA_VISIBLE_DEVICES) or a MIG device variable selects GPUs in a container
    that requests none. V(KGPU102) error, the same in a container that requests GPUs (it overrides the
    device plugin, or the DRA driver for a claim). V(KGPU103) warning, such a variable comes from a value that cannot be known here
    (C(valueFrom)) in a container that requests GPUs. V(KGPU104) error, the same in a container that requests none.
    V(KGPU201) error, a hostPath of C(/dev), C(/dev/nvidia*), C(/dev/char), C(/run/nvidia) or driver
    files is mounted, with or without a GPU limit (the toolkit injects the driver for the GPUs assigned).
    V(KGPU202) error, a mount under C(/var/run/nvidia-container-devices).
    V(KGPU203) error, a hostPath of C(/) or a parent of the GPU paths (C(/run), C(/home) and up) in a privileged
    container, or, off other vendors' accelerator nodes, writable or beside GPU intent.
    V(KGPU301) error, a privileged (or C(SYS_ADMIN)/C(ALL)) container shows GPU intent. V(KGPU302) warning,
    a privileged container without GPU signs. V(KGPU401) to V(KGPU407) errors, GPU requests without
    limits, requests not equal to limits, quantities that are not whole, negative or malformed, GPUs in
    pod-level resources or in ephemeral containers. V(KGPU501) warning, an image whose config selects all
    GPUs (official CUDA, NGC, NIM, RAPIDS, Triton, Dynamo runtime, PyTorch, TensorFlow C(-gpu), vLLM and Ray
    C(-cu121)/C(-gpu) images do) in a
    container without a GPU limit. V(KGPU601) warning, an NVIDIA
    runtime class without a GPU limit. V(KGPU602) warning, device-injection annotations (C(cdi.k8s.io/*),
    C(nvidia.cdi.k8s.io/*), C(devices.nri.io/*), C(io.kubernetes.cri-o.Devices)) without a GPU limit. V(KGPU603) error, GKE's device
    injection annotation C(devices.gke.io/container.<name>) gives C(/dev/nvidia*) to a container without a GPU
    limit. V(KGPU604) error, a CDI annotation names GPU devices (C(nvidia.com/gpu=all)) in a pod that holds
    GPUs. V(KGPU701) warning, a
    ResourceClaim or ResourceClaimTemplate asks for C(adminAccess) outside the GPU system namespaces
    (C(kube-system), C(gpu-operator), C(nvidia-gpu-operator), C(nvidia-dra-driver-gpu), C(dra-driver-nvidia-gpu),
    C(nvidia-device-plugin)). V(KGPU901) warning, the allow annotation without a reason.
  - O(src) and O(definition) take multi-document YAML, JSON, objects of kind V(List) and rendered Helm or kustomize
    output. ConfigMaps and Secrets among the manifests resolve C(envFrom) and C(valueFrom) references. A file that
    cannot be read or parsed is reported in RV(errors), the other files are still checked, and it fails the task
    too unless O(fail_on=never).
  - GPU limits, requests equal to limits, MIG and shared-GPU resources, DRA resource claims,
    C(CUDA_VISIBLE_DEVICES), and the variable named in a command, an annotation or an unused ConfigMap
    give no finding.
author:
  - kubegpu.scheduling contributors (@kubegpu)
extends_documentation_fragment:
  - kubegpu.scheduling.options.sources
  - kubegpu.scheduling.options.fail_on
  - kubegpu.scheduling.options.gpu_resources
  - kubegpu.scheduling.options.system_components
  - kubegpu.scheduling.read_only
  - kubegpu.scheduling.connection
options:
  live:
    description:
      - Check what runs in the cluster, using the connection options.
      - Workload templates are checked at the top-level workload (a Deployment, not its ReplicaSets; a
        CronJob, not its Jobs). Pods controlled by a listed workload are not checked again, except for their
        ephemeral containers, which never come from a template. Pods without a listed controller (bare
        pods, static pods, pods of custom resources not in the table) are checked in full. Finished pods
        (V(Succeeded), V(Failed)) are not checked.
      - The custom resources of the table, and ResourceClaims and ResourceClaimTemplates, are listed
        wherever the cluster serves their API (one C(GET /apis) tells), so that queued and suspended jobs are
        judged before they have pods. A list the identity may not read is named in RV(notes).
      - ConfigMaps and Secrets that C(envFrom) and C(valueFrom) refer to are read from the cluster, one
        C(get) each. Secret values only decide the findings; they never appear in the result.
    type: bool
    default: false
  namespaces:
    description:
      - In live mode, the namespaces to check. All namespaces when omitted.
    type: list
    elements: str
  skip_rules:
    description:
      - Rule ids not to report, for example V(KGPU302).
    type: list
    elements: str
    default: []
  resource_names:
    description:
      - Resource names or globs that count as GPUs besides the built-in ones (C(nvidia.com/gpu),
        C(nvidia.com/mig-*), C(*/gpu), C(nvidia.com/gpu.shared), the ACK, Volcano and HAMi shared-GPU
        resources such as C(aliyun.com/gpu-mem), C(volcano.sh/gpu-memory) and C(nvidia.com/gpucores),
        Intel's C(gpu.intel.com/i915), C(gpu.intel.com/xe), C(gpu.intel.com/millicores) and
        C(gpu.intel.com/memory.max), and the passthrough GPUs of NVIDIA's sandbox device plugin,
        C(nvidia.com/pgpu) or a model name such as C(nvidia.com/GA102GL_A10)). The built-in ones always count,
        so naming one of them, as the default does, changes nothing.
      - The alias C(gpu_resources) is deprecated and goes in 2.0.0.
    type: list
    elements: str
    default: [nvidia.com/gpu]
    aliases: [gpu_resources]
  image_env:
    description:
      - The env that image configs set, as a map of image reference (or glob) to a map of variable to
        value. See the examples.
      - Takes precedence over the image's config read from its registry (O(image_registry)) and over the
        known image families (official CUDA, NGC, NIM, RAPIDS, Triton, Dynamo runtime, PyTorch, TensorFlow
        GPU, vLLM and LMCache's vLLM, Hugging Face TGI CUDA builds, NCCL tests, KServe's Hugging Face GPU
        server and Ray GPU images, each with its Dockerfile in C(gpu/cuda_images.py)), which are treated as setting
        C(NVIDIA_VISIBLE_DEVICES=all). Map an image to V({}) to say its config sets nothing.
      - An image whose name or tag says CUDA (C(cuda12), C(cu121), C(-gpu)) and no other platform (C(-cpu), C(rocm))
        is likely CUDA; its V(KGPU501) says this is a pattern match, not a known family.
    type: dict
    default: {}
  image_registry:
    description:
      - An optional read of each image's own config from its registry (OCI distribution API), so that the image,
        not its name, says whether it sets C(NVIDIA_VISIBLE_DEVICES). Off by default, so the check stays offline.
      - Per image it sends C(GET /v2/<name>/manifests/<tag or digest>) (the linux/amd64 image of an index) and
        C(GET /v2/<name>/blobs/<config digest>) to its registry, anonymously, with a bearer token from the
        registry's C(WWW-Authenticate) realm, or with the credentials of O(image_registry.docker_config).
      - A config that sets C(NVIDIA_VISIBLE_DEVICES) (or a legacy C(CUDA_VERSION)) decides V(KGPU501), with its digest;
        one that sets neither lifts the verdict from the name (a note says so). A registry or image that cannot be
        read is a note naming the registry and the error, and the name's verdict stands. O(jobs) is not used.
    type: dict
    default: {}
    suboptions:
      read:
        description: Read image configs from their registries.
        type: bool
        default: false
      timeout:
        description: Seconds each registry request may take.
        type: float
        default: 5
      budget:
        description: Seconds all registry reads of the run may take together; images met after it is spent keep the verdict from their names.
        type: float
        default: 30
      insecure_registries:
        description: Registries (C(host:port)) read over plain HTTP instead of HTTPS.
        type: list
        elements: str
        default: []
      cache_dir:
        description: A directory where the configs read are kept by digest, for the next runs; unset, they are kept in memory for this run only.
        type: path
      docker_config:
        description: A pull secret's C(.dockerconfigjson) file, whose credentials go to their registry (or its token realm).
        type: path
  allow_annotation:
    description:
      - Annotation on an object (or its pod template) that allows its findings, for legitimate exceptions
        such as the device plugin. Its value is the reason, which is reported with each allowed finding in
        RV(allowed). Without a reason it is not honoured (V(KGPU901)).
      - Quantity findings (V(KGPU4xx)) cannot be allowed, since the API server rejects those objects anyway.
    type: str
    default: kubegpu.io/allow-bypass
  report_json:
    description:
      - Write the result as JSON to this file on the host the module runs on.
      - Reports are outputs of this read-only check, not changes to the system, so they are written in
        check mode too; C(changed) stays V(false).
    type: path
  report_sarif:
    description:
      - Write a SARIF 2.1.0 report to this file, for code scanning in CI. Paths in it are relative to the
        working directory of the module when the files lie under it.
      - Every result has a physical location. A finding in a file points at the file (and its line); a finding
        on an object read from the cluster points at the object's API path (for example
        C(api/v1/namespaces/ml/pods/trainer-0)) relative to the base id C(KUBERNETES_API), and one on an
        inline O(definition) at the API path the object would have, relative to C(INLINE_DEFINITION).
      - Written in check mode too, like O(report_json).
    type: path
  report_junit:
    description:
      - Write a JUnit XML report to this file, for the test report views of CI systems.
      - One test suite per source (a file, V(cluster) or V(definition)) and one test case per finding, named
        by rule and field, with the object as its class name. A finding that fails the task under O(fail_on)
        is a failure, one that does not is a passed case whose output says what was found, an allowed finding
        is skipped with its reason, and a file that could not be loaded is an error. A run without findings
        has one passed case, C(no findings).
      - Written in check mode too, like O(report_json).
    type: path
  max_file_size:
    description:
      - Files larger than this many bytes are not read; each is reported in RV(errors).
    type: int
    default: 33554432
  jobs:
    description:
      - Worker processes that parse and check the files of O(src), each a batch of consecutive files; the
        result is the same as with one, in the same order.
      - Unset, the number of CPUs the module may use when O(src) names 16 files or more, else V(1).
    type: int
requirements:
  - PyYAML
  - kubernetes (for O(live) only)
notes:
  - Live mode needs C(list) on pods, deployments, statefulsets, daemonsets, replicasets, cronjobs, jobs,
    replicationcontrollers and podtemplates, and C(get) on the configmaps and secrets that pods refer to
    in their env. A ConfigMap or Secret that cannot be read makes its variables unknown (V(KGPU103), V(KGPU104)).
  - Live mode also reads discovery (C(GET /apis)) and lists, where the cluster serves them, the
    resourceclaims and resourceclaimtemplates (group C(resource.k8s.io)) and the custom resources of the
    workload table (the PyTorchJobs, RayClusters, JobSets, ... that C(rbac/kubegpu-reader.yaml) names), and
    gets the collection's validatingadmissionpolicies and their bindings by name (the RV(admission) field).
    Any of these it may not read is a note (for the policies, V(unknown) with the reason), never a failure.
  - Offline, an C(envFrom) source that is not among the manifests is assumed to set no NVIDIA variable,
    unless its C(prefix) leads to one (V(KGPU103), V(KGPU104)); live mode reads it.
  - The image config env is not fetched from registries unless O(image_registry.read) is on; O(image_env),
    the known image families and names that say CUDA stand in for it.
seealso:
  - name: Alibaba ACK, use the default Kubernetes GPU scheduling
    description: The guide that lists the ways to bypass the scheduler's GPU accounting.
    link: https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/use-gpu-scheduling-in-ack-clusters
"""

EXAMPLES = r"""
- name: Check rendered manifests before they are applied
  kubegpu.scheduling.gpu_pod_validate:
    src:
      - manifests/
      - "charts/rendered/*.yaml"
    report_sarif: reports/gpu-pod-validate.sarif
    report_junit: reports/gpu-pod-validate.xml

- name: Check one object given inline
  kubegpu.scheduling.gpu_pod_validate:
    definition:
      apiVersion: v1
      kind: Pod
      metadata:
        name: cuda-vector-add
      spec:
        containers:
          - name: cuda
            image: nvidia/cuda:12.4.1-base-ubuntu22.04
            resources:
              limits:
                nvidia.com/gpu: 1

- name: Audit what runs in two namespaces, failing on warnings too
  kubegpu.scheduling.gpu_pod_validate:
    live: true
    namespaces:
      - ml-team
      - batch
    fail_on: warning
    image_env:
      registry.example.com/trainer:*:
        NVIDIA_VISIBLE_DEVICES: all

- name: Audit the cluster, with an in-house GPU agent known as a system component
  kubegpu.scheduling.gpu_pod_validate:
    live: true
    system_components:
      extra:
        - name: Acme GPU health agent
          images: [platform/acme-gpu-agent]
          commands:
            - [/usr/bin/acme-gpu-agent, "..."]
          namespaces: [acme-system]

- name: Judge the GPU system components like any workload
  kubegpu.scheduling.gpu_pod_validate:
    src: manifests/
    system_components:
      builtin: false

- name: Report only, and show the findings
  kubegpu.scheduling.gpu_pod_validate:
    src: manifests/
    fail_on: never
  register: gpu_validation

- name: Show the counts per rule
  ansible.builtin.debug:
    var: gpu_validation.summary.by_rule
"""

RETURN = r"""
findings:
  description: What was found, errors and warnings, in input order.
  returned: always
  type: list
  elements: dict
  contains:
    id: {description: "The registry id: a validator rule's code (V(KGPU101)), any other kind C(<check>.<name>)
        (V(device_plugin.no_gpu_capacity)); docs/findings.md lists them all.", type: str}
    severity: {description: "V(error), V(warning) or V(info): one scale for every check.", type: str}
    title: {description: "What the kind is, in a line.", type: str}
    message: {description: "What was found here.", type: str}
    remedy: {description: "What to do.", type: str}
    where: {description: "The places that apply, of C(node), C(device), C(pool), C(object) (C(Kind namespace/name)), C(subject), C(pod),
        C(config), C(source), C(document), C(path), C(line), C(container).", type: dict}
    container:
      description: The container, or null for findings about the pod.
      type: str
      sample: main
    path:
      description: The JSON path of the offending field from the document root.
      type: str
      sample: spec.template.spec.containers[0].env[2].value
    source:
      description: The file, V(definition), or V(cluster).
      type: str
      sample: manifests/trainer.yaml
    document:
      description: The index of the document in the file (from 0); null in live mode.
      type: int
      sample: 3
    line:
      description: The line of the offending field (or of the document) where known.
      type: int
      sample: 42
    rule: {description: "Deprecated, removed in 2.0.0 (use C(id)): the rule's code.", type: str}
    name: {description: "Deprecated, removed in 2.0.0 (use C(title)): the rule's name.", type: str}
    kind: {description: "Deprecated, removed in 2.0.0 (use C(where.object)): the kind of the object.", type: str}
    namespace: {description: "Deprecated, removed in 2.0.0 (use C(where.object)): the object's namespace; empty when the manifest names none.", type: str}
    object_name: {description: "Deprecated, removed in 2.0.0 (use C(where.object)): the object's name.", type: str}
allowed:
  description: Findings on objects that carry the allow annotation, each with C(allowed_reason).
  returned: always
  type: list
  elements: dict
not_checked:
  description: Objects that were not checked, with C(kind), C(name), C(source), C(document), C(path) and C(reason).
  returned: always
  type: list
  elements: dict
errors:
  description: Files or definitions that could not be loaded, with C(source), C(document), C(line) and C(message).
  returned: always
  type: list
  elements: dict
counts:
  description: Counts of findings by severity and by rule, and of what was checked.
  returned: always
  type: dict
  sample:
    findings: 3
    by_severity: {error: 2, warning: 1}
    by_rule:
      KGPU101: {name: visible-devices-without-gpu, severity: error, count: 2, allowed: 0}
      KGPU302: {name: privileged-container, severity: warning, count: 1, allowed: 0}
    allowed: 1
    not_checked: 4
    load_errors: 0
    objects_checked: 120
    documents: 130
    files: 12
summary:
  description: Deprecated, removed in 2.0.0; the same counts as RV(counts), read them there.
  returned: always
  type: dict
  sample:
    findings: 3
    by_severity: {error: 2, warning: 1}
    by_rule:
      KGPU101: {name: visible-devices-without-gpu, severity: error, count: 2, allowed: 0}
      KGPU302: {name: privileged-container, severity: warning, count: 1, allowed: 0}
    allowed: 1
    not_checked: 4
    load_errors: 0
    objects_checked: 120
    documents: 130
    files: 12
report:
  description: The readable report as a list of lines (object, rule, path, message, remedy), ending with the summary line.
  returned: always
  type: list
  elements: str
  sample:
    - "manifests/train.yaml:12: error KGPU101 Deployment train container 'main': ..."
    - 1 error in 3 pod specs from 1 file
report_text:
  description: Deprecated, removed in 2.0.0; the same lines as RV(report), read them there.
  returned: always
  type: list
  elements: str
  sample:
    - "manifests/train.yaml:12: error KGPU101 Deployment train container 'main': ..."
    - 1 error in 3 pod specs from 1 file
notes:
  description:
    - Remarks on the run, such as ConfigMaps or Secrets the cluster did not let the module read, custom
      resource lists it was not allowed, each pod spec C(checked by shape) with its path, and with
      O(image_registry.read) each image config that could not be read or that lifted a verdict from a name.
    - In live mode, one line saying which of the collection's admission policies are in force.
  returned: always
  type: list
  elements: str
admission:
  description:
    - Live mode, whether the collection's ValidatingAdmissionPolicies (M(kubegpu.scheduling.gpu_admission_policy))
      are in force. C(state) is V(read), or V(unknown) with the C(reason) where the cluster does not serve the API or
      forbids reading it; the audit does not fail for that.
    - Each policy says whether the policy and its binding exist, its validation actions and whether they include Deny.
  returned: when live is true
  type: dict
  sample:
    state: read
    reason: null
    policies:
      - name: kubegpu-gpu-bypass
        policy: true
        binding: true
        in_force: true
        validation_actions: [Deny, Audit]
        deny: true
api_requests:
  description: The API requests the run made, pages and retries included; V(0) without O(live).
  returned: always
  type: int
  sample: 14
"""

from dataclasses import replace
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.plan import enforcement_summary
from ansible_collections.kubegpu.scheduling.plugins.module_utils.admission.reads import read_enforcement
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import (
    catalogue_from_option,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import (
    CheckFailed,
    KubegpuError,
    OptionError,
    error_context,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.module import (
    api_module,
    errors_fail,
    module_client,
    require_library,
    with_connection_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.options.groups import (
    FAIL_ON,
    GPU_RESOURCES,
    SOURCES,
    SYSTEM_COMPONENTS,
    module_options,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.batches import default_jobs
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig, unknown_rules
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import Report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import image_env_map
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.junit import junit_xml
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import (
    DEFAULT_MAX_FILE_SIZE,
    HAS_YAML,
    load_manifests,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.parallel import usable_cpus
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.reads import live_report
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.registry_reads import (
    IMAGE_REGISTRY_OPTIONS,
    registry_reader,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.report import (
    ReportWriteError,
    failed,
    failure_message,
    format_text,
    json_report,
    merge_reports,
    offline_report,
    result_fields,
    summarize,
    write_json,
    write_text,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.rules import DEFAULT_ALLOW_ANNOTATION
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.sarif import sarif_report


def argument_spec() -> dict[str, Any]:
    spec = module_options(
        dict(
            live={"type": "bool", "default": False},
            namespaces={"type": "list", "elements": "str"},
            skip_rules={"type": "list", "elements": "str", "default": []},
            image_env={"type": "dict", "default": {}},
            image_registry={"type": "dict", "default": {}, "options": IMAGE_REGISTRY_OPTIONS},
            allow_annotation={"type": "str", "default": DEFAULT_ALLOW_ANNOTATION},
            report_json={"type": "path"},
            report_sarif={"type": "path"},
            report_junit={"type": "path"},
            max_file_size={"type": "int", "default": DEFAULT_MAX_FILE_SIZE},
            jobs={"type": "int"},
        ),
        (SOURCES, FAIL_ON, GPU_RESOURCES, SYSTEM_COMPONENTS),
        renamed={"gpu_resources": "resource_names"},
    )
    return with_connection_options(spec)


def rule_config(params: dict[str, Any]) -> RuleConfig:
    unknown = unknown_rules(params["skip_rules"])
    if unknown:
        raise OptionError(f"skip_rules: unknown rule id(s) {', '.join(unknown)}")
    return RuleConfig(
        gpu_resources=tuple(params["resource_names"]),
        image_env=image_env_map(params["image_env"], "image_env"),
        allow_annotation=params["allow_annotation"],
        skip_rules=frozenset(params["skip_rules"]),
        components=catalogue_from_option(params["system_components"]),
    )


def validate(module: AnsibleModule) -> tuple[Report, dict[str, Any] | None, int]:
    """The report, in live mode which of the collection's admission policies are in force, and the API
    requests made."""
    params = module.params
    if not params["src"] and params["definition"] is None and not params["live"]:
        raise OptionError("one of src, definition or live=true is required")
    if params["max_file_size"] <= 0:
        raise OptionError("max_file_size must be positive")
    if params["jobs"] is not None and params["jobs"] < 1:
        raise OptionError("jobs must be 1 or more")
    config = replace(rule_config(params), image_reader=(reader := registry_reader(params["image_registry"])))
    reports = []
    admission = None
    requests = 0
    if params["src"] or params["definition"] is not None:
        manifests = load_manifests(params["src"] or [], params["definition"], params["max_file_size"])
        jobs = params["jobs"] if params["jobs"] is not None else default_jobs(len(manifests.paths), usable_cpus())
        jobs = jobs if reader is None else 1
        reports.append(offline_report(manifests, config, jobs))
    if params["live"]:
        client = module_client(module)
        with error_context("live audit"):
            reports.append(live_report(client, config, params["namespaces"]))
        admission = read_enforcement(client)
        requests = client.request_count
    report = merge_reports(reports)
    report.notes.extend(reader.notes if reader is not None else ())
    if admission is not None:
        report.notes.append(enforcement_summary(admission))
    return report, admission, requests


def main() -> None:
    module = api_module(argument_spec())
    with errors_fail(module):
        require_library(HAS_YAML, "PyYAML")
        result = validate_and_report(module)
    module.exit_json(**result)


def validate_and_report(module: AnsibleModule) -> dict[str, Any]:
    """The findings, the report files written, and the result; the findings at fail_on fail the task."""
    params = module.params
    report, admission, requests = validate(module)
    write_reports(params, report)
    summary = summarize(report)
    lines = format_text(report, summary).splitlines()
    fields = result_fields(report)
    result = dict(
        fields,
        counts=fields["summary"],
        notes=report.notes,
        changed=False,
        report=lines,
        report_text=lines,
        api_requests=requests,
    )
    if admission is not None:
        result["admission"] = admission
    if failed(summary, params["fail_on"]):
        raise CheckFailed(failure_message(report, summary), result=result)
    return result


def write_reports(params: dict[str, Any], report: Any) -> None:
    try:
        if params["report_json"]:
            write_json(params["report_json"], json_report(report))
        if params["report_sarif"]:
            write_json(params["report_sarif"], sarif_report(report))
        if params["report_junit"]:
            write_text(params["report_junit"], junit_xml(report, params["fail_on"]))
    except ReportWriteError as exc:
        raise KubegpuError(str(exc), result=dict(changed=False, **result_fields(report))) from None


if __name__ == "__main__":
    main()
