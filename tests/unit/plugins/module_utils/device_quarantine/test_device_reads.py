"""What device quarantine reads: DeviceTaintRules by name, and a clear refusal where they are not served."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.device_quarantine.reads import read_rules
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import ClusterError


class Lists:
    """A client whose lists yield `items`, or fail with `status` once iterated, as KubeClient's pages do."""

    def __init__(self, items: list[dict] | None = None, status: int | None = None):
        self.items = items or []
        self.status = status
        self.paths: list[str] = []

    def list_items(self, path: str, page_size: int = 500) -> Iterator[dict]:
        self.paths.append(path)
        if self.status is not None:
            raise ClusterError(f"the server said {self.status}", self.status)
        yield from self.items


def test_rules_are_read_by_name_and_nameless_ones_left_out():
    client = Lists([{"metadata": {"name": "a"}, "spec": {}}, {"metadata": {}}])
    assert read_rules(client) == {"a": {"metadata": {"name": "a"}, "spec": {}}}
    assert client.paths == ["/apis/resource.k8s.io/v1/devicetaintrules"]


def test_a_cluster_without_device_taint_rules_is_refused_naming_the_api_and_the_alternative():
    with pytest.raises(ClusterError) as raised:
        read_rules(Lists(status=404))
    assert raised.value.status == 404
    assert raised.value.message.startswith("this cluster does not serve devicetaintrules in resource.k8s.io/v1")
    assert "nothing was written" in raised.value.message and "gpu_node_quarantine" in raised.value.message


def test_other_failures_keep_their_step():
    with pytest.raises(ClusterError) as raised:
        read_rules(Lists(status=403))
    assert raised.value.message == "cannot list DeviceTaintRules: the server said 403" and raised.value.status == 403
