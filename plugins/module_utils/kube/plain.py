# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safe access to API objects and manifests given as plain dicts: a field of the wrong type
reads as empty, so malformed input is judged instead of raising."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping
from typing import Any


def as_mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def object_parts(item: object) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """A named object's name, metadata, spec and status; None for anything that has no name."""
    obj = as_mapping(item)
    metadata = as_mapping(obj.get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    return name, metadata, as_mapping(obj.get("spec")), as_mapping(obj.get("status"))


def namespaced_name(item: Mapping[str, Any]) -> str:
    """``namespace/name`` of a projected object."""
    return f"{item['namespace']}/{item['name']}"


def string_map(value: Any) -> dict[str, str]:
    """The string-to-string entries of a mapping, such as labels or annotations."""
    return {k: v for k, v in as_mapping(value).items() if isinstance(k, str) and isinstance(v, str)}


def positive_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def optional_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(
        as_mapping(c).get("type") == kind and as_mapping(c).get("status") == "True"
        for c in as_list(status.get("conditions"))
    )


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while API pages or manifests stream through.

    Decoded pages and documents hold no reference cycles and are freed by reference counting as
    soon as they are projected or checked, so the collector's passes over millions of fresh
    objects find nothing, yet cost a sixth of a parse and a third of a list's decoding.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
