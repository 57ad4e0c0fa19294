"""The pinned releases are NVIDIA's published static manifests: the data equals the files of
NVIDIA/k8s-device-plugin at each release's tag (copies in tests/unit/fixtures/plugin_deploy/, the
commit on their first line), and the releases are those the config check knows."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_config import schema
from ansible_collections.kubegpu.scheduling.plugins.module_utils.plugin_deploy.releases import (
    DEFAULT_RELEASE,
    DEVICE_PLUGIN_PATH,
    FEATURE_DISCOVERY_PATH,
    RELEASES,
    REPOSITORY,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "plugin_deploy"


def published(version: str, path: str) -> tuple[str, dict]:
    text = (FIXTURES / f"{version}-{Path(path).name}").read_text()
    return text.splitlines()[0], yaml.safe_load(text)


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_each_release_is_the_published_device_plugin_manifest(version):
    release = RELEASES[version]
    source, manifest = published(version, DEVICE_PLUGIN_PATH)
    assert f"{REPOSITORY} {DEVICE_PLUGIN_PATH} at {version} (commit {release.commit})" in source
    assert release.device_plugin() == manifest


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_each_release_is_the_published_feature_discovery_manifest(version):
    release = RELEASES[version]
    source, manifest = published(version, FEATURE_DISCOVERY_PATH)
    assert f"{REPOSITORY} {FEATURE_DISCOVERY_PATH} at {version} (commit {release.commit})" in source
    assert release.feature_discovery() == manifest


def test_the_releases_are_those_whose_config_schema_is_checked():
    assert tuple(sorted(RELEASES)) == tuple(sorted(schema.RELEASES))
    assert DEFAULT_RELEASE == schema.DEFAULT_RELEASE


def test_the_two_releases_differ_in_image_and_environment():
    old, new = RELEASES["v0.17.4"].device_plugin(), RELEASES["v0.18.2"].device_plugin()
    old_container, new_container = (m["spec"]["template"]["spec"]["containers"][0] for m in (old, new))
    assert old_container["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"
    assert new_container["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.18.2"
    assert old_container["env"] == [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}] and new_container["env"] == []


def test_a_release_hands_out_copies():
    release = RELEASES[DEFAULT_RELEASE]
    release.device_plugin()["metadata"]["name"] = "changed"
    assert release.device_plugin()["metadata"]["name"] == "nvidia-device-plugin-daemonset"
