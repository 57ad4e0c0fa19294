# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's record of a driver roll on a node, the annotation `kubegpu.io/driver-upgrade`:
the target version, whether the operator's skip label on the node is the roll's own (`held`: only
then does the roll remove it), and why the node's upgrade failed. A record that does not parse
says nothing: a skip label beside it is not the roll's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.ownership import annotation_json

ROLL_ANNOTATION = "kubegpu.io/driver-upgrade"


def read_roll(annotation: str | None) -> dict[str, Any]:
    """The record as a dict; empty when there is none or it does not parse."""
    if not annotation:
        return {}
    try:
        data = json.loads(annotation)
    except ValueError:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("target"), str):
        return {}
    return {
        "target": data["target"],
        "held": data.get("held") is True,
        "failed": data["failed"] if isinstance(data.get("failed"), str) else None,
        "at": data.get("at") if isinstance(data.get("at"), str) else None,
    }


def roll_annotation(record: Mapping[str, Any]) -> str:
    kept = {k: record[k] for k in ("target", "held", "failed", "at") if record.get(k) not in (None, False)}
    return annotation_json(kept)
