"""The rules the config check takes from NVIDIA's device plugin, its MPS control daemon and its Helm chart
at the default release (schema.RULES names the code of each), one config per case."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import plugin_config as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config import schema
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.check import check_config
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.sources import (
    check_set,
    merged,
    sets_from_text,
)

DOCS = Path(__file__).resolve().parents[5] / "docs" / "plugin-config.md"
MPS = "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: {replicas}\n"


def kinds_of(text: str, **options) -> list[tuple[str, str]]:
    """(kind, path) of every finding of a file's text, as the module and the CLI check it."""
    verdict = merged([check_set(s, **options) for s in sets_from_text(text, "file.yaml")])
    return [(f["kind"], f["path"]) for f in verdict["findings"]]


def indented(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in text.splitlines())


def helm_values(config: str, extra: str = "") -> str:
    return f"config:\n  map:\n    one: |\n{indented(config, 6)}{extra}"


def operator_values(config: str, extra: str = "") -> str:
    return f"devicePlugin:\n  config:\n    data:\n      one: |\n{indented(config, 8)}{extra}"


# The rule table.


def test_every_rule_names_registered_kinds_and_its_code_at_the_default_release():
    registered = {k.id for k in kinds.KINDS}
    assert schema.UPSTREAM_TAG == schema.DEFAULT_RELEASE
    for rule in schema.RULES:
        assert set(rule.kinds) <= registered
        assert rule.sources and rule.says
        assert all(":" in source and source.split(":")[-1][0].isdigit() for source in rule.sources)


def test_the_docs_give_every_rule_its_sources_and_the_release():
    text = DOCS.read_text()
    assert schema.UPSTREAM_TAG in text and schema.UPSTREAM_COMMIT in text
    assert schema.OPERATOR_TAG in text and schema.OPERATOR_COMMIT in text
    for rule in schema.RULES:
        for kind in rule.kinds:
            assert f"`{kind}`" in text, kind
        for source in rule.sources:
            assert source.removeprefix(f"{schema.OPERATOR}:") in text, source


# MPS root: a deployment setting, judged only where the deployment is seen.


@pytest.mark.parametrize(
    "text",
    [
        MPS.format(replicas=4),
        "kind: ConfigMap\nmetadata: {name: mps}\ndata:\n  mps: |\n" + indented(MPS.format(replicas=4), 4),
        helm_values(MPS.format(replicas=4)),
        helm_values(MPS.format(replicas=4), "mps:\n  root: /var/run/nvidia/mps\n"),
        operator_values(MPS.format(replicas=4)),
        operator_values(MPS.format(replicas=4), "  mps:\n    root: ''\n"),  # the operator's own default then
    ],
    ids=["bare-config", "configmap", "helm-default-root", "helm-own-root", "operator", "operator-empty-root"],
)
def test_an_mps_root_the_deployment_sets_or_the_check_cannot_see_is_no_finding(text):
    assert ("config_mps_without_root", "flags.mpsRoot") not in kinds_of(text)
    assert not [kind for kind, _path in kinds_of(text) if KINDS[kind].severity == "error"]


def test_an_empty_mps_root_in_helm_values_is_an_error_even_with_flags_mps_root():
    config = "flags: {mpsRoot: /run/nvidia/mps}\n" + MPS.format(replicas=4)
    found = kinds_of(helm_values(config, "mps:\n  root: ''\n"))
    assert ("config_mps_without_root", "flags.mpsRoot") in found


def test_the_static_daemonset_needs_flags_mps_root():
    assert ("config_mps_without_root", "flags.mpsRoot") in kinds_of(MPS.format(replicas=4), static_manifest=True)
    with_root = "flags: {mpsRoot: /run/nvidia/mps}\n" + MPS.format(replicas=4)
    found = kinds_of(with_root, static_manifest=True)
    assert ("config_mps_without_root", "flags.mpsRoot") not in found
    assert ("config_mps_not_deployable", "sharing.mps") in found


# Empty sharing sections: "no resources specified" (replicas.go), except a null mps (a pointer: no MPS).


@pytest.mark.parametrize(
    "section",
    ["timeSlicing:", "timeSlicing: {}", "timeSlicing: {resources: []}", "timeSlicing: {resources: }", "mps: {}"],
)
def test_a_sharing_section_without_resources_is_refused(section):
    hits, summary = check_config(yaml.safe_load(f"version: v1\nsharing:\n  {section}\n"))
    assert [(h.kind, h.fields["error"]) for h in hits] == [("config_missing_field", "no resources specified")]
    assert summary["strategy"] == "none"


def test_an_empty_mps_section_is_no_mps_and_no_finding():
    hits, summary = check_config(yaml.safe_load("version: v1\nsharing:\n  mps:\n"))
    assert (hits, summary["strategy"]) == ([], "none")


def test_a_time_slicing_section_of_the_wrong_type_is_one_finding():
    hits, _summary = check_config(yaml.safe_load("sharing:\n  timeSlicing: 4\n"))
    assert [(h.kind, h.where["path"]) for h in hits] == [("config_wrong_type", "sharing.timeSlicing")]


# MPS replicas: at most 48 clients per GPU, 16 below compute capability 7.5 (device.go).


@pytest.mark.parametrize(
    "replicas, kind",
    [
        (2, None),
        (16, None),
        (17, "config_mps_replicas_over_pre_volta_limit"),
        (48, "config_mps_replicas_over_pre_volta_limit"),
        (49, "config_mps_replicas_over_limit"),
        (1000, "config_mps_replicas_over_limit"),
    ],
)
def test_mps_replicas_against_the_mps_client_limits(replicas, kind):
    hits, _summary = check_config(yaml.safe_load(MPS.format(replicas=replicas)))
    limits = [h for h in hits if h.kind.startswith("config_mps_replicas_over")]
    assert [h.kind for h in limits] == ([kind] if kind else [])
    for hit in limits:
        assert hit.where["path"] == "sharing.mps.resources[0].replicas"
        KINDS.finding(hit)


def test_time_slicing_has_no_client_limit():
    text = "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 100}\n"
    assert check_config(yaml.safe_load(text))[0] == []


# Helm values: the chart renders only with a default it can infer (_helpers.tpl, validation.yml).

ONE = "version: v1\n"


def chart(entries: tuple[str, ...], extra: str = "") -> str:
    lines = "".join(f"    {name}: |\n      version: v1\n" for name in entries)
    return f"config:\n{extra}  map:\n{lines}"


@pytest.mark.parametrize(
    "text, refused, default",
    [
        (chart(("a", "b")), True, None),
        (chart(("a", "b"), "  default: b\n"), False, "b"),
        (chart(("default", "b")), False, "default"),
        (chart(("a",)), False, "a"),
        (chart(("a",), "  fallbackStrategies: []\n"), True, None),
        (chart(("a", "b"), "  fallbackStrategies: [empty]\n"), False, None),
        (chart(("default", "b"), "  fallbackStrategies: [single]\n"), True, None),
        (chart(("default", "b"), "  fallbackStrategies: [named]\n"), False, "default"),
    ],
    ids=["two", "default-set", "named", "single", "no-fallbacks", "empty", "single-only", "named-only"],
)
def test_helm_values_need_a_default_the_chart_can_infer(text, refused, default):
    (config_set,) = sets_from_text(text, "values.yaml")
    verdict = check_set(config_set)
    assert [f["kind"] for f in verdict["findings"]] == (["config_chart_no_default"] if refused else [])
    assert verdict["valid"] is not refused
    assert verdict["default"] == default


def test_helm_values_with_both_config_name_and_config_map_are_refused():
    found = kinds_of(chart(("a",), "  name: my-configs\n"))
    assert found == [("config_chart_name_and_map", "config")]
    assert kinds_of("config:\n  name: my-configs\n  default: a\n") == []


# Shared resources no device has: MIG resources exist only under mixed; nvidia.com/gpu.shared never.

TIME_SLICED = "version: v1\n{flags}sharing:\n  timeSlicing:\n    resources:\n    - {{name: {name}, replicas: 2}}\n"


@pytest.mark.parametrize(
    "mig, name, shared",
    [
        (None, "nvidia.com/gpu", True),
        (None, "gpu", True),
        ("none", "nvidia.com/mig-1g.10gb", False),
        ("single", "nvidia.com/mig-1g.10gb", False),
        ("mixed", "nvidia.com/mig-1g.10gb", True),
        ("mixed", "mig-3g.20gb", True),
        (None, "nvidia.com/gpu.shared", False),
        ("mixed", "nvidia.com/gpu.shared", False),
        (None, "nvidia.com/a100", False),
    ],
)
def test_a_shared_resource_is_shared_only_where_a_device_has_its_name(mig, name, shared):
    flags = f"flags: {{migStrategy: {mig}}}\n" if mig else ""
    hits, summary = check_config(yaml.safe_load(TIME_SLICED.format(flags=flags, name=name)))
    found = [(h.kind, h.where["path"]) for h in hits]
    assert found == (
        [] if shared else [("config_shared_resource_not_advertised", "sharing.timeSlicing.resources[0].name")]
    )
    assert len(summary["shared"]) == int(shared)
    for hit in hits:
        finding = KINDS.finding(hit)
        assert finding.remedy


def test_the_fix_for_gpu_shared_names_rename_by_default():
    hits, _summary = check_config(yaml.safe_load(TIME_SLICED.format(flags="", name="nvidia.com/gpu.shared")))
    assert "renameByDefault: true" in KINDS.finding(hits[0]).remedy


def test_the_mig_strategy_the_deployment_sets_overrides_the_config():
    config = TIME_SLICED.format(flags="flags: {migStrategy: none}\n", name="nvidia.com/mig-1g.10gb")
    assert kinds_of(helm_values(config, "migStrategy: mixed\n")) == []
    assert kinds_of(helm_values(config)) == [
        ("config_shared_resource_not_advertised", "sharing.timeSlicing.resources[0].name")
    ]
    # The GPU Operator sets MIG_STRATEGY from its ClusterPolicy: unseen unless the values say mig.strategy.
    assert kinds_of(operator_values(config)) == []
    assert kinds_of(operator_values(config, "mig:\n  strategy: single\n")) == [
        ("config_shared_resource_not_advertised", "sharing.timeSlicing.resources[0].name")
    ]


def test_mps_resources_are_matched_the_same_way():
    text = "version: v1\nsharing:\n  mps:\n    resources:\n    - {name: nvidia.com/mig-1g.10gb, replicas: 2}\n"
    hits, summary = check_config(yaml.safe_load(text))
    assert [h.kind for h in hits] == ["config_shared_resource_not_advertised"]
    assert summary["shared"] == []
