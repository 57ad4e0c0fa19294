# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One read of each collection for several checks in one run.

The fleet facts, the device-plugin check and the live audit each list nodes, pods, DaemonSets and
DRA objects, some in one namespace or with a label selector, pods without the finished ones. A
``SharedLists`` client reads each collection once, across all namespaces and unselected, when a
check first asks for it, and answers every list of it from that read: the namespace, the label
selector and the active-pods field selector applied here as the API server applies them, the items
in the server's order. A list it cannot answer so (another field selector, a selector it cannot
read) goes to the API server as asked. Everything else is the wrapped client's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import (
    ACTIVE_POD_FIELD_SELECTOR,
    FINISHED_POD_PHASES,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.selectors import (
    LabelSelector,
    parse_label_selector,
)

# /api/v1[/namespaces/<ns>]/<resource> or /apis/<group>/<version>[/namespaces/<ns>]/<resource>
_COLLECTION = re.compile(
    r"^(?P<prefix>/api/[^/]+|/apis/[^/]+/[^/]+)(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>[^/]+)$"
)


def _metadata(item: Any) -> dict[str, Any]:
    metadata = item.get("metadata") if isinstance(item, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _active(item: Any) -> bool:
    status = item.get("status") if isinstance(item, dict) else None
    return not isinstance(status, dict) or status.get("phase") not in FINISHED_POD_PHASES


class SharedLists(KubeClient):
    """A KubeClient whose lists are read once a collection (see the module docstring); made from a
    client, with its connection, options and counters."""

    def __init__(self, client: KubeClient) -> None:  # pylint: disable=super-init-not-called
        self.__dict__.update(client.__dict__)
        self._read: dict[str, list[Any]] = {}

    def list_items(self, path: str, **options: Any) -> Iterator[dict[str, Any]]:
        """KubeClient.list_items (the same options), from the one read of the collection where it can."""
        label_selector, field_selector = options.get("label_selector"), options.get("field_selector")
        match = _COLLECTION.match(path)
        readable, selector = _selector(label_selector)
        if (
            match is None
            or not readable
            or field_selector not in (None, ACTIVE_POD_FIELD_SELECTOR)
            or (field_selector is not None and match["resource"] != "pods")
        ):
            yield from super().list_items(path, **options)
            return
        collection = f"{match['prefix']}/{match['resource']}"
        if collection not in self._read:
            paging = {"page_size": options["page_size"]} if "page_size" in options else {}
            self._read[collection] = list(super().list_items(collection, **paging))
        namespace = match["namespace"]
        for item in self._read[collection]:
            metadata = _metadata(item)
            if namespace is not None and metadata.get("namespace") != namespace:
                continue
            if selector is not None and not selector.matches(metadata.get("labels") or {}):
                continue
            if field_selector is not None and not _active(item):
                continue
            yield item


def _selector(text: str | None) -> tuple[bool, LabelSelector | None]:
    """Whether the selector can be applied here, and the parsed selector (None for none)."""
    if not text:
        return True, None
    try:
        return True, parse_label_selector(text)
    except OptionError:
        return False, None  # for the API server to read (and refuse as it does)
