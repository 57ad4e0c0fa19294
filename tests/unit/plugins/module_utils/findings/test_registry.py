"""The registry of finding kinds: declarations checked once, hits turned into findings."""

from __future__ import annotations

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import (
    CHECK_DEVICE_PLUGIN,
    CHECK_FLEET,
    CHECK_HEALTH,
    Case,
    Hit,
    Kind,
    KindError,
    KindRegistry,
    declaration_problem,
)
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.severity import ERROR, WARNING

WITHDRAWN = Kind(
    "gpus_withdrawn",
    WARNING,
    "GPUs withdrawn",
    "{withdrawn} of {capacity} GPUs withdrawn on {node}",
    "restart the device plugin on {node} after repair",
    (CHECK_FLEET, CHECK_HEALTH),
)


def test_a_hit_becomes_a_finding_with_its_kinds_texts():
    registry = KindRegistry([WITHDRAWN])
    finding = registry.finding(Hit("gpus_withdrawn", {"withdrawn": 3, "capacity": 8, "node": "a"}, {"node": "a"}))
    assert finding.message == "3 of 8 GPUs withdrawn on a"
    assert finding.remedy == "restart the device plugin on a after repair"
    assert finding.severity == WARNING
    assert finding.where == {"node": "a"}
    assert WITHDRAWN.fields() == {"withdrawn", "capacity", "node"}
    assert registry.of_check(CHECK_HEALTH) == [WITHDRAWN]
    assert WITHDRAWN.slug == "gpus_withdrawn"


def test_a_hit_of_an_undeclared_kind_or_without_its_fields_is_named():
    registry = KindRegistry([WITHDRAWN])
    with pytest.raises(KindError, match="undeclared finding kind 'nope'"):
        registry.finding(Hit("nope"))
    with pytest.raises(KindError, match="'gpus_withdrawn' lacks the field 'capacity'"):
        registry.finding(Hit("gpus_withdrawn", {"withdrawn": 1, "node": "a"}))


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"severity": "fatal"}, "severity 'fatal'"),
        ({"checks": ()}, "checks []"),
        ({"checks": ("linting",)}, "checks ['linting']"),
        ({"remedy": ""}, "must all be written"),
    ],
)
def test_a_wrong_declaration_is_refused(change, problem):
    kind = Kind(**{**WITHDRAWN.__dict__, **change})
    assert problem in (declaration_problem(kind) or "")
    with pytest.raises(KindError, match="finding kind 'gpus_withdrawn'"):
        KindRegistry([kind])


def test_an_id_declared_twice_is_refused():
    with pytest.raises(KindError, match="declared twice"):
        KindRegistry([WITHDRAWN], [Kind(**{**WITHDRAWN.__dict__, "severity": ERROR})])


def test_every_declared_kind_of_the_collection_is_well_formed():
    for kind in KINDS.values():
        assert declaration_problem(kind) is None, kind.id


SHARED = Kind(
    "no_gpu_capacity",
    ERROR,
    "GPU labels but no {resource} capacity",
    "no {resource} capacity",
    "wait for the plugin to register",
    (CHECK_FLEET, CHECK_DEVICE_PLUGIN),
    cases={
        "fleet": Case(message="labels {labels}; capacity 0", remedy="run the device-plugin check"),
        "strict": Case(severity=WARNING),
    },
)


def test_a_case_replaces_what_it_sets_and_the_title_takes_the_fields():
    registry = KindRegistry([SHARED])
    plain = registry.finding(Hit("no_gpu_capacity", {"resource": "nvidia.com/gpu"}))
    assert (plain.title, plain.message, plain.severity) == (
        "GPU labels but no nvidia.com/gpu capacity",
        "no nvidia.com/gpu capacity",
        ERROR,
    )
    fleet = registry.finding(Hit("no_gpu_capacity", {"resource": "x/gpu", "labels": "a=b"}, case="fleet"))
    assert (fleet.message, fleet.remedy, fleet.severity) == (
        "labels a=b; capacity 0",
        "run the device-plugin check",
        ERROR,
    )
    strict = registry.finding(Hit("no_gpu_capacity", {"resource": "x/gpu"}, case="strict"))
    assert (
        strict.severity == WARNING
        and strict.message == "no x/gpu capacity"
        and strict.id == f"{SHARED.checks[0]}.no_gpu_capacity"
    )
    assert SHARED.fields() == {"resource", "labels"}
    with pytest.raises(KindError, match="undeclared case 'nope'"):
        registry.finding(Hit("no_gpu_capacity", {"resource": "x"}, case="nope"))


def test_a_case_of_an_unknown_severity_is_refused():
    kind = Kind(**{**SHARED.__dict__, "cases": {"odd": Case(severity="fatal")}})
    assert "case 'odd'" in (declaration_problem(kind) or "")


def test_the_kinds_fleet_and_device_plugin_both_report_are_declared_once_for_both():
    shared = {k.id for k in KINDS.of_check(CHECK_FLEET)} & {k.id for k in KINDS.of_check(CHECK_DEVICE_PLUGIN)}
    assert shared == {
        "no_gpu_capacity",
        "allocatable_below_capacity",
        "no_device_plugin_pod",
        "device_plugin_not_ready",
        "dra_no_resource_slices",
        "gpus_served_by_device_plugin_and_dra",
    }
    assert all("fleet" in KINDS[kind].cases for kind in shared)


@pytest.mark.parametrize(
    "declared, check, finding_id",
    [
        ("gpus_withdrawn", CHECK_FLEET, "fleet.gpus_withdrawn"),
        ("KGPU101", "validator", "KGPU101"),
        ("placement.fits_now", "placement", "placement.fits_now"),
    ],
)
def test_a_finding_carries_its_kinds_id_in_one_style(declared, check, finding_id):
    kind = Kind(declared, WARNING, "t", "m", "r", (check,))
    registry = KindRegistry([kind])
    assert kind.finding_id == finding_id
    assert registry.finding(Hit(declared)).id == finding_id
    assert registry[finding_id] is kind and registry.finding(Hit(finding_id)).kind is kind


def test_every_finding_id_of_the_catalogue_is_a_code_or_namespaced_by_its_check():
    for kind in KINDS.values():
        assert kind.finding_id.startswith(f"{kind.checks[0]}.") or kind.finding_id.startswith("KGPU"), kind.id
    assert len({kind.finding_id for kind in KINDS.values()}) == len(KINDS)
