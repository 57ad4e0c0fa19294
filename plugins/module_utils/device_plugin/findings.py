# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device-plugin check's findings: its kinds are in findings/kinds/device_plugin.py; a verdict
names the kind, where it hit and the fields, and ``found`` turns that into the documented finding."""

from __future__ import annotations

from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import device_plugin as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import fleet as fleet_kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import plugin_finding

# A plugin pod restarting this often is unstable even when it is Ready right now.
RESTART_WARNING_THRESHOLD = 5
KIND_NO_DEVICE_PLUGIN = kinds.NO_DEVICE_PLUGIN
KIND_DAEMONSET_MISSING = kinds.DAEMONSET_MISSING
KIND_DAEMONSET_NOT_OBSERVED = kinds.DAEMONSET_NOT_OBSERVED
KIND_DAEMONSET_SELECTS_NO_NODE = kinds.DAEMONSET_SELECTS_NO_NODE
KIND_DAEMONSET_NOT_SCHEDULED = kinds.DAEMONSET_NOT_SCHEDULED
KIND_DAEMONSET_NOT_UPDATED = kinds.DAEMONSET_NOT_UPDATED
KIND_DAEMONSET_NOT_READY = kinds.DAEMONSET_NOT_READY
KIND_DAEMONSET_NOT_AVAILABLE = kinds.DAEMONSET_NOT_AVAILABLE
KIND_DAEMONSET_MISSCHEDULED = kinds.DAEMONSET_MISSCHEDULED
KIND_SEVERAL_DEPLOYMENTS = kinds.SEVERAL_DEPLOYMENTS
KIND_NO_GPU_NODES = kinds.NO_GPU_NODES
KIND_NO_DRA_PLUGIN_POD = kinds.NO_DRA_PLUGIN_POD
KIND_DRA_PLUGIN_NOT_READY = kinds.DRA_PLUGIN_NOT_READY
KIND_DRA_NO_SLICES = kinds.DRA_NO_SLICES
KIND_DRA_NOT_READABLE = kinds.DRA_NOT_READABLE
# Declared with the fleet's kinds, for both checks.
KIND_SERVED_TWICE = fleet_kinds.SERVED_TWICE
KIND_NODE_NOT_READY = kinds.NODE_NOT_READY
KIND_NO_PLUGIN_POD = kinds.NO_PLUGIN_POD
KIND_SEVERAL_PLUGIN_PODS = kinds.SEVERAL_PLUGIN_PODS
KIND_PLUGIN_NOT_READY = kinds.PLUGIN_NOT_READY
KIND_PLUGIN_RESTARTING = kinds.PLUGIN_RESTARTING
KIND_NO_CAPACITY = kinds.NO_CAPACITY
KIND_UNHEALTHY_GPUS = kinds.UNHEALTHY_GPUS
KIND_LABEL_COUNT_MISMATCH = kinds.LABEL_COUNT_MISMATCH
KIND_HOST_FACTS_FAILED = kinds.HOST_FACTS_FAILED
KIND_HOST_NOT_A_NODE = kinds.HOST_NOT_A_NODE
KIND_HOST_GPUS_NOT_ADVERTISED = kinds.HOST_GPUS_NOT_ADVERTISED
KIND_DRIVER_MISSING = kinds.DRIVER_MISSING
KIND_NVIDIA_SMI_FAILED = kinds.NVIDIA_SMI_FAILED
KIND_HOST_GPU_COUNT_MISMATCH = kinds.HOST_GPU_COUNT_MISMATCH
KIND_TOOLKIT_CONFIG_MISSING = kinds.TOOLKIT_CONFIG_MISSING
KIND_TOOLKIT_CONFIG_UNREADABLE = kinds.TOOLKIT_CONFIG_UNREADABLE
KIND_ENVVAR_ACCEPTED = kinds.ENVVAR_ACCEPTED
KIND_VOLUME_MOUNTS_OFF = kinds.VOLUME_MOUNTS_OFF


def found(kind: str, subject: str, node: str | None = None, case: str = "", **fields: Any) -> dict[str, Any]:
    """The finding of a hit of ``kind`` on ``subject`` (and ``node``), in the module's result shape."""
    hit = Hit(kind, {**fields, "node": node}, {"node": node, "subject": subject}, case)
    return plugin_finding(KINDS.finding(hit))
