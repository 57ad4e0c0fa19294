# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an object the collection renders is what the cluster holds, without a request: every field
the rendering sets must hold the same value on the cluster. Fields the API server defaults or other
managers set are not the rendering's and do not count. A field the rendering dropped is told by the
digest of the rendering that our mark carries (owned.marked), which then differs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _empty(value: Any) -> bool:
    return isinstance(value, (list, dict)) and not value


def differences(desired: Any, live: Any, path: str = "") -> list[str]:
    """The paths of the rendered fields whose value the cluster does not hold; the API server leaves
    out empty lists and maps, so those match a missing field."""
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return [path or "(object)"]
        found = []
        for key, value in desired.items():
            if key not in live and _empty(value):
                continue
            found += differences(value, live.get(key), f"{path}.{key}" if path else str(key))
        return found
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return [path]
        return [p for index, item in enumerate(desired) for p in differences(item, live[index], f"{path}[{index}]")]
    return [] if desired == live else [path]


def pruned(live: Any, desired: Any) -> Any:
    """The live object cut to the shape of the rendered one (what the rendering sets)."""
    if isinstance(desired, Mapping) and isinstance(live, Mapping):
        return {key: pruned(live[key], value) for key, value in desired.items() if key in live}
    if isinstance(desired, list) and isinstance(live, list):
        return [pruned(item, desired[i]) if i < len(desired) else item for i, item in enumerate(live)]
    return live


# What of an object's metadata is shown of an object that goes: who it is and its marks.
SHOWN_METADATA = ("name", "namespace", "labels", "annotations")


def shown(live: Mapping[str, Any] | None) -> dict[str, Any]:
    """An object as read, without what the API server keeps of its own (status, uid, versions,
    managed fields): what a diff shows of an object deleted."""
    if live is None:
        return {}
    metadata = live.get("metadata")
    kept = {k: v for k, v in live.items() if k not in ("metadata", "status")}
    if isinstance(metadata, Mapping):
        kept["metadata"] = {k: metadata[k] for k in SHOWN_METADATA if k in metadata}
    return kept
