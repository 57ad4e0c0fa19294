"""CUDA images known by what they are: the families with their sources, and the name and tag patterns
that make an image likely a CUDA build (a pattern match, said so), with their impostors."""

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.cuda_images import (
    KNOWN_IMAGE_FAMILIES,
    likely_cuda,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.intent import image_repository, known_family
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document


def findings(image, **container):
    spec = {"containers": [{"name": "main", "image": image, **container}]}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}
    return validate_documents([Document("test.yaml", 0, pod, 1)], RuleConfig()).findings


def likely(image):
    return likely_cuda(*image_repository(image))


def test_every_family_names_its_source_and_is_anchored_for_admission():
    for family in KNOWN_IMAGE_FAMILIES:
        assert family.source and family.pattern.pattern.startswith("^"), family.description


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/huggingface/text-generation-inference:3.0.1",
        "ghcr.io/huggingface/text-generation-inference:sha-7e2a743",
        "ghcr.io/huggingface/text-generation-inference",
        "ghcr.io/coreweave/nccl-tests:12.4.1-cudnn-devel-ubuntu20.04-nccl2.21.5-1-85f9143",
        "lmcache/vllm-openai:2025-05-05-v1",
        "kserve/huggingfaceserver:v0.15.0-gpu",
    ],
)
def test_the_new_families(image):
    assert known_family(image) is not None
    (finding,) = findings(image)
    assert finding.rule == "KGPU501" and "pattern match" not in finding.message


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/huggingface/text-generation-inference:2.4.0-intel-cpu",
        "ghcr.io/huggingface/text-generation-inference:2.4.1-rocm",
        "ghcr.io/huggingface/text-generation-inference:latest-gaudi",
        "kserve/huggingfaceserver:v0.15.0",
    ],
)
def test_other_platform_builds_of_the_families_are_not(image):
    assert known_family(image) is None and likely(image) is None
    assert findings(image) == []


@pytest.mark.parametrize(
    ("image", "word", "where"),
    [
        ("quay.io/jupyter/pytorch-notebook:cuda12-2024-10-07", "cuda", "tag"),
        ("kubeflownotebookswg/jupyter-pytorch-cuda-full:v1.9.0", "cuda", "name"),
        ("registry.example.com/train:2.3.0-cu121", "cu121", "tag"),
        ("registry.example.com/train:cu118", "cu118", "tag"),
        ("tensorflow/serving:2.15.0-gpu", "gpu", "tag"),
        ("huggingfaceserver-gpu:replace", "gpu", "name"),
        ("ghcr.io/llm-d/llm-d-cuda:v0.9.0", "cuda", "name"),
    ],
)
def test_likely_cuda_by_name_or_tag_says_it_is_a_pattern_match(image, word, where):
    found = likely(image)
    assert (found.word, found.where) == (word, where)
    (finding,) = findings(image)
    assert finding.rule == "KGPU501"
    assert "likely a CUDA image" in finding.message and "a pattern match, not a known family" in finding.message


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/barracuda:1.0",  # cuda inside a word
        "registry.example.com/app:barracuda",
        "registry.example.com/cudnn-tools:1",
        "registry.example.com/gpustat:1.1",
        "tensorflow/serving:2.15.0",
        "registry.example.com/model-server:2.1-cpu",  # a CPU build
        "registry.example.com/model-server-cpu:2.1-cu121",
        "registry.example.com/train:2.3-rocm6.1-gpu",
        "registry.example.com/cucumber:1.0",
    ],
)
def test_impostors_and_cpu_builds_are_not_likely_cuda(image):
    assert likely(image) is None
    assert findings(image) == []


def test_a_likely_cuda_image_with_a_gpu_limit_or_void_is_fine():
    assert findings("registry.example.com/train:cu121", resources={"limits": {"nvidia.com/gpu": 1}}) == []
    assert findings("registry.example.com/train:cu121", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]) == []
