"""NVIDIA_VISIBLE_DEVICES read one way, the toolkit's, by the fleet facts, the validator and the live audit.

The toolkit splits the value on commas and trims each entry; entries are case-sensitive; void (or
no entry at all) wins over none, and none over all (nvidia-container-toolkit internal/config/image,
NewVisibleDevices).
"""

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.projection import project_pod
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.visible_devices import (
    device_selection,
    selects_gpus,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.checker import RuleConfig
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.documents import validate_documents
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.manifests import Document
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.reads import live_report

UUID = "GPU-8f1f4d06-07fd-27a7-52d5-e58aa060d256"

# value -> how the toolkit reads it
READINGS = {
    "VOID": "devices",  # a device named VOID, not void
    "void": "void",
    "none": "none",
    "all": "all",
    "": "void",
    "0,void": "void",
    UUID: "devices",
    " all ": "all",
    "none,all": "none",
    "NONE": "devices",
}


def pod(value):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {
            "nodeName": "gpu-node",
            "containers": [
                {"name": "main", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]}
            ],
        },
        "status": {"phase": "Running"},
    }


class PodsOnly:
    """The reads live_report makes, answered from memory: one pod, no workloads."""

    def __init__(self, item):
        self.item = item

    def list_items(self, path):
        return iter([self.item] if path == "/api/v1/pods" else [])

    def get(self, path):
        if path == "/apis":
            return {"kind": "APIGroupList", "groups": []}  # discovery: no custom resource API served
        raise AssertionError(f"unexpected read of {path}")


@pytest.mark.parametrize("value, reading", READINGS.items())
def test_the_toolkit_reading(value, reading):
    assert device_selection(value) == reading
    assert selects_gpus(value) is (reading in ("all", "devices"))


@pytest.mark.parametrize("value", READINGS)
def test_fleet_facts_validator_and_live_audit_agree(value):
    gives_gpus = selects_gpus(value)

    compact = project_pod(pod(value))
    fleet_says = bool(compact and compact["bypass"])

    offline = validate_documents([Document("pod.yaml", 0, pod(value), 1)], RuleConfig())
    validator_says = [f.rule for f in offline.findings] == ["KGPU101"]

    live = live_report(PodsOnly(pod(value)), RuleConfig())
    audit_says = [f.rule for f in live.findings] == ["KGPU101"]

    assert fleet_says is validator_says is audit_says is gives_gpus
    if not gives_gpus:
        assert compact is None and offline.findings == [] and live.findings == []
