# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node says about its GPUs: capacity, allocatable, driver and CUDA versions, ACK's
scheduling mode, and where to find the host (addresses, provider ID, zone, region, instance
type); kept as a compact dict so list pages can be dropped as they are read."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.options import DEFAULT_OPTIONS, FleetOptions
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.resources import gpu_quantities
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.placement import node_taints
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import (
    as_list,
    as_mapping,
    as_text,
    condition_true,
    object_parts,
    string_map,
)

# The node addresses that reach the host, in the default order of preference; InternalDNS and
# ExternalDNS are left out (EKS publishes them beside Hostname and the IPs).
ADDRESS_TYPES = ("InternalIP", "ExternalIP", "Hostname")
# Well-known labels, the deprecated beta key after the current one.
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")


def _first_label(labels: Mapping[str, str], keys: Sequence[str]) -> str | None:
    return next((sys.intern(labels[key]) for key in keys if labels.get(key)), None)


def _addresses(status: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    found = []
    for entry in map(as_mapping, as_list(status.get("addresses"))):
        kind, address = entry.get("type"), entry.get("address")
        if kind in ADDRESS_TYPES and isinstance(address, str) and address:
            found.append((sys.intern(kind), address))
    return tuple(found)


def _location(
    labels: Mapping[str, str], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[tuple[tuple[str, str], ...], str | None, str | None, str | None, str | None]:
    """Where the host is, as one tuple: the (type, address) pairs, provider ID, zone, region and instance
    type (the last three interned: thousands of nodes share a few of each)."""
    provider_id = spec.get("providerID")
    return (
        _addresses(status),
        provider_id if isinstance(provider_id, str) and provider_id else None,
        _first_label(labels, ZONE_LABELS),
        _first_label(labels, REGION_LABELS),
        _first_label(labels, INSTANCE_TYPE_LABELS),
    )


def location_facts(node: Mapping[str, Any]) -> dict[str, Any]:
    """The host-finding facts of a compact node: its addresses, provider ID, zone, region and instance type."""
    addresses, provider_id, zone, region, instance_type = node["location"]
    return {
        "addresses": [{"type": kind, "address": address} for kind, address in addresses],
        "provider_id": provider_id,
        "zone": zone,
        "region": region,
        "instance_type": instance_type,
    }


def preferred_address(addresses: Sequence[Mapping[str, str]], preference: Sequence[str]) -> str | None:
    """The first address of the first type in `preference` the node publishes, else None."""
    for kind in preference:
        for entry in addresses:
            if entry["type"] == kind:
                return entry["address"]
    return None


def health_conditions(status: Mapping[str, Any], known: Mapping[str, Any]) -> tuple[dict[str, str], ...]:
    """The node's conditions of the types the health table knows, with status, reason and message."""
    found = []
    for condition in map(as_mapping, as_list(status.get("conditions"))):
        kind = condition.get("type")
        if isinstance(kind, str) and kind in known:
            found.append({key: as_text(condition.get(key)) for key in ("type", "status", "reason", "message")})
    return tuple(found)


def project_node(node: object, options: FleetOptions = DEFAULT_OPTIONS) -> dict[str, Any] | None:
    """The fields of a Node the facts need, or None for something that is not a named node."""
    parts = object_parts(node)
    if parts is None:
        return None
    name, metadata, spec, status = parts
    labels = string_map(metadata.get("labels"))
    return {
        "name": name,
        "labels": {k: v for k, v in labels.items() if k in options.label_keys},
        "capacity": gpu_quantities(status.get("capacity"), options.is_gpu),
        "allocatable": gpu_quantities(status.get("allocatable"), options.is_gpu),
        "ready": condition_true(status, "Ready"),
        "schedulable": not spec.get("unschedulable", False),
        "taints": node_taints(spec),
        "location": _location(labels, spec, status),
        "conditions": health_conditions(status, options.health.conditions),
    }
