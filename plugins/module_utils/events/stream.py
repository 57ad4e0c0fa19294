# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The source's arguments and what it reads from a Kubernetes watch, pure: the stream cut into
lines, each line a watch event (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR), the resource version
to resume from, whether the watch expired (410 Gone: list again), and the wait before the next try
when the API server cannot be reached.

The watch is ``?watch=1&resourceVersion=RV&allowWatchBookmarks=true``: the API server sends a
BOOKMARK with a newer resource version now and then, so a resumed watch starts close to now.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.events.views import ViewOptions, view_options
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.config import AUTH_ARG_SPEC
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
GONE = 410
NODES_PATH = "/api/v1/nodes"
# The source's own arguments, beside the connection options of the modules (kube/config.py).
OWN_ARGS = ("pool_by", "max_share", "release_hold", "act", "initial", "watch_timeout", "page_size", "retry_max")
DEFAULT_RELEASE_HOLD = 600.0
DEFAULT_WATCH_TIMEOUT = 300
DEFAULT_PAGE_SIZE = 500
DEFAULT_RETRY_MAX = 60.0


@dataclass(frozen=True)
class SourceArgs:
    view: ViewOptions
    # Seconds a quarantined node stays healthy before its healthy_for event.
    release_hold: float
    # Copied into every event: the rulebooks act only when it is true (acting is off by default).
    act: bool
    # Emit the nodes found not healthy in the first list (from None).
    initial: bool
    # Seconds the API server keeps one watch open (timeoutSeconds); the source resumes it after.
    watch_timeout: int
    page_size: int
    # The longest wait between tries while the API server cannot be reached.
    retry_max: float
    connection: Mapping[str, Any]


def _number(args: Mapping[str, Any], key: str, default: float, low: float) -> float:
    value = args.get(key)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise OptionError(f"{key} must be a number, got {value!r}") from None
    if number < low:
        raise OptionError(f"{key} must be at least {low:g}, got {value!r}")
    return number


def _flag(args: Mapping[str, Any], key: str, default: bool) -> bool:
    value = args.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise OptionError(f"{key} must be true or false, got {value!r}")


def source_args(args: Mapping[str, Any]) -> SourceArgs:
    """The source's arguments, checked; an unknown key is refused, naming it."""
    aliases = {alias for spec in AUTH_ARG_SPEC.values() for alias in spec.get("aliases", ())}
    known = set(OWN_ARGS) | set(AUTH_ARG_SPEC) | aliases
    # ansible-rulebook adds its own keys (eda_feedback_queue); they start with eda_.
    unknown = sorted(str(k) for k in args if k not in known and not str(k).startswith("eda_"))
    if unknown:
        raise OptionError(f"unknown argument(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return SourceArgs(
        view=view_options(args),
        release_hold=_number(args, "release_hold", DEFAULT_RELEASE_HOLD, 0),
        act=_flag(args, "act", False),
        initial=_flag(args, "initial", True),
        watch_timeout=int(_number(args, "watch_timeout", DEFAULT_WATCH_TIMEOUT, 1)),
        page_size=int(_number(args, "page_size", DEFAULT_PAGE_SIZE, 1)),
        retry_max=_number(args, "retry_max", DEFAULT_RETRY_MAX, 0.1),
        connection={k: v for k, v in args.items() if k in AUTH_ARG_SPEC or k in aliases},
    )


def list_query(page_size: int, token: str | None) -> dict[str, Any]:
    return {"limit": page_size, **({"continue": token} if token else {})}


def watch_query(resource_version: str, timeout: int) -> dict[str, Any]:
    return {
        "watch": 1,
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": timeout,
    }


def split_lines(pending: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """The whole lines of what was pending plus the chunk, and what is left of a line not yet ended."""
    data = pending + chunk
    *lines, rest = data.split(b"\n")
    return [line for line in lines if line.strip()], rest


def watch_event(line: bytes, decode: Callable[[bytes], Any] = json.loads) -> tuple[str, dict[str, Any]]:
    """(type, object) of one line of the watch; a line that is not an event is an ERROR without object."""
    try:
        event = decode(line)
    except ValueError:
        return ERROR, {}
    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
        return ERROR, {}
    return str(event.get("type") or ERROR), event["object"]


def resource_version(item: Mapping[str, Any]) -> str | None:
    version = (item.get("metadata") or {}).get("resourceVersion")
    return version if isinstance(version, str) and version else None


def expired(kind: str, item: Mapping[str, Any]) -> bool:
    """Whether a watch event says the resource version is too old (410 Gone): list again."""
    return kind == ERROR and (item.get("code") == GONE or item.get("reason") in ("Expired", "Gone"))


def error_text(item: Mapping[str, Any]) -> str:
    return str(item.get("message") or item.get("reason") or "the watch ended with an error")


def retry_wait(attempt: int, ceiling: float, rand: Callable[[], float] = random.random) -> float:
    """Seconds before try ``attempt`` (0 first) to reach the API server again: doubling from one
    second up to ``ceiling``, between half and all of it (jitter, so many sources do not come back at once)."""
    top = min(ceiling, 2.0 ** min(attempt, 16))
    return top / 2 + rand() * top / 2
