# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API server's own request counters (`apiserver_request_total` on its /metrics page): the
witness the live tests count writes and lists with, never the collection's own account of them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


def api_requests(cluster: Any, key: Callable[[dict[str, str]], Hashable | None]) -> Counter:
    """The requests the API server has answered so far, summed by ``key`` of each counter's labels
    (verb, resource, subresource, scope, code, ...); a counter whose key is None is left out."""
    status, text = cluster.api.request("GET", "/metrics")
    assert status == 200 and isinstance(text, str), f"GET /metrics: {status}"
    counts: Counter = Counter()
    for match in _REQUESTS.finditer(text):
        found = key(dict(_LABEL.findall(match["labels"])))
        if found is not None:
            counts[found] += int(float(match["value"]))
    return counts


def writes_on(*resources: str, status: bool = False) -> Callable[[dict[str, str]], tuple[str, ...] | None]:
    """A key for api_requests: the writes on ``resources`` by (verb, resource, subresource, code),
    leaving out their status subresource unless ``status`` (KWOK keeps writing node and pod status)."""

    def key(labels: dict[str, str]) -> tuple[str, ...] | None:
        subresource = labels.get("subresource", "")
        if labels.get("verb") not in WRITE_VERBS or labels.get("resource") not in resources:
            return None
        if subresource == "status" and not status:
            return None
        return (labels["verb"], labels["resource"], subresource, labels.get("code", ""))

    return key


def object_writes_on(*resources: str) -> Callable[[dict[str, str]], tuple[str, ...] | None]:
    """A key for api_requests: the writes on the ``resources`` themselves (no subresource: no status,
    eviction or binding) by (verb, resource, code)."""

    def key(labels: dict[str, str]) -> tuple[str, ...] | None:
        if labels.get("verb") not in WRITE_VERBS or labels.get("resource") not in resources:
            return None
        return None if labels.get("subresource") else (labels["verb"], labels["resource"], labels.get("code", ""))

    return key


def sent_since(before: Counter, after: Counter) -> dict:
    """What was counted between two readings, by key."""
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}
