# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placement's result from what was read: the view, the pending GPU pods and the what-if, with findings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.dra import DraObjects
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.dra import unserved_resource_note
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.fleet import (
    Fleet,
    PlacementOptions,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.pending import explain_pending
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.result import finding_dict, with_findings
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.view import placement_view, view_hits
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.whatif import what_if

CANNOT_KNOW = (
    "preemption is not modelled: a pending pod of higher priority may still get a node by evicting pods of lower "
    "priority, which the view counts as holding their GPUs"
)


def placement_summary(
    fleet: Fleet,
    pending: Sequence[Mapping[str, Any]],
    options: PlacementOptions,
    is_gpu: Callable[[str], bool],
    dra: DraObjects,
) -> dict[str, Any]:
    """The view and the pending pods, with findings and notes."""
    view = placement_view(fleet, options)
    unserved = unserved_resource_note(fleet.dra, options.resource, fleet.nodes)
    notes = [CANNOT_KNOW] + [n for n in (dra.unavailable, dra.taint_rules_unavailable, unserved) if n]
    return {
        **view,
        "pending": with_findings(explain_pending(pending, fleet, is_gpu)),
        "findings": [finding_dict(h) for h in view_hits(view)],
        "notes": notes,
    }


def what_if_summary(documents: Iterable[Any], fleet: Fleet, is_gpu: Callable[[str], bool]) -> dict[str, Any]:
    results, skipped = what_if(documents, fleet, is_gpu)
    return {"what_if": with_findings(results), "not_checked": skipped}
