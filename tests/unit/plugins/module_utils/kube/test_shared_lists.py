"""One read of each collection for several checks (kube/shared_lists.py): every list answered as the API
server answers it, from one unselected list across all namespaces."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.client import KubeClient, Transport
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.pods import ACTIVE_POD_FIELD_SELECTOR
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.shared_lists import SharedLists


def pod(namespace: str, name: str, phase: str | None, **labels: str) -> dict[str, Any]:
    item: dict[str, Any] = {"metadata": {"namespace": namespace, "name": name, "labels": labels}}
    if phase is not None:
        item["status"] = {"phase": phase}
    return item


PODS = [
    pod("default", "a", "Running", app="x"),
    pod("default", "b", "Succeeded", app="x"),
    pod("gpu", "c", "Pending", app="y", tier="1"),
    pod("gpu", "d", None, app="x"),
    pod("kube-system", "e", "Failed"),
]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    requests: list[tuple] = []

    def list_items(self, path, *, label_selector=None, field_selector=None, page_size=500):
        requests.append((path, label_selector, field_selector))
        yield from (PODS if path.endswith("/pods") else [{"metadata": {"name": "n"}}])

    monkeypatch.setattr(KubeClient, "list_items", list_items)
    return requests


def shared() -> SharedLists:
    return SharedLists(KubeClient(Transport(SimpleNamespace(host="https://127.0.0.1:1"), None)))


def names(items) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def test_every_pod_list_is_answered_from_one_read(sent):
    client = shared()
    assert names(client.list_items("/api/v1/pods")) == ["a", "b", "c", "d", "e"]
    assert names(client.list_items("/api/v1/pods", field_selector=ACTIVE_POD_FIELD_SELECTOR)) == ["a", "c", "d"]
    assert names(client.list_items("/api/v1/namespaces/gpu/pods")) == ["c", "d"]
    assert names(client.list_items("/api/v1/namespaces/default/pods", label_selector="app=x")) == ["a", "b"]
    assert names(
        client.list_items("/api/v1/pods", label_selector="app in (x,y),!tier", field_selector=ACTIVE_POD_FIELD_SELECTOR)
    ) == ["a", "d"]
    assert sent == [("/api/v1/pods", None, None)]


def test_each_collection_is_read_once_and_other_lists_go_to_the_server(sent):
    client = shared()
    for _round in range(2):
        assert names(client.list_items("/apis/apps/v1/namespaces/kube-system/daemonsets")) == []
        assert names(client.list_items("/api/v1/nodes")) == ["n"]
    assert names(client.list_items("/api/v1/pods", field_selector="spec.nodeName=n1")) == names(PODS)
    assert names(client.list_items("/api/v1/nodes", field_selector=ACTIVE_POD_FIELD_SELECTOR)) == ["n"]
    assert names(client.list_items("/api/v1/pods", label_selector="app in (x")) == names(PODS)
    assert sent == [
        ("/apis/apps/v1/daemonsets", None, None),
        ("/api/v1/nodes", None, None),
        ("/api/v1/pods", None, "spec.nodeName=n1"),
        ("/api/v1/nodes", None, ACTIVE_POD_FIELD_SELECTOR),
        ("/api/v1/pods", "app in (x", None),
    ]
