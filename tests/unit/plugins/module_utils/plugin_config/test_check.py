"""The offline check of NVIDIA device-plugin configs: every mistake of the upstream issues it
follows, from the issues' own texts, and each finding kind on a config that has just that mistake."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.catalogue import KINDS
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.kinds import plugin_config as kinds
from ansible_collections.kubegpu.scheduling.plugins.module_utils.findings.registry import CHECK_PLUGIN_CONFIG
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.check import check_config
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config.sources import (
    ConfigSet,
    check_set,
    merged,
    sets_from_text,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "plugin_config"

# Each fixture of an upstream issue: the errors (kind, config, path) the check must find, and the other kinds.
BAD = {
    "issue-990-configmap.yaml": ({("config_default_missing", "ConfigMap device-plugin-config", "default")}, set()),
    "issue-1433-configmap.yaml": (
        {
            ("config_misplaced_key", "any", "flags.renameByDefault"),
            ("config_misplaced_key", "any", "flags.failRequestsGreaterThanOne"),
        },
        set(),
    ),
    # Deployed with the static DaemonSet, which sets no MPS root and runs no MPS control daemon.
    "issue-1132-mps.yaml": (
        {
            ("config_mps_without_root", "issue-1132-mps.yaml", "flags.mpsRoot"),
            ("config_mps_not_deployable", "issue-1132-mps.yaml", "sharing.mps"),
        },
        {"config_mps_one_replica_per_container"},
    ),
    "issue-1548-gpu-operator-values.yaml": (
        {("config_replicas_below_two", "rtx-2080-ti", "sharing.mps.resources[0].replicas")},
        set(),
    ),
    # The plugin's own tests and docs (sources in each file), each refused by the plugin, its MPS
    # control daemon or its chart.
    "plugin-test-empty-time-slicing.yaml": (
        {("config_missing_field", "plugin-test-empty-time-slicing.yaml", "sharing.timeSlicing")},
        set(),
    ),
    "readme-time-slicing-resources-commented.yaml": ({("config_missing_field", "any", "sharing.timeSlicing")}, set()),
    "plugin-test-mps-49-replicas.yaml": (
        {("config_mps_replicas_over_limit", "plugin-test-mps-49-replicas.yaml", "sharing.mps.resources[0].replicas")},
        {"config_mps_one_replica_per_container"},
    ),
    "plugin-test-mps-29-replicas-pre-volta.yaml": (
        set(),
        {"config_mps_replicas_over_pre_volta_limit", "config_mps_one_replica_per_container"},
    ),
    "readme-helm-multiple-configs-no-default.yaml": (
        {("config_chart_no_default", "Helm values config", "config.default")},
        set(),
    ),
    "chart-values-example-without-default.yaml": (
        {("config_chart_no_default", "Helm values config", "config.default")},
        set(),
    ),
    "readme-mig-1g-10gb-under-mig-none.yaml": (
        {
            (
                "config_shared_resource_not_advertised",
                "readme-mig-1g-10gb-under-mig-none.yaml",
                "sharing.timeSlicing.resources[0].name",
            )
        },
        set(),
    ),
    "readme-gpu-shared-as-name.yaml": (
        {
            (
                "config_shared_resource_not_advertised",
                "readme-gpu-shared-as-name.yaml",
                "sharing.timeSlicing.resources[0].name",
            )
        },
        set(),
    ),
}
ISSUES = ("990", "1433", "1132", "1548", "929")
# The default config each fixture is checked with (the Helm chart's config.default, the CLI's --default).
DEFAULTS = {"issue-990-configmap.yaml": "device-plugin-config"}
# How each fixture is deployed, where its source says (the CLI's --static-daemonset).
OPTIONS = {"issue-1132-mps.yaml": {"static_manifest": True}}


def fixture_verdict(path: Path, **options) -> dict:
    sets = sets_from_text(path.read_text(), path.name, DEFAULTS.get(path.name))
    return merged([check_set(s, **{**OPTIONS.get(path.name, {}), **options}) for s in sets])


def test_every_issue_has_a_fixture_with_its_source():
    names = {p.name for p in (FIXTURES / "bad").iterdir()}
    assert names == set(BAD)
    every = {p.name: p for d in ("bad", "good") for p in (FIXTURES / d).iterdir()}
    for issue in ISSUES:
        (fixture,) = [n for n in every if n.startswith(f"issue-{issue}-")]
        assert f"NVIDIA/k8s-device-plugin issue {issue}" in every[fixture].read_text()
    for name, path in every.items():
        assert "# Source: " in path.read_text(), name


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_fixture_is_caught_with_the_path_and_the_fix(name):
    verdict = fixture_verdict(FIXTURES / "bad" / name)
    errors = {(f["kind"], f["config"], f["path"]) for f in verdict["findings"] if f["severity"] == "error"}
    others = {f["kind"] for f in verdict["findings"] if f["severity"] != "error"}
    assert (errors, others) == BAD[name]
    assert verdict["valid"] is not bool(errors)
    assert all(f["remedy"] and f["problem"] for f in verdict["findings"])


def test_the_1433_fix_is_the_path_that_works():
    verdict = fixture_verdict(FIXTURES / "bad" / "issue-1433-configmap.yaml")
    assert {f["remedy"] for f in verdict["findings"]} == {
        "move it to sharing.timeSlicing.renameByDefault",
        "move it to sharing.timeSlicing.failRequestsGreaterThanOne",
    }
    # As the plugin reads it: 16384 slices, still named nvidia.com/gpu.
    assert verdict["configs"]["any"]["shared"] == [
        {"name": "nvidia.com/gpu", "advertised": "nvidia.com/gpu", "replicas": 16384}
    ]


@pytest.mark.parametrize(
    "name, shared",
    [
        (
            "readme-time-slicing.yaml",
            [{"name": "nvidia.com/gpu", "advertised": "nvidia.com/gpu.shared", "replicas": 10}],
        ),
        ("issue-461-time-slicing.yaml", [{"name": "nvidia.com/gpu", "advertised": "nvidia.com/gpu", "replicas": 4}]),
        ("readme-flags.yaml", []),
    ],
)
def test_published_configs_pass_and_say_what_is_advertised(name, shared):
    verdict = fixture_verdict(FIXTURES / "good" / name)
    assert verdict["findings"] == []
    assert verdict["valid"] is True
    assert verdict["configs"][name]["shared"] == shared
    assert verdict["configs"][name]["strategy"] == ("time-slicing" if shared else "none")


# Bare MPS configs: the MPS root is the deployment's (the Helm chart's mps.root, the GPU Operator's), not
# a field of the file, so a config or a ConfigMap without flags.mpsRoot is valid.
@pytest.mark.parametrize(
    "name, advertised, replicas",
    [
        ("readme-mps.yaml", "nvidia.com/gpu", 10),
        ("readme-mps-rename.yaml", "nvidia.com/gpu.shared", 10),
        ("issue-929-mps.yaml", "nvidia.com/gpu", 10),
    ],
)
def test_published_mps_configs_pass_without_an_mps_root(name, advertised, replicas):
    verdict = fixture_verdict(FIXTURES / "good" / name)
    assert [f["kind"] for f in verdict["findings"]] == ["config_mps_one_replica_per_container"]
    assert verdict["valid"] is True
    assert verdict["configs"][name]["strategy"] == "mps"
    assert verdict["configs"][name]["shared"] == [
        {"name": "nvidia.com/gpu", "advertised": advertised, "replicas": replicas}
    ]


@pytest.mark.parametrize(
    "name, default",
    [("chart-values-example.yaml", "default"), ("readme-helm-multiple-configs.yaml", "config0")],
)
def test_published_helm_values_with_a_default_the_chart_finds_pass(name, default):
    (config_set,) = sets_from_text((FIXTURES / "good" / name).read_text(), name)
    verdict = check_set(config_set)
    assert verdict["findings"] == []
    assert verdict["default"] == default


def test_mps_root_from_the_helm_chart_is_no_finding():
    text = (
        "config:\n  map:\n    mps: |\n      version: v1\n      sharing:\n        mps:\n          resources:\n"
        "          - name: nvidia.com/gpu\n            replicas: 4\n"
    )
    verdict = merged([check_set(s) for s in sets_from_text(text, "values.yaml")])
    assert [f["kind"] for f in verdict["findings"]] == ["config_mps_one_replica_per_container"]
    assert verdict["configs"]["mps"]["strategy"] == "mps"


# One config per kind: the text, the kind, the path it must name.
ONE_MISTAKE = [
    ("version: v2", "config_unknown_version", "version"),
    ("version: v1\nflags:\n  migStrategy: none\n  replicasPerGpu: 4", "config_unknown_key", "flags.replicasPerGpu"),
    (
        "sharing:\n  timeSlicing:\n    replicas: 4\n    resources:\n    - {name: gpu, replicas: 2}",
        "config_misplaced_key",
        "sharing.timeSlicing.replicas",
    ),
    ("flags:\n  MigStrategy: single", "config_key_case", "flags.MigStrategy"),
    ("flags:\n  failOnInitError: 'true'", "config_wrong_type", "flags.failOnInitError"),
    ("flags:\n  gfd:\n    sleepInterval: soon", "config_wrong_type", "flags.gfd.sleepInterval"),
    ("flags:\n  migStrategy: mixedd", "config_invalid_choice", "flags.migStrategy"),
    (
        "flags:\n  plugin:\n    deviceListStrategy: [envvar, cdi]",
        "config_invalid_choice",
        "flags.plugin.deviceListStrategy",
    ),
    ("flags:\n  plugin:\n    deviceIDStrategy: name", "config_invalid_choice", "flags.plugin.deviceIDStrategy"),
    ("flags:\n  deviceDiscoveryStrategy: pci", "config_invalid_choice", "flags.deviceDiscoveryStrategy"),
    ("sharing:\n  timeSlicing:\n    renameByDefault: true", "config_missing_field", "sharing.timeSlicing"),
    (
        "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu",
        "config_missing_field",
        "sharing.timeSlicing.resources[0]",
    ),
    (
        "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 1}",
        "config_replicas_below_two",
        "sharing.timeSlicing.resources[0].replicas",
    ),
    (
        "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: '4'}",
        "config_wrong_type",
        "sharing.timeSlicing.resources[0].replicas",
    ),
    (
        "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/GPU_Shared, replicas: 2}",
        "config_invalid_resource_name",
        "sharing.timeSlicing.resources[0].name",
    ),
    (
        "sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: some}",
        "config_invalid_devices",
        "sharing.timeSlicing.resources[0].devices",
    ),
    (
        "sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: [0, 1]}",
        "config_devices_ignored",
        "sharing.timeSlicing.resources[0].devices",
    ),
    # Issue 353's config: rename is reset by the releases pinned.
    (
        "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      rename: nvidia.com/gpu.shared\n"
        "      replicas: 2",
        "config_rename_ignored",
        "sharing.timeSlicing.resources[0].rename",
    ),
    ("resources:\n  gpus:\n  - {pattern: '*A100*', name: a100}", "config_resources_ignored", "resources"),
    (
        "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}]\n  mps:\n    resources: [{name: gpu, replicas: 2}]"
        "\nflags: {mpsRoot: /run/nvidia/mps}",
        "config_sharing_both",
        "sharing",
    ),
    (
        "flags: {migStrategy: mixed, mpsRoot: /run/nvidia/mps}\nsharing:\n  mps:\n    resources: [{name: gpu, replicas: 2}]",
        "config_mps_mig_mixed",
        "flags.migStrategy",
    ),
    (
        "flags: {mpsRoot: /run/nvidia/mps}\nsharing:\n  mps:\n    failRequestsGreaterThanOne: false\n"
        "    resources: [{name: gpu, replicas: 2}]",
        "config_mps_fail_requests_ignored",
        "sharing.mps.failRequestsGreaterThanOne",
    ),
    ("imex:\n  channelIDs: [1, 2]", "config_imex_channels", "imex.channelIDs"),
    ("version: v1\nflags: [migStrategy]", "config_wrong_type", "flags"),
    ("- version: v1", "config_unparsable", "(top level)"),
]


@pytest.mark.parametrize("text, kind, path", ONE_MISTAKE)
def test_each_mistake_is_found_at_its_path(text, kind, path):
    hits, _summary = check_config(yaml.safe_load(text))
    found = [(h.kind, h.where["path"]) for h in hits if KINDS[h.kind].severity != "info"]
    assert found == [(kind, path)]
    KINDS.finding(hits[0])  # every field its templates use is there


def test_a_key_of_a_later_release_is_ignored_by_the_earlier():
    doc = yaml.safe_load("flags:\n  gdrcopyEnabled: true")
    assert check_config(doc, "v0.18.2")[0] == []
    (hit,) = check_config(doc, "v0.17.4")[0]
    assert (hit.kind, hit.where["path"], hit.fields["since"]) == (
        "config_key_not_in_release",
        "flags.gdrcopyEnabled",
        "v0.18.0",
    )


def test_mps_is_refused_for_the_static_daemonset():
    doc = yaml.safe_load(
        "flags: {mpsRoot: /run/nvidia/mps}\nsharing:\n  mps:\n    resources: [{name: gpu, replicas: 2}]"
    )
    kinds_found = [h.kind for h in check_config(doc, static_manifest=True)[0]]
    assert "config_mps_not_deployable" in kinds_found
    assert "config_mps_not_deployable" not in [h.kind for h in check_config(doc)[0]]


def test_unparsable_text_and_an_empty_config():
    verdict = check_set(ConfigSet({"broken": "version: v1\nflags: [\n"}))
    assert [(f["kind"], f["config"], f["path"]) for f in verdict["findings"]] == [
        ("config_unparsable", "broken", "(file)")
    ]
    assert check_set(ConfigSet({"empty": ""}))["valid"] is True


def test_every_kind_is_of_this_check_and_found_by_some_case():
    assert all(k.checks == (CHECK_PLUGIN_CONFIG,) for k in kinds.KINDS)
    found = {kind for _text, kind, _path in ONE_MISTAKE}
    found |= {"config_key_not_in_release", "config_mps_not_deployable", "config_mps_one_replica_per_container"}
    found |= {"config_chart_name_and_map"}  # test_upstream_rules.py
    found |= {k for errors, others in BAD.values() for k in {e[0] for e in errors} | others}
    assert found == {k.id for k in kinds.KINDS}


def test_the_readme_config_with_a_key_of_a_later_release_is_an_error_naming_the_key_and_both_releases():
    text = (FIXTURES / "good" / "readme-flags.yaml").read_text() + "  gdrcopyEnabled: true\n"
    assert check_set(ConfigSet({"readme": text}), release="v0.18.2")["findings"] == []
    verdict = check_set(ConfigSet({"readme": text}), release="v0.17.4")
    assert verdict["valid"] is False
    (finding,) = verdict["findings"]
    assert (finding["id"], finding["kind"], finding["severity"]) == (
        "plugin_config.config_key_not_in_release",
        "config_key_not_in_release",
        "error",
    )
    assert finding["where"] == {"config": "readme", "path": "flags.gdrcopyEnabled"}
    assert finding["message"] == "flags.gdrcopyEnabled is read from v0.18.0 on; the plugin v0.17.4 ignores it"
    assert finding["remedy"] == "deploy v0.18.0 or later, or remove the key"
