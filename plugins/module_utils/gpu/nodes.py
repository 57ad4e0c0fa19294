# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node says about its GPUs: capacity, allocatable, driver and CUDA versions, ACK's
scheduling mode; kept as a compact dict so list pages can be dropped as they are read."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_quantities
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    condition_true,
    string_map,
)


def _taint(value: object) -> dict[str, str | None] | None:
    taint = as_mapping(value)
    if not isinstance(taint.get("key"), str):
        return None
    return {"key": taint["key"], "value": taint.get("value"), "effect": taint.get("effect")}


def project_node(node: object, options: FleetOptions = DEFAULT_OPTIONS) -> dict[str, Any] | None:
    """The fields of a Node the facts need, or None for something that is not a named node."""
    metadata = as_mapping(as_mapping(node).get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    spec = as_mapping(as_mapping(node).get("spec"))
    status = as_mapping(as_mapping(node).get("status"))
    labels = string_map(metadata.get("labels"))
    return {
        "name": name,
        "labels": {k: v for k, v in labels.items() if k in options.label_keys},
        "capacity": gpu_quantities(status.get("capacity"), options.is_gpu),
        "allocatable": gpu_quantities(status.get("allocatable"), options.is_gpu),
        "ready": condition_true(status, "Ready"),
        "schedulable": not spec.get("unschedulable", False),
        "taints": [t for t in map(_taint, as_list(spec.get("taints"))) if t is not None],
    }
