"""The command line of the placement view: options, its text, its exit codes on bad usage."""

from __future__ import annotations

import io

from fleets import IS_GPU, build, node, pod

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.cli import (
    EXIT_USAGE,
    format_text,
    run,
    toleration,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import PlacementOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.summary import placement_summary


def test_a_toleration_from_the_command_line():
    assert toleration("nvidia.com/gpu:NoSchedule") == {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "value": "",
        "effect": "NoSchedule",
    }
    assert toleration("dedicated=ml") == {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": ""}


def test_the_text_has_a_row_per_pool_and_a_line_per_pending_pod():
    fleet, pending = build([node("a", 8, labels={"accelerator": "NVIDIA-A10"})], [pod("big", 16)])
    text = format_text(placement_summary(fleet, pending, PlacementOptions(), IS_GPU, DraObjects()))
    lines = text.splitlines()
    assert lines[0].split() == ["pool", "free", "largest", "1-GPU", "2-GPU", "4-GPU", "8-GPU"]
    assert lines[1].split() == ["NVIDIA-A10", "8", "8", "8", "4", "2", "1"]
    assert "pending ml/big: it asks for 16 nvidia.com/gpu; only 8 are free" in text


def test_bad_sizes_are_a_usage_error_before_anything_is_read():
    stderr = io.StringIO()

    def never(*_args):
        raise AssertionError("nothing may be read")

    assert run(never, never, ["--sizes", "one"], (io.StringIO(), stderr, None)) == EXIT_USAGE
    assert "--sizes must be whole numbers" in stderr.getvalue()
