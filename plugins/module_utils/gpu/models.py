# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU models from node labels, and label values made valid."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

UNKNOWN_MODEL = "unknown"
DEFAULT_MODEL_LABEL_KEYS: tuple[str, ...] = (
    "nvidia.com/gpu.product",
    "aliyun.accelerator/nvidia_name",
    "cloud.google.com/gke-accelerator",
    "eks.amazonaws.com/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-name",
    "k8s.amazonaws.com/accelerator",
    "accelerator",
)

# Label keys whose value `true` says the node has an NVIDIA GPU without naming the model.
PRESENCE_LABEL_KEYS: tuple[str, ...] = (
    "nvidia.com/gpu.present",
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)

# Label keys holding a GPU count.
COUNT_LABEL_KEYS: tuple[str, ...] = (
    "nvidia.com/gpu.count",
    "aliyun.accelerator/nvidia_count",
)

# Values that name a vendor or a flag rather than a model (aks-engine sets `accelerator=nvidia`).
_NOT_A_MODEL = frozenset({"", "nvidia", "true", "false", "none"})
LABEL_VALUE_MAX_LENGTH = 63
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_INVALID_RUN = re.compile(r"-*[^-A-Za-z0-9_.]+-*")
_EDGE_JUNK = "-_."

# GFD appends `-MIG-<profile>` under the single MIG strategy and `-SHARED` when the GPU is
# time-sliced or shared through MPS (k8s-device-plugin internal/lm/resource.go).
_MIG_SUFFIX = re.compile(r"^(?P<base>.+?)-MIG-(?P<profile>\d+g\.\d+gb(?:[-+._A-Za-z0-9]*)?)$")
_SHARED_SUFFIX = "-SHARED"


@dataclass(frozen=True)
class ModelDetection:
    """The model a node's labels name, which key named it, and the value as a valid label value."""

    model: str | None
    source: str | None
    label_value: str | None
    mig_profile: str | None = None
    shared: bool = False


_LABEL_NAME = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$")


def label_key_problem(key: object) -> str | None:
    """Why `key` is not a valid label key (`[prefix/]name`), or None when it is."""
    if not isinstance(key, str) or not key:
        return "a label key must be a non-empty string"
    prefix, _slash, name = key.rpartition("/")
    if "/" in prefix:
        return "a label key has at most one '/'"
    if key.startswith("/") or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))):
        return "the prefix before '/' must be a lowercase DNS subdomain of at most 253 characters"
    if len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            "the name must be at most 63 characters: alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
        )
    return None


def is_valid_label_value(value: object) -> bool:
    return isinstance(value, str) and len(value) <= LABEL_VALUE_MAX_LENGTH and bool(_LABEL_VALUE.match(value))


def sanitize_label_value(raw: object) -> str:
    """A valid label value for a model name ("" when nothing usable is left).

    Spaces become `-` as GFD does; every run of characters a label value may not hold
    becomes one `-`; the ends are trimmed to alphanumerics. Values over 63 characters lose
    the end of the model name but keep a MIG profile and `-SHARED`, so that different MIG
    profiles of one GPU stay different values. A valid value is returned unchanged.
    """
    if not isinstance(raw, str):
        return ""
    value = raw.strip().replace(" ", "-")
    if is_valid_label_value(value):
        return value
    value = _INVALID_RUN.sub("-", value).strip(_EDGE_JUNK)
    if len(value) <= LABEL_VALUE_MAX_LENGTH:
        return value
    base, mig_profile, shared = split_model_suffixes(value)
    suffix = (f"-MIG-{mig_profile}" if mig_profile else "") + (_SHARED_SUFFIX if shared else "")
    if len(suffix) >= LABEL_VALUE_MAX_LENGTH // 2:
        suffix = ""
    return base[: LABEL_VALUE_MAX_LENGTH - len(suffix)].rstrip(_EDGE_JUNK) + suffix


def split_model_suffixes(value: str) -> tuple[str, str | None, bool]:
    """Split GFD's `-SHARED` and `-MIG-<profile>` suffixes off a product label value."""
    shared = value.endswith(_SHARED_SUFFIX)
    if shared:
        value = value[: -len(_SHARED_SUFFIX)]
    match = _MIG_SUFFIX.match(value)
    if match:
        return match["base"], match["profile"], shared
    return value, None, shared


def _label_text(labels: Mapping[str, object], key: str) -> str:
    value = labels.get(key)
    return value.strip() if isinstance(value, str) else ""


def names_a_model(value: str) -> bool:
    return value.lower() not in _NOT_A_MODEL


def detect_model(labels: Mapping[str, object], keys: Sequence[str] = DEFAULT_MODEL_LABEL_KEYS) -> ModelDetection:
    """The first label in `keys` that names a model."""
    for key in keys:
        value = _label_text(labels, key)
        if names_a_model(value):
            _base, mig_profile, shared = split_model_suffixes(value)
            return ModelDetection(value, key, sanitize_label_value(value) or None, mig_profile, shared)
    return ModelDetection(None, None, None)


def _positive_int(text: str) -> bool:
    return text.isdigit() and int(text) > 0


def label_signals(labels: Mapping[str, object], model_keys: Sequence[str] = DEFAULT_MODEL_LABEL_KEYS) -> list[str]:
    """The labels that say a node has GPUs, as `key=value` strings, in a stable order."""
    signals = [f"{key}={_label_text(labels, key)}" for key in model_keys if _label_text(labels, key)]
    signals += [f"{key}=true" for key in PRESENCE_LABEL_KEYS if _label_text(labels, key).lower() == "true"]
    signals += [
        f"{key}={_label_text(labels, key)}" for key in COUNT_LABEL_KEYS if _positive_int(_label_text(labels, key))
    ]
    return signals


def count_label(labels: Mapping[str, object]) -> tuple[str, int] | None:
    """The first label that states a GPU count, and the count (GFD's under MIG single is the MIG device count)."""
    for key in COUNT_LABEL_KEYS:
        text = _label_text(labels, key)
        if text.isdigit():
            return key, int(text)
    return None


def label_gpu_count(labels: Mapping[str, object]) -> int | None:
    """The GPU count a label states, if any."""
    found = count_label(labels)
    return found[1] if found else None


def capacity_signals(capacity: Mapping[str, int], is_gpu: Callable[[str], bool]) -> list[str]:
    return [f"capacity {name}={count}" for name, count in sorted(capacity.items()) if is_gpu(name) and count > 0]


def looks_like_gpu_node(
    labels: Mapping[str, object],
    capacity: Mapping[str, int],
    is_gpu: Callable[[str], bool],
    model_keys: Sequence[str] = DEFAULT_MODEL_LABEL_KEYS,
) -> bool:
    return bool(label_signals(labels, model_keys) or capacity_signals(capacity, is_gpu))


def needed_label_keys(model_keys: Iterable[str] = DEFAULT_MODEL_LABEL_KEYS) -> frozenset[str]:
    """Every label key model detection and the GPU-node signals read."""
    return frozenset(model_keys) | frozenset(PRESENCE_LABEL_KEYS) | frozenset(COUNT_LABEL_KEYS)


ACK_SCHEDULE_LABEL = "ack.node.gpu.schedule"
ACK_EXCLUSIVE_MODE = "default"
DRIVER_VERSION_LABEL = "nvidia.com/cuda.driver-version.full"
DRIVER_VERSION_PART_LABELS = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
CUDA_VERSION_LABEL = "nvidia.com/cuda.runtime-version.full"
CUDA_VERSION_PART_LABELS = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor")
ACK_DRIVER_LABEL = "ack.aliyun.com/nvidia-driver-version"
VERSION_LABELS = (
    DRIVER_VERSION_LABEL,
    *DRIVER_VERSION_PART_LABELS,
    CUDA_VERSION_LABEL,
    *CUDA_VERSION_PART_LABELS,
    ACK_DRIVER_LABEL,
    ACK_SCHEDULE_LABEL,
)


def _joined_version(labels: Mapping[str, str], full_key: str, part_keys: Sequence[str]) -> str | None:
    if labels.get(full_key):
        return labels[full_key]
    parts = [labels.get(key) for key in part_keys]
    return ".".join(p for p in parts if p) if parts[0] else None


def driver_version(labels: Mapping[str, str]) -> str | None:
    return _joined_version(labels, DRIVER_VERSION_LABEL, DRIVER_VERSION_PART_LABELS) or labels.get(ACK_DRIVER_LABEL)


def cuda_version(labels: Mapping[str, str]) -> str | None:
    return _joined_version(labels, CUDA_VERSION_LABEL, CUDA_VERSION_PART_LABELS)
