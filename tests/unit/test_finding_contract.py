"""One finding shape: whatever check turns a hit into a result item, the item carries the registry
id, a severity on the one scale, title, message, remedy and where it hit (only known places), for
every kind that check declares. Each failure names the producer and the kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import Hit
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.results import (
    FINDING_KEYS,
    WHERE_KEYS,
    fleet_problem,
    plugin_finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import SEVERITIES
from ansible_collections.kubegpu.scheduling.plugins.module_utils.fleet.health import health_problem
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.health import HealthProblem
from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.workloads import ObjectRef
from ansible_collections.kubegpu.scheduling.plugins.module_utils.node_release.release import (
    finding_dict as release_finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.placement.result import (
    finding_dict as placement_finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.sources import (
    finding_dict as config_finding,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.validate.findings import Finding as RuleFinding

WHERE = {"node": "gpu-1", "subject": "DaemonSet kube-system/nvidia-device-plugin", "path": "flags.x", "pool": ""}


def hit_of(kind_id: str) -> Hit:
    return Hit(kind_id, {name: "x" for name in KINDS[kind_id].fields()}, WHERE)


def of_registry(producer: Callable[[Any], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    return lambda kind_id: producer(KINDS.finding(hit_of(kind_id)))


def health(kind_id: str) -> dict[str, Any]:
    return health_problem(HealthProblem(kind_id, "failed", {name: "x" for name in KINDS[kind_id].fields()}))


def rule(kind_id: str) -> dict[str, Any]:
    ref = ObjectRef("Pod", "v1", "ml", "train", "pod.yaml", 0, 3)
    return RuleFinding(kind_id, KINDS[kind_id].severity, ref, "main", "spec.x", "m", "r").to_dict()


PRODUCERS: dict[str, tuple[Callable[[str], dict[str, Any]], tuple[str, ...]]] = {
    "plugin_finding": (of_registry(plugin_finding), ("device_plugin", "plugin_deploy", "quarantine")),
    "fleet_problem": (of_registry(fleet_problem), ("fleet",)),
    "health_problem": (health, ("health",)),
    "placement": (lambda kind_id: placement_finding(hit_of(kind_id)), ("placement",)),
    "plugin_config": (lambda kind_id: config_finding(hit_of(kind_id)), ("plugin_config",)),
    "release": (lambda kind_id: release_finding(hit_of(kind_id)), ("release",)),
    "validator": (rule, ("validator",)),
}
CASES = [
    (name, kind.id)
    for name, (_producer, checks) in PRODUCERS.items()
    for kind in KINDS.values()
    if kind.checks[0] in checks
]


def test_every_check_has_a_producer_here():
    covered = {check for _producer, checks in PRODUCERS.values() for check in checks}
    assert {kind.checks[0] for kind in KINDS.values()} <= covered


@pytest.mark.parametrize("producer, kind_id", CASES)
def test_every_finding_has_the_one_shape(producer, kind_id):
    item = PRODUCERS[producer][0](kind_id)
    assert list(item)[: len(FINDING_KEYS)] == list(FINDING_KEYS), f"{producer}: {kind_id}: {list(item)}"
    assert item["id"] == KINDS[kind_id].finding_id
    assert item["severity"] in SEVERITIES
    assert all(isinstance(item[key], str) and item[key] for key in ("title", "message", "remedy"))
    assert set(item["where"]) <= set(WHERE_KEYS) and None not in item["where"].values()
    assert "" not in item["where"].values()


def test_a_health_problem_keeps_its_status_apart_from_its_severity():
    fields = {name: "x" for name in KINDS["gpus_withdrawn"].fields()}
    degraded = health_problem(HealthProblem("gpus_withdrawn", "degraded", fields))
    assert (degraded["severity"], degraded["status"]) == ("warning", "degraded")


def test_every_finding_kind_is_produced_by_a_unit_test(request, produced_kinds):
    """Run last (conftest.py): each kind must come out of its check in some unit test, not only here."""
    unit = Path(__file__).parent
    collected = {Path(str(item.path)) for item in request.session.items}
    if any(path not in collected for path in unit.rglob("test_*.py")):
        pytest.skip("the census counts the whole unit suite: run pytest tests/unit")
    missing = sorted(kind.finding_id for kind in KINDS.values() if kind.id not in produced_kinds)
    assert not missing, "finding kinds no unit test of their check produces:\n" + "\n".join(missing)
