from decimal import Decimal

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_resource_matcher
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.quantity import (
    QuantityError,
    gpu_count,
    is_whole,
    parse_quantity,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1", Decimal(1)),
        ("1000m", Decimal(1)),
        ("1500m", Decimal("1.5")),
        ("0.5", Decimal("0.5")),
        ("0.9999", Decimal("0.9999")),
        ("16Gi", Decimal(16 * 2**30)),
        ("2k", Decimal(2000)),
        ("1e3", Decimal(1000)),
        ("-1", Decimal(-1)),
        (2, Decimal(2)),
        (0.5, Decimal("0.5")),
        (" 8 ", Decimal(8)),
    ],
)
def test_parse_quantity_is_exact(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("bad", ["", "one", "1.2.3", "5 Gi", "1x", None, True, [1], {}])
def test_parse_quantity_rejects_malformed(bad):
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_whole_and_gpu_count():
    assert is_whole(parse_quantity("1000m"))
    assert not is_whole(parse_quantity("0.9999"))
    assert gpu_count("2") == 2
    assert gpu_count("500m") == 0
    assert gpu_count("garbage", default=-1) == -1


def test_gpu_resource_matcher():
    is_gpu = gpu_resource_matcher(["example.com/accel-*"])
    assert is_gpu("nvidia.com/gpu")
    assert is_gpu("nvidia.com/mig-1g.5gb")
    assert is_gpu("amd.com/gpu")
    assert is_gpu("example.com/accel-x")
    assert not is_gpu("cpu")
    assert not is_gpu("nvidia.com/gpu-typo")
    assert not is_gpu("example.com/fpga")
