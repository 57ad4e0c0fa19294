# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON patches (RFC 6902) guarded on what they change: the patch applies only while the values
it tests are as read, and is built again from a fresh read when they are not."""

from __future__ import annotations

from typing import Any

# How many times a guarded patch is built and sent before the object is taken to keep changing.
MAX_CONFLICT_ATTEMPTS = 3

# A JSON patch (RFC 6902): operations the API server applies in order, all or none.
JsonPatch = list[dict[str, Any]]


def json_pointer(*keys: str) -> str:
    """The JSON pointer (RFC 6901) to a member by its keys: `~` becomes `~0` and `/` becomes `~1`."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in keys)


def member_ops(
    present: bool, map_key: str, key: str, before: str | None, after: str | None
) -> tuple[JsonPatch, JsonPatch]:
    """The guard and the write for one string of metadata.labels or metadata.annotations.

    The guard holds the value as read, so the patch applies only while it is unchanged. The API
    server's `test` of a missing member against null passes, so null guards an absent value; a
    missing map fails any test below it, so an absent map is guarded (null) and written whole.
    """
    if not present:
        guard = [{"op": "test", "path": json_pointer("metadata", map_key), "value": None}]
        write = (
            [] if after is None else [{"op": "add", "path": json_pointer("metadata", map_key), "value": {key: after}}]
        )
        return guard, write
    path = json_pointer("metadata", map_key, key)
    guard = [{"op": "test", "path": path, "value": before}]
    if after is not None:
        return guard, [{"op": "add", "path": path, "value": after}]
    return guard, [{"op": "remove", "path": path}] if before is not None else []
