# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mark on the objects the collection creates: what tells its own objects from anyone else's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.plain import as_mapping, string_map

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGER = "kubegpu.scheduling"
MANAGED_BY = {MANAGED_BY_LABEL: MANAGER}


def is_managed(obj: Mapping[str, Any] | None) -> bool:
    """Whether an object as read carries the collection's managed-by label."""
    if obj is None:
        return False
    return string_map(as_mapping(obj.get("metadata")).get("labels")).get(MANAGED_BY_LABEL) == MANAGER
