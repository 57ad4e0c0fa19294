# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health class of each DRA GPU device, where the API serves ResourceSlices (and DeviceTaintRules), and
its transitions. Pure.

A device's class is the health view's (gpu/health.py ``device_health``): failed when a taint keeps pods away
(NoSchedule, NoExecute), degraded when its taints only report (effect None), healthy without taints. Its
taints are the slice's and those of every DeviceTaintRule that picks it, as the scheduler applies them; only
the newest generation of a pool counts. The classes are worked out anew from the slices and rules known after
each change (slices change when a driver republishes, not with heartbeats) and compared with those before:
a device's event names its node, its driver, pool and name, and its taints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.transitions import DELETED, SOURCE_NAME
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    current_pools,
    device_key,
    taint_text,
    with_rule_taints,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import device_health
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health_table import HEALTHY

DEVICE_TRANSITION = "device_transition"
DeviceKey = tuple[str, str, str]


@dataclass(frozen=True)
class DeviceView:
    key: DeviceKey
    node: str | None
    health: str
    taints: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceChange:
    key: DeviceKey
    before: DeviceView | None
    after: DeviceView | None


def device_views(slices: Mapping[str, Mapping[str, Any]], rules: Mapping[str, Mapping[str, Any]]) -> dict:
    """Every device of the newest generation of each pool, by (driver, pool, device), from the projected
    slices and taint rules by object name (gpu/dra.py's project_slice and project_taint_rule)."""
    current = with_rule_taints(current_pools(slices.values()).slices, list(rules.values()))
    views: dict[DeviceKey, DeviceView] = {}
    for item in current:
        for device in item["devices"]:
            key = device_key(device["driver"], device["pool"], device["name"])
            taints = tuple(taint_text(t) for t in device["taints"])
            views[key] = DeviceView(key, item["node"], device_health(device), taints)
    return views


def _changed(old: DeviceView | None, new: DeviceView | None) -> bool:
    if new is None or old is None:
        return new is None or new.health != HEALTHY
    return old.health != new.health


def device_changes(before: Mapping[DeviceKey, DeviceView], after: Mapping[DeviceKey, DeviceView]) -> list:
    """The devices whose class changed, in key order: a new device only when it is not healthy, a device
    no longer published as deleted."""
    changes = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if _changed(old, new):
            changes.append(DeviceChange(key, old, new))
    return changes


def device_event(change: DeviceChange, seen: str, act: bool) -> dict[str, Any]:
    view = change.after or change.before
    if view is None:
        raise ValueError("a change without a view before or after")
    driver, pool, name = change.key
    to = change.after.health if change.after else DELETED
    was = change.before.health if change.before else None
    taints = list(change.after.taints) if change.after else []
    said = f" ({', '.join(taints)})" if taints else ""
    return {
        "type": DEVICE_TRANSITION,
        "source": SOURCE_NAME,
        "node": view.node,
        "device": {"driver": driver, "pool": pool, "name": name},
        "from": was,
        "to": to,
        "taints": taints,
        "seen": seen,
        "summary": f"GPU device {driver}/{pool}/{name} on {view.node or 'no node'} {was or 'new'} to {to}{said}",
        "act": act,
    }
