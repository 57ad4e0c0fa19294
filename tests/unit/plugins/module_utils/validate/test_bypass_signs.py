"""GPU sharing resources as GPU requests, CUDA images known by their tags, GKE's device injection."""

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.images import known_family
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document


def pod(*containers, annotations=None, volumes=None):
    metadata = {"name": "p", "namespace": "ns", **({"annotations": annotations} if annotations else {})}
    spec = {"containers": list(containers), **({"volumes": volumes} if volumes else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def findings(*objects, **config):
    documents = [Document("test.yaml", i, obj, i + 1) for i, obj in enumerate(objects)]
    return validate_documents(documents, RuleConfig(**config)).findings


def test_a_volcano_gpu_memory_pod_is_not_told_it_requests_no_gpu():
    c = {"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}
    assert [f.rule for f in findings(pod(c))] == ["KGPU501"]
    shared = dict(c, resources={"limits": {"volcano.sh/gpu-memory": 1024}})
    assert findings(pod(shared)) == []


@pytest.mark.parametrize(
    "limits",
    [{"aliyun.com/gpu-mem": 1024}, {"nvidia.com/gpucores": 30, "nvidia.com/gpumem": 3000}, {"gpu.intel.com/xe": 1}],
)
def test_whole_sharing_quantities_are_valid(limits):
    assert findings(pod({"name": "main", "image": "app:1", "resources": {"limits": limits}})) == []


def test_a_fractional_sharing_quantity_is_refused_in_the_api_servers_words_not_as_gpus():
    c = {"name": "main", "image": "app:1", "resources": {"limits": {"aliyun.com/gpu-mem": "5.5"}}}
    (finding,) = findings(pod(c))
    assert finding.rule == "KGPU403" and "must be an integer" in finding.message
    c = {"name": "main", "image": "app:1", "resources": {"limits": {"nvidia.com/gpucores": "30"}, "requests": {}}}
    c["resources"]["requests"]["nvidia.com/gpucores"] = "20"
    assert [f.rule for f in findings(pod(c))] == ["KGPU402"]


@pytest.mark.parametrize(
    "image",
    [
        "rayproject/ray:2.9.0-py310-cu121",
        "rayproject/ray:2.9.0-gpu",
        "rayproject/ray-ml:2.9.0-py310-gpu",
        "tensorflow/tensorflow:2.15.0-gpu",
        "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime",
        "vllm/vllm-openai:v0.6.3",
    ],
)
def test_cuda_images_known_by_repository_and_tag(image):
    assert known_family(image) is not None
    (finding,) = findings(pod({"name": "main", "image": image}))
    assert finding.rule == "KGPU501" and "requests no GPU" in finding.message


@pytest.mark.parametrize(
    "image", ["rayproject/ray:2.9.0-py310-cpu", "rayproject/ray:2.9.0", "tensorflow/tensorflow:2.15.0"]
)
def test_cpu_tags_of_the_same_repositories_are_not(image):
    assert known_family(image) is None


def test_a_cuda_build_tag_is_gpu_intent_for_a_privileged_container():
    c = {"name": "main", "image": "registry.example.com/train:1.0-cu121", "securityContext": {"privileged": True}}
    finding, likely = findings(pod(c))
    assert finding.rule == "KGPU301" and "image registry.example.com/train:1.0-cu121" in finding.message
    assert likely.rule == "KGPU501" and "a pattern match, not a known family" in likely.message
    plain = dict(c, image="registry.example.com/cucumber:1.0")
    assert [f.rule for f in findings(pod(plain))] == ["KGPU302"]


GKE_DEVICES = "- path: /dev/nvidia0\n- path: /dev/nvidiactl\n"


def test_gke_device_injection_names_the_container_that_requests_no_gpu():
    main = {"name": "main", "image": "app:1"}
    gpu = {"name": "gpu", "image": "app:1", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    annotations = {"devices.gke.io/container.main": GKE_DEVICES, "devices.gke.io/container.gpu": GKE_DEVICES}
    (finding,) = findings(pod(main, gpu, annotations=annotations))
    assert (finding.rule, finding.container) == ("KGPU603", "main")
    assert finding.path == "metadata.annotations['devices.gke.io/container.main']"
    assert "/dev/nvidia0, /dev/nvidiactl" in finding.message


@pytest.mark.parametrize(
    "annotations",
    [
        {"devices.gke.io/container.other": GKE_DEVICES},  # no such container: nothing is injected
        {"devices.gke.io/container.main": "- path: /dev/fuse\n"},  # not a GPU device
    ],
)
def test_gke_device_injection_of_nothing_gpu_is_not_a_finding(annotations):
    assert findings(pod({"name": "main", "image": "app:1"}, annotations=annotations)) == []


def test_a_driver_host_path_on_a_container_with_a_gpu_limit_says_the_toolkit_injects_it():
    volumes = [{"name": "driver", "hostPath": {"path": "/usr/local/nvidia"}}]
    mounts = [{"name": "driver", "mountPath": "/usr/local/nvidia"}]
    c = {"name": "main", "image": "app:1", "volumeMounts": mounts, "resources": {"limits": {"nvidia.com/gpu": 1}}}
    (finding,) = findings(pod(c, volumes=volumes))
    assert finding.rule == "KGPU201" and "toolkit already injects" in finding.message
    assert "requests no GPU" not in finding.message
    (without,) = findings(pod(dict(c, resources={}), volumes=volumes))
    assert "it requests no GPU" in without.message
