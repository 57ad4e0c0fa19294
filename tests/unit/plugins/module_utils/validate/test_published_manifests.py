"""Published manifests of GPU projects, judged as the validator judges them with the component
catalogue off: each finding of the classes these manifests brought in is where the rule applies.
Each fixture names its source (repository, path and commit) on its first line."""

from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.components import NO_CATALOGUE
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import parse_text

MANIFESTS = Path(__file__).resolve().parents[3] / "fixtures" / "manifests"
VOLUMES = "spec.template.spec.volumes"

# Each fixture and the findings of its class's rules it must give, as (rule, path); findings of other
# rules (privileged, /dev, ...) are left to their own tests.
EXPECTED = {
    # hostPath / or a parent of the GPU paths (KGPU203)
    "system/koordlet.yaml": {("KGPU203", f"{VOLUMES}[3].hostPath.path"), ("KGPU203", f"{VOLUMES}[4].hostPath.path")},
    "system/koord-device-daemon.yaml": {("KGPU203", f"{VOLUMES}[0].hostPath.path")},
    "system/gke-nccl-tcpxo-installer.yaml": {("KGPU203", f"{VOLUMES}[2].hostPath.path")},
    # CDI device annotations: NVIDIA's NRI plugin key (KGPU602 without a GPU)
    "published/gpu-operator-cuda-workload-validation.yaml": {
        ("KGPU602", "metadata.annotations['nvidia.cdi.k8s.io/container.cuda-validation']")
    },
    "published/gpu-operator-nri-toolkit-validation.yaml": {
        ("KGPU602", "spec.template.metadata.annotations['nvidia.cdi.k8s.io/container.toolkit-validation']")
    },
    # A CDI annotation naming a GPU beside the GPU the device plugin assigned (KGPU604): NVIDIA's passthrough
    # samples pinned PCI index 0 beside a sandbox device plugin GPU; the resource was not known as a GPU.
    "published/gpu-operator-kata-pgpu-annotation.yaml": {("KGPU604", "metadata.annotations['cdi.k8s.io/gpu']")},
    "published/gpu-operator-coco-pgpu-annotation.yaml": {("KGPU604", "metadata.annotations['cdi.k8s.io/gpu']")},
    # The same samples today, a passthrough GPU and no annotation: nothing to report.
    "published/gpu-operator-kata-pgpu-workload.yaml": set(),
    "published/coco-pgpu-workload.yaml": set(),
    # CUDA images the validator did not know: RAPIDS and NVIDIA NIM (KGPU501 without a GPU limit)
    "published/rapids-image-prepuller.yaml": {("KGPU501", "spec.template.spec.initContainers[0].image")},
    "published/nim-list-profiles.yaml": {("KGPU501", "spec.template.spec.containers[0].image")},
    "published/nim-download-all.yaml": {("KGPU501", "spec.template.spec.containers[0].image")},
    # CUDA images the validator did not know: NCCL tests images in an MPIJob launcher (KGPU501 without a GPU)
    "published/nccl-tests-h100-mpijob.yaml": {
        ("KGPU501", "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image")
    },
    "published/nccl-tests-a100-mpijob.yaml": {
        ("KGPU501", "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image")
    },
    # Text Generation Inference's CUDA image without a GPU limit (KGPU501): Datashim's model-serving Pod and
    # Deployment, and a Pod on a GPU node pool that shards over the node's GPUs without asking for them.
    "published/datashim-tgi-pod.yaml": {("KGPU501", "spec.containers[0].image")},
    "published/datashim-tgi-stable.yaml": {("KGPU501", "spec.template.spec.containers[0].image")},
    "published/cheshire-cat-tgi-pod.yaml": {("KGPU501", "spec.containers[0].image")},
    # Text Generation Inference: its CPU build without a GPU, and its CUDA build with its GPU limit: clean.
    "published/opea-tgi.yaml": set(),
    "published/opea-tgi-nv.yaml": set(),
    # NVIDIA_VISIBLE_DEVICES through valueFrom in a container that requests no GPU (KGPU104): a ConfigMap key
    # another container writes at run time, and an annotation a scheduler sets at dispatch.
    "published/cobalt-dind-configmap-visible-devices.yaml": {
        ("KGPU104", "spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef")
    },
    "published/lsf-kube-template.yaml": {("KGPU104", "spec.containers[0].env[0].valueFrom.fieldRef")},
    # No GPU device access, no KGPU203 or KGPU301 (test_host_path_reach.py holds every finding of each):
    # node monitoring agents mounting the host's / read-only; AWS Neuron's device plugin mounting /run on
    # Inferentia and Trainium nodes; Ascend's privileged device plugin with accelerator=huawei-Ascend910.
    "published/kube-prometheus-node-exporter.yaml": set(),
    "published/cadvisor-daemonset.yaml": set(),
    "published/neuron-device-plugin.yaml": set(),
    "published/neuron-helm-chart-device-plugin.yaml": set(),
    "published/ascend-device-plugin-910.yaml": set(),
    "published/ascend-device-plugin-310p.yaml": set(),
}


def judged(relative):
    text = (MANIFESTS / relative).read_text(encoding="utf-8")
    documents, error = parse_text(text, relative)
    assert error is None
    return validate_documents(documents, RuleConfig(components=NO_CATALOGUE))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_published_manifest_gives_the_findings_of_its_class(name):
    report = judged(name)
    class_rules = {rule for rule, _path in EXPECTED[name]}
    assert {(f.rule, f.path) for f in report.findings if f.rule in class_rules} == EXPECTED[name]


# Fixtures whose findings, of every rule, are exactly those of their class.
EXACT = (
    "published/gpu-operator-kata-pgpu-annotation.yaml",
    "published/gpu-operator-coco-pgpu-annotation.yaml",
    "published/gpu-operator-kata-pgpu-workload.yaml",
    "published/coco-pgpu-workload.yaml",
    "published/nccl-tests-h100-mpijob.yaml",
    "published/datashim-tgi-pod.yaml",
    "published/datashim-tgi-stable.yaml",
    "published/cheshire-cat-tgi-pod.yaml",
    "published/nccl-tests-a100-mpijob.yaml",
    "published/opea-tgi.yaml",
    "published/opea-tgi-nv.yaml",
)


@pytest.mark.parametrize("name", EXACT)
def test_a_passthrough_gpu_counts_as_the_pods_gpu(name):
    assert {(f.rule, f.path) for f in judged(name).findings} == EXPECTED[name]


def test_every_published_fixture_is_listed_and_names_its_source():
    assert sorted(f"published/{p.name}" for p in (MANIFESTS / "published").glob("*.yaml")) == sorted(
        n for n in EXPECTED if n.startswith("published/")
    )
    for name in EXPECTED:
        assert (MANIFESTS / name).read_text(encoding="utf-8").startswith("# Source: "), name
