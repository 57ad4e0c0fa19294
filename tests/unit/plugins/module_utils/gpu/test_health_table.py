"""The table of health signals: the built-in rows as their producers name them, and the option
that extends it, with errors that name the row and the key."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import (
    BUILTIN_SIGNALS,
    BUILTIN_TABLE,
    DEGRADED,
    FAILED,
    SIGNAL_CONDITION,
    SIGNAL_TAINT,
    health_table_from_option,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError


def test_the_builtin_rows_name_each_producers_signal_with_its_bad_status():
    assert BUILTIN_TABLE.conditions["AcceleratedHardwareReady"].bad_status == "False"
    assert BUILTIN_TABLE.conditions["XidCriticalError"].bad_status == "True"
    assert BUILTIN_TABLE.conditions["SysLogsXIDError"].producer == "NVIDIA NVSentinel"
    assert "nvidia.com/gpu-xid-error" in BUILTIN_TABLE.taints
    assert "GpuMemWatch" not in BUILTIN_TABLE.taints


def test_every_builtin_row_keeps_a_pinned_source():
    for signal in BUILTIN_SIGNALS:
        assert signal.source.startswith("https://github.com/"), signal.name
        assert "/blob/" in signal.source and len(signal.source.split("/blob/")[1].split("/")[0]) == 40, signal.name
        assert signal.severity in (DEGRADED, FAILED)
    assert len({(s.kind, s.name) for s in BUILTIN_SIGNALS}) == len(BUILTIN_SIGNALS)


def test_no_option_is_the_builtin_table():
    assert health_table_from_option(None) is BUILTIN_TABLE
    assert health_table_from_option({}).rows == BUILTIN_TABLE.rows


def test_user_rows_add_to_and_replace_the_builtin_ones():
    table = health_table_from_option(
        {
            "signals": [
                {"condition": "GpuXIDProblem", "severity": "degraded", "producer": "node-problem-detector"},
                {"condition": "XidCriticalError", "severity": "degraded"},
                {"taint": "example.com/gpu-bad"},
                {"condition": "GPUHealthy", "bad_status": False},
            ],
            "expected_gpus": {"NVIDIA-H100-80GB-HBM3": 8, "Tesla-T4": "4"},
        }
    )
    assert table.conditions["GpuXIDProblem"].severity == DEGRADED
    assert table.conditions["GpuXIDProblem"].producer == "node-problem-detector"
    assert table.conditions["XidCriticalError"].severity == DEGRADED
    assert table.conditions["XidCriticalError"].producer == "user"
    assert table.taints["example.com/gpu-bad"].kind == SIGNAL_TAINT
    assert table.taints["example.com/gpu-bad"].severity == FAILED
    assert table.conditions["GPUHealthy"].bad_status == "False"
    assert table.conditions["GPUHealthy"].kind == SIGNAL_CONDITION
    assert table.expected_gpus == {"NVIDIA-H100-80GB-HBM3": 8, "Tesla-T4": 4}
    assert len(table.rows) == len(BUILTIN_SIGNALS) + 3


def test_builtin_signals_can_be_left_out():
    table = health_table_from_option({"builtin_signals": False, "signals": [{"taint": "example.com/gpu-bad"}]})
    assert list(table.conditions) == []
    assert list(table.taints) == ["example.com/gpu-bad"]


@pytest.mark.parametrize(
    "option, message",
    [
        ("yes", "health must be a dictionary"),
        ({"rows": []}, r"health: unknown key\(s\) rows"),
        ({"builtin_signals": "no"}, "health.builtin_signals must be true or false"),
        ({"signals": {"condition": "X"}}, "health.signals must be a list"),
        ({"signals": [{"condition": "X"}, "Y"]}, r"health.signals\[1\] must be a dictionary"),
        ({"signals": [{"condition": "X", "taint": "y"}]}, r"health.signals\[0\]: give exactly one of condition"),
        ({"signals": [{"severity": "failed"}]}, r"health.signals\[0\]: give exactly one of condition"),
        ({"signals": [{"condition": " "}]}, r"health.signals\[0\].condition must be a non-empty string"),
        ({"signals": [{"condition": "X", "severity": "bad"}]}, r"health.signals\[0\].severity must be one of"),
        ({"signals": [{"condition": "X", "bad_status": "Maybe"}]}, r"health.signals\[0\].bad_status must be one of"),
        ({"signals": [{"taint": "x", "bad_status": "True"}]}, r"health.signals\[0\].bad_status applies to a condition"),
        ({"signals": [{"condition": "X", "effect": "NoSchedule"}]}, r"health.signals\[0\]: unknown key\(s\) effect"),
        ({"signals": [{"condition": "X", "producer": 3}]}, r"health.signals\[0\].producer must be a non-empty"),
        ({"expected_gpus": [8]}, "health.expected_gpus must be a dictionary"),
        ({"expected_gpus": {"H100": 0}}, r"health.expected_gpus\['H100'\] must be a whole number"),
        ({"expected_gpus": {"H100": "eight"}}, r"health.expected_gpus\['H100'\] must be a whole number"),
        ({"expected_gpus": {"H100": True}}, r"health.expected_gpus\['H100'\] must be a whole number"),
    ],
)
def test_a_bad_option_names_the_row_and_the_key(option, message):
    with pytest.raises(OptionError, match=message):
        health_table_from_option(option)
