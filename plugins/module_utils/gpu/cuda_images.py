# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CUDA images, as data: the families known to carry NVIDIA_VISIBLE_DEVICES=all in their own config,
each with the source that shows it (the family's Dockerfile: repository, path and commit), and the
name and tag patterns that make an image likely a CUDA build without being a known family.

A family's patterns are read by the offline validator (Python) and rendered into the admission
policies (CEL's RE2), so they keep to the syntax both engines share and are anchored at the start.
The likely-CUDA patterns are read by the validator only.

Why a family carries the variable: the CUDA base images (nvidia/cuda, built from NVIDIA's
container-images/cuda repository, ``dist/<version>/<os>/base/Dockerfile``) set
``ENV NVIDIA_VISIBLE_DEVICES all``, and every image built FROM them inherits it."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The source of the CUDA base image's variable, which the families below inherit through FROM.
CUDA_BASE_SOURCE = "nvidia/cuda: NVIDIA container-images/cuda dist/*/*/base/Dockerfile, ENV NVIDIA_VISIBLE_DEVICES all"


@dataclass(frozen=True)
class ImageFamily:
    pattern: re.Pattern[str]
    description: str
    tag_pattern: re.Pattern[str] | None = None
    # Where the family's image gets NVIDIA_VISIBLE_DEVICES: its Dockerfile (repository, path, commit).
    source: str = CUDA_BASE_SOURCE


# TGI's CUDA builds are tagged by release (3.0.1, 2.4), latest or sha-<commit>; its other builds carry
# the platform in the tag (2.4.0-intel-cpu, 2.4.1-rocm, 3.0.1-intel-xpu, latest-gaudi, ...).
_TGI_CUDA_TAGS = r"^(?:latest|sha-[0-9a-f]+|\d+(?:\.\d+)*)?$"

KNOWN_IMAGE_FAMILIES = (
    ImageFamily(re.compile(r"^(?:.+/)?nvidia/cuda$"), "the official CUDA image"),
    ImageFamily(re.compile(r"^nvcr\.io/nvidia/"), "an NVIDIA NGC image, built on the CUDA base image"),
    # NVIDIA NIM microservices (nvcr.io/nim/<publisher>/<model>), built on the CUDA base image.
    ImageFamily(re.compile(r"^nvcr\.io/nim/"), "an NVIDIA NIM image, built on the CUDA base image"),
    # RAPIDS (rapidsai/docker): rapidsai/base and rapidsai/notebooks are built FROM the nvidia/cuda images,
    # also when mirrored (us-central1-docker.pkg.dev/nv-ai-infra/rapidsai/rapidsai/base in rapidsai/deployment).
    ImageFamily(
        re.compile(r"^(?:.+/)?rapidsai/(?:base|notebooks|rapidsai(?:-core)?(?:-dev)?(?:-nightly)?)$"),
        "a RAPIDS image, built on the CUDA base image",
        source="rapidsai/docker Dockerfile (FROM nvidia/cuda)",
    ),
    # Mirrors of NGC's Triton and Dynamo runtime images, and of the vLLM image, under another registry.
    ImageFamily(
        re.compile(r"^(?:.+/)?tritonserver$"), "the Triton Inference Server image, built on the CUDA base image"
    ),
    ImageFamily(
        re.compile(r"^(?:.+/)?ai-dynamo/(?:vllm|sglang|tensorrtllm)-runtime$"),
        "an NVIDIA Dynamo runtime image, built on the CUDA base image",
    ),
    ImageFamily(re.compile(r"^nvidia/"), "an NVIDIA image, built on the CUDA base image"),
    ImageFamily(re.compile(r"^(?:.+/)?cuda(?:[-_][^/]*)?$"), "a CUDA image"),
    ImageFamily(
        re.compile(r"^pytorch/pytorch$"),
        "the PyTorch image",
        source="pytorch/pytorch Dockerfile at f658b151305e4fa06b0cdf6d15a48a8ff1dca1b0 (ENV NVIDIA_VISIBLE_DEVICES all)",
    ),
    ImageFamily(
        re.compile(r"^tensorflow/tensorflow$"),
        "the TensorFlow GPU image",
        re.compile(r"gpu"),
        source="tensorflow/tensorflow tensorflow/tools/dockerfiles (the -gpu images, FROM nvidia/cuda)",
    ),
    # vllm/vllm-openai, and LMCache's build of it (lmcache/vllm-openai, the vLLM production stack's image).
    ImageFamily(
        re.compile(r"^(?:.+/)?(?:vllm|lmcache)/vllm-openai$"),
        "the vLLM image, built on the CUDA base image",
        source="vllm-project/vllm docker/Dockerfile at dead20baf70df70580ecb093f82b0b7b8676e4f5 (FROM nvidia/cuda); "
        "LMCache/LMCache docker/Dockerfile at ab6cf272d6ec18b93309faae59be5472ab78132f",
    ),
    # Hugging Face Text Generation Inference, its CUDA builds (the tag names the platform of the others).
    ImageFamily(
        re.compile(r"^(?:.+/)?huggingface/text-generation-inference$"),
        "the Text Generation Inference CUDA image, built on the CUDA base image",
        re.compile(_TGI_CUDA_TAGS),
        source="huggingface/text-generation-inference Dockerfile at e32528792cc7ccfdc5dd4b10fecedeb907422261 "
        "(FROM nvidia/cuda:12.4.0-base-ubuntu22.04 AS base)",
    ),
    # NCCL tests images (CoreWeave's, and mirrors of it), built FROM nvidia/cuda devel images.
    ImageFamily(
        re.compile(r"^(?:.+/)?nccl-tests$"),
        "an NCCL tests image, built on the CUDA base image",
        source="coreweave/nccl-tests Dockerfile at 2eedd7c1905a074cebacd30febbc6db06a6d3f00 "
        "(ARG BASE_IMAGE=nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04)",
    ),
    # KServe's Hugging Face runtime, its GPU build (tags ending -gpu; the CPU build is huggingfaceserver:<v>).
    ImageFamily(
        re.compile(r"^(?:.+/)?kserve/huggingfaceserver$"),
        "KServe's Hugging Face server GPU image",
        re.compile(r"-gpu$"),
        source="kserve/kserve python/huggingface_server.Dockerfile at 30a4c85244049054de241f2099f2efa913d013d0 "
        "(ENV NVIDIA_VISIBLE_DEVICES=all)",
    ),
    # ray-project/ray docker/base-deps: the GPU tags (-cu121, -gpu) are built FROM the nvidia/cuda images.
    ImageFamily(
        re.compile(r"^rayproject/ray(?:-ml|-llm)?$"),
        "a Ray GPU image, built on the CUDA base image",
        re.compile(r"(?:^|-)(?:cu\d{2,3}|gpu)(?:-|$)"),
        source="ray-project/ray docker/base-deps/Dockerfile at 2135df0b9f5fddff791bfbac9bd6f2a51ed583e3 (FROM a CUDA base)",
    ),
)

# --- Likely CUDA: patterns, not families ----------------------------------------------------------

# Words of a name or tag that mean a CUDA build: "cuda" as a word (cuda, cuda12, -cuda-), cu11x/cu12x/cu13x
# (PyTorch's wheel tags: cu121, cu118), "gpu" as a word (tensorflow:2.x-gpu, huggingfaceserver-gpu).
# A word ends at anything that is not a letter, so "barracuda" or "cudatoolkit-less" words do not match,
# and neither does "gpustat".
_LIKELY_CUDA = re.compile(r"(?:^|[^a-z])(cuda|cu1[1-3]\d?|gpu)(?=[^a-z]|$)")
# Words that name another platform's build: a CPU build (-cpu), ROCm, Intel XPU/HPU and Gaudi, Neuron,
# OpenVINO, Apple MPS; an image with one of these is not taken for CUDA by its name.
_NOT_CUDA = re.compile(r"(?:^|[^a-z])(cpu|rocm|xpu|hpu|gaudi|neuron|openvino|mps)(?=[^a-z]|$)")


@dataclass(frozen=True)
class LikelyCuda:
    word: str  # the word that matched (cuda12, cu121, gpu)
    where: str  # "name" or "tag"
    text: str  # the name or tag it was found in

    def note(self) -> str:
        return (
            f"likely a CUDA image: {self.word!r} in its {self.where} {self.text!r}, a pattern match, not a known "
            "family; CUDA images set NVIDIA_VISIBLE_DEVICES=all"
        )


def likely_cuda(repository: str, tag: str) -> LikelyCuda | None:
    """Whether an image's last name part or tag says it is a CUDA build (and no word says otherwise);
    ``repository`` lower case as gpu/intent.py image_repository gives it."""
    name = repository.rsplit("/", 1)[-1]
    tag = tag.lower()
    if _NOT_CUDA.search(name) or _NOT_CUDA.search(tag):
        return None
    for where, text in (("tag", tag), ("name", name)):
        found = _LIKELY_CUDA.search(text)
        if found:
            return LikelyCuda(found[1], where, text)
    return None
