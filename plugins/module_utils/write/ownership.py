# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What marks a node as quarantined by this collection: its taint, and the annotation that records
who quarantined it, why, when, and whether the collection cordoned it (it uncordons only then).

The taint keeps new pods off without touching running ones (`NoSchedule`); release removes it
only when the record says the collection set it. A record that does not parse proves nothing:
a node with one is treated as not ours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

# The taint's key, next to `kubegpu.io/managed-labels` of the labeling.
QUARANTINE_TAINT_KEY = "kubegpu.io/quarantine"
QUARANTINE_TAINT_EFFECT = "NoSchedule"
QUARANTINE_TAINT: dict[str, str] = {"key": QUARANTINE_TAINT_KEY, "effect": QUARANTINE_TAINT_EFFECT}
# A toleration of the taint, for the validation pod that proves the node before release.
QUARANTINE_TOLERATION: dict[str, str] = {
    "key": QUARANTINE_TAINT_KEY,
    "operator": "Exists",
    "effect": QUARANTINE_TAINT_EFFECT,
}
RECORD_ANNOTATION = "kubegpu.io/quarantine-record"
DEFAULT_QUARANTINED_BY = "kubegpu.scheduling"


@dataclass(frozen=True)
class Record:
    """The audit record on a quarantined node."""

    by: str
    reason: str
    at: str
    # Whether the collection cordoned the node; False when it was unschedulable already (someone
    # else's cordon, which release leaves in place).
    cordoned: bool
    # Whether the collection added the taint (False when a taint of that key was there already).
    tainted: bool = True


# What Go's JSON encoder escapes in a string and Python's does not.
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def annotation_json(value: Mapping[str, Any]) -> str:
    """``value`` as an annotation's JSON text that the API server encodes byte for byte as Python
    does: ASCII only (Go writes other characters as UTF-8, Python escapes them) and with <, > and &
    escaped (Go escapes them, Python does not). A guarded patch tests the annotation it read, and the
    API server's JSON patch compares a tested string with its own encoding of the node byte for byte,
    so a reason such as "temp > 90", or one with an accent, would otherwise never match."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).translate(_GO_ESCAPES)


def record_annotation(record: Record) -> str:
    return annotation_json(asdict(record))


def read_record(annotation: str | None) -> Record | None:
    """The record in the annotation; None when there is none or it does not parse."""
    if not annotation:
        return None
    try:
        data = json.loads(annotation)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    texts = [data.get(k) for k in ("by", "reason", "at")]
    # A record that does not say the collection cordoned the node never leads to an uncordon.
    flags = [data.get("cordoned"), data.get("tainted", True)]
    if not all(isinstance(t, str) for t in texts) or not all(isinstance(f, bool) for f in flags):
        return None
    return Record(str(texts[0]), str(texts[1]), str(texts[2]), bool(flags[0]), bool(flags[1]))


def is_quarantine_taint(taint: Mapping[str, Any]) -> bool:
    return taint.get("key") == QUARANTINE_TAINT_KEY and taint.get("effect") == QUARANTINE_TAINT_EFFECT


def check_text(value: object, option: str) -> str:
    """A text of the record (who, why), stripped; an OptionError naming `option` when it is empty."""
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"{option} must be a non-empty string: the record on the node says it")
    return value.strip()
