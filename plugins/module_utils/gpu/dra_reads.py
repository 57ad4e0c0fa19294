# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one read of the DRA objects that the fleet facts, placement and quarantine share: one
paginated list each of DeviceClasses, ResourceSlices, ResourceClaims and DeviceTaintRules,
projected page by page so that no page is kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    RESOURCE_API_VERSION,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    DraObjects,
    project_claim,
    project_device_class,
    project_slice,
    project_taint_rule,
    taint_rules_unavailable_note,
    unavailable_note,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.paths import api_path

# The resource.k8s.io lists the facts read, in order.
DRA_LISTS = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, DEVICE_TAINT_RULES)


def _projected(
    client: KubeClient, resource: str, project: Callable[[Any], dict[str, Any] | None], page_size: int
) -> list[dict[str, Any]]:
    items = client.list_items(api_path(RESOURCE_API_VERSION, resource), page_size=page_size)
    return [p for p in map(project, items) if p is not None]


def read_dra(client: KubeClient, page_size: int) -> DraObjects:
    """DeviceClasses, GPU ResourceSlices, ResourceClaims and DeviceTaintRules, one paginated list each.

    A cluster that does not serve resource.k8s.io/v1 (404), or a reader that may not list it
    (403), gives no DRA objects and a note saying which; the lists after it are not sent.
    DeviceTaintRules are read last: where they are not served or not allowed, the other objects
    still count, with a note.
    """
    dra = DraObjects()
    for resource, project, into in (
        (DEVICE_CLASSES, project_device_class, dra.classes),
        (RESOURCE_SLICES, project_slice, dra.slices),
        (RESOURCE_CLAIMS, project_claim, dra.claims),
    ):
        try:
            into += _projected(client, resource, project, page_size)
        except ClusterError as exc:
            note = unavailable_note(exc.status, resource)
            if note is None:
                raise
            return DraObjects(unavailable=note)
    try:
        dra.taint_rules += _projected(client, DEVICE_TAINT_RULES, project_taint_rule, page_size)
    except ClusterError as exc:
        dra.taint_rules_unavailable = taint_rules_unavailable_note(exc.status)
        if dra.taint_rules_unavailable is None:
            raise
    return dra
