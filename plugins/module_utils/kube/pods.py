# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pod phases: which pods have finished, and so hold no device any more; the field selector of a
list of the others."""

from __future__ import annotations

FINISHED_POD_PHASES = ("Succeeded", "Failed")
# Lists of the pods that can hold devices: the server drops finished ones.
ACTIVE_POD_FIELD_SELECTOR = ",".join(f"status.phase!={phase}" for phase in FINISHED_POD_PHASES)


def pod_field_selector(names: list[str] | None) -> str:
    """The active pods, and only those of the node when one node is wanted."""
    if names and len(names) == 1:
        return f"{ACTIVE_POD_FIELD_SELECTOR},spec.nodeName={names[0]}"
    return ACTIVE_POD_FIELD_SELECTOR
