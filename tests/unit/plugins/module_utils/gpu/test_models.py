import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import (
    DEFAULT_MODEL_LABEL_KEYS,
    LABEL_VALUE_MAX_LENGTH,
    capacity_signals,
    detect_model,
    is_valid_label_value,
    label_gpu_count,
    label_signals,
    looks_like_gpu_node,
    needed_label_keys,
    sanitize_label_value,
    split_model_suffixes,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher

IS_GPU = gpu_resource_matcher()


@pytest.mark.parametrize(
    "value",
    [
        # GFD and ACK values seen on real nodes (see gpu-conventions.md §1)
        "A100-SXM4-40GB",
        "NVIDIA-A100-PCIE-40GB",
        "NVIDIA-H100-80GB-HBM3",
        "Tesla-V100-SXM2-16GB",
        "Tesla-P100-PCIE-16GB",
        "A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia-tesla-t4",
        "t4",
    ],
)
def test_valid_values_are_kept_unchanged(value):
    assert is_valid_label_value(value)
    assert sanitize_label_value(value) == value


@pytest.mark.parametrize(
    "raw, expected",
    [
        # nvidia-smi names: GFD turns spaces into dashes
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("Tesla T4", "Tesla-T4"),
        # k8s-device-plugin#514: GFD leaves the parentheses, the API server rejects the label
        ("NVIDIA TITAN X (Pascal)", "NVIDIA-TITAN-X-Pascal"),
        ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"),
        # MIG profiles with attributes carry a '+'
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb+me", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-me"),
        ("  padded  ", "padded"),
        ("--x--", "x"),
        ("(((", ""),
        ("", ""),
    ],
)
def test_sanitize_label_value(raw, expected):
    assert sanitize_label_value(raw) == expected


@pytest.mark.parametrize("raw", [None, 7, ["A100"], {"a": 1}])
def test_sanitize_non_strings_gives_empty(raw):
    assert sanitize_label_value(raw) == ""


def test_long_value_is_capped_and_keeps_mig_profile():
    raw = "NVIDIA GeForce RTX 4090 D (Laptop) with a very long board name that goes on-MIG-7g.80gb"
    value = sanitize_label_value(raw)
    assert len(value) == LABEL_VALUE_MAX_LENGTH
    assert is_valid_label_value(value)
    assert value.startswith("NVIDIA-GeForce-RTX-4090-D-Laptop")
    assert value.endswith("-MIG-7g.80gb")


def test_long_values_for_two_mig_profiles_stay_distinct():
    base = "NVIDIA-Some-Very-Long-Accelerator-Name-With-Many-Words-In-It-And-More"
    first = sanitize_label_value(base + "-MIG-1g.10gb")
    second = sanitize_label_value(base + "-MIG-2g.20gb")
    assert first != second
    assert is_valid_label_value(first) and is_valid_label_value(second)


def test_long_value_without_suffix_is_cut_at_63():
    assert sanitize_label_value("x" * 70) == "x" * 63
    assert sanitize_label_value("a" * 62 + "-b") == "a" * 62


@given(st.text(max_size=120))
def test_sanitized_values_are_valid_and_stable(raw):
    value = sanitize_label_value(raw)
    assert value == "" or is_valid_label_value(value)
    assert sanitize_label_value(value) == value


@pytest.mark.parametrize("value", ["-a", "a-", "a b", "a(b)", "x" * 64, "ä"])
def test_invalid_label_values(value):
    assert not is_valid_label_value(value)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("A100-SXM4-40GB-MIG-1g.5gb", ("A100-SXM4-40GB", "1g.5gb", False)),
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb+me", ("NVIDIA-A100-SXM4-80GB", "1g.10gb+me", False)),
        ("Tesla-T4-SHARED", ("Tesla-T4", None, True)),
        ("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED", ("NVIDIA-H100-80GB-HBM3", "3g.40gb", True)),
        ("NVIDIA-H100-80GB-HBM3", ("NVIDIA-H100-80GB-HBM3", None, False)),
        ("MIG-1g.5gb", ("MIG-1g.5gb", None, False)),
    ],
)
def test_split_model_suffixes(value, expected):
    assert split_model_suffixes(value) == expected


def test_detect_model_follows_key_order():
    labels = {
        "accelerator": "a100",
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    }
    detection = detect_model(labels)
    assert detection.model == "NVIDIA-A100-SXM4-40GB"
    assert detection.source == "nvidia.com/gpu.product"
    assert detection.label_value == "NVIDIA-A100-SXM4-40GB"


def test_detect_model_with_custom_keys():
    labels = {"nvidia.com/gpu.product": "Tesla-T4", "example.com/gpu": "t4-custom"}
    detection = detect_model(labels, ["example.com/gpu", "nvidia.com/gpu.product"])
    assert (detection.model, detection.source) == ("t4-custom", "example.com/gpu")


def test_detect_model_skips_vendor_only_values():
    # aks-engine labels GPU nodes accelerator=nvidia: a vendor, not a model
    detection = detect_model({"accelerator": "nvidia", "k8s.amazonaws.com/accelerator": "nvidia-tesla-v100"})
    assert detection.model == "nvidia-tesla-v100"
    assert detect_model({"accelerator": "nvidia"}).model is None


def test_detect_model_sanitises_and_reads_mig_profile():
    detection = detect_model({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb+me"})
    assert detection.label_value == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-me"
    assert detection.mig_profile == "1g.10gb+me"


def test_detect_model_with_nothing_usable():
    detection = detect_model({"nvidia.com/gpu.product": "(((", "unrelated": "x"})
    assert detection.model == "((("
    assert detection.label_value is None
    assert detect_model({}).model is None
    assert detect_model({"nvidia.com/gpu.product": 5}).model is None


def test_default_key_order_is_the_documented_one():
    assert DEFAULT_MODEL_LABEL_KEYS[0] == "nvidia.com/gpu.product"
    assert DEFAULT_MODEL_LABEL_KEYS[1] == "aliyun.accelerator/nvidia_name"
    assert DEFAULT_MODEL_LABEL_KEYS[-1] == "accelerator"


@pytest.mark.parametrize(
    "labels, expected",
    [
        ({"nvidia.com/gpu.present": "true"}, ["nvidia.com/gpu.present=true"]),
        ({"nvidia.com/gpu.present": "false"}, []),
        ({"feature.node.kubernetes.io/pci-10de.present": "true"}, ["feature.node.kubernetes.io/pci-10de.present=true"]),
        ({"nvidia.com/gpu.count": "8"}, ["nvidia.com/gpu.count=8"]),
        ({"aliyun.accelerator/nvidia_count": "0"}, []),
        ({"aliyun.accelerator/nvidia_name": "Tesla-T4"}, ["aliyun.accelerator/nvidia_name=Tesla-T4"]),
        ({"accelerator": "nvidia"}, ["accelerator=nvidia"]),
        ({"kubernetes.io/os": "linux"}, []),
    ],
)
def test_label_signals(labels, expected):
    assert label_signals(labels) == expected


def test_capacity_signals_and_gpu_node():
    assert capacity_signals({"nvidia.com/gpu": 4, "cpu": 8}, IS_GPU) == ["capacity nvidia.com/gpu=4"]
    assert capacity_signals({"nvidia.com/gpu": 0}, IS_GPU) == []
    assert looks_like_gpu_node({}, {"nvidia.com/mig-1g.5gb": 7}, IS_GPU)
    assert looks_like_gpu_node({"nvidia.com/gpu.present": "true"}, {}, IS_GPU)
    assert not looks_like_gpu_node({"kubernetes.io/os": "linux"}, {"cpu": 8}, IS_GPU)


def test_label_gpu_count():
    assert label_gpu_count({"nvidia.com/gpu.count": "8"}) == 8
    assert label_gpu_count({"aliyun.accelerator/nvidia_count": "4"}) == 4
    assert label_gpu_count({"nvidia.com/gpu.count": "many"}) is None
    assert label_gpu_count({}) is None


def test_needed_label_keys_cover_models_and_signals():
    keys = needed_label_keys(["example.com/gpu"])
    assert "example.com/gpu" in keys
    assert "nvidia.com/gpu.present" in keys
    assert "aliyun.accelerator/nvidia_count" in keys
    assert "nvidia.com/gpu.product" not in keys
