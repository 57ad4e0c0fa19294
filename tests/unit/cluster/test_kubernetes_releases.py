"""Which Kubernetes release the local control plane runs: KUBEGPU_KUBERNETES picks one of the table in
versions.py by full version or minor, each is built from its own Go module into its own cache folder,
and the fleet leaves out, with a note, what a release does not serve."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster import build, fleet, versions

REPO = Path(__file__).resolve().parents[3]
FLEET = REPO / "tests" / "cluster" / "fleet.yaml"


@pytest.mark.parametrize(
    ("requested", "release"),
    [
        (None, "v1.37.2"),
        ("", "v1.37.2"),
        ("1.34", "v1.34.4"),
        ("v1.34", "v1.34.4"),
        ("1.34.4", "v1.34.4"),
        ("v1.34.4", "v1.34.4"),
        (" 1.37 ", "v1.37.2"),
        ("v1.37.2", "v1.37.2"),
    ],
)
def test_a_release_is_chosen_by_full_version_or_minor(requested, release):
    assert versions.choose_release(requested) == release


@pytest.mark.parametrize("requested", ["1.35", "1.34.2", "1", "latest", "1.3", "v1.37.2-rc.0"])
def test_a_release_not_in_the_table_is_refused_with_those_that_are(requested):
    with pytest.raises(versions.UnknownRelease) as refused:
        versions.choose_release(requested)
    assert f"KUBEGPU_KUBERNETES={requested!r}" in str(refused.value)
    assert "v1.37.2, v1.34.4" in str(refused.value)


def test_the_default_is_the_newest_release():
    assert versions.NEWEST_KUBERNETES == versions.KUBERNETES == "v1.37.2"
    numbers = [tuple(map(int, r.lstrip("v").split("."))) for r in versions.KUBERNETES_RELEASES]
    assert numbers == sorted(numbers, reverse=True)


@pytest.mark.parametrize("release", list(versions.KUBERNETES_RELEASES))
def test_each_release_has_a_module_that_pins_it_and_its_staging_modules(release):
    go_mod = (build.GO_DIR / versions.kubernetes_module(release) / "go.mod").read_text()
    assert re.search(rf"^\s*(require )?k8s\.io/kubernetes {re.escape(release)}( // indirect)?$", go_mod, re.M), release
    staging = re.findall(r"^replace (k8s\.io/\S+) => (\S+) (\S+)$", go_mod, re.M)
    assert len(staging) > 25
    staging_version = "v0." + release.split(".", 1)[1]
    assert all(name == target and version == staging_version for name, target, version in staging), staging
    assert (build.GO_DIR / versions.kubernetes_module(release) / "go.sum").stat().st_size > 0


def test_each_release_has_its_own_binaries_folder(monkeypatch):
    monkeypatch.delenv("KUBEGPU_CLUSTER_BIN_DIR", raising=False)
    folders = {versions.bin_dir(release).name for release in versions.KUBERNETES_RELEASES}
    assert folders == {f"bin-k8s-{r}-etcd-{versions.ETCD}-kwok-{versions.KWOK}" for r in versions.KUBERNETES_RELEASES}
    monkeypatch.setenv("KUBEGPU_KUBERNETES", "1.34")
    assert versions.bin_dir().name == "bin-k8s-v1.34.4-etcd-v3.6.16-kwok-v0.8.0"


def test_the_chosen_release_is_built_from_its_module_with_its_version(monkeypatch):
    monkeypatch.setenv("KUBEGPU_KUBERNETES", "1.34")
    steps = {name: (module, args) for name, module, args in build.build_steps(Path("/out"))}
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"):
        module, args = steps[name]
        assert module == "kubernetes-v1.34"
        assert "-X k8s.io/component-base/version.gitVersion=v1.34.4" in " ".join(args)
        assert "gitMinor=34" in " ".join(args)
    assert steps["etcd"][0] == "etcd" and steps["kwok"][0] == "kwok"


def test_on_1_34_the_fleet_leaves_out_the_pod_that_needs_dra_extended_resources():
    newest, older = fleet.load(FLEET, "v1.37.2"), fleet.load(FLEET, "v1.34.4")
    assert newest["left_out"] == []
    left_out = sorted({p["name"] for p in newest["pods"]} - {p["name"] for p in older["pods"]})
    assert left_out == ["dra-extended"]
    [note] = older["left_out"]
    assert note.startswith("pod dra-extended left out: Kubernetes v1.34.4 does not serve")
    assert "DRAExtendedResource" in note and "extendedResourceName" in note


def test_the_fleet_follows_kubegpu_kubernetes(monkeypatch):
    monkeypatch.setenv("KUBEGPU_KUBERNETES", "1.34")
    assert "dra-extended" not in {p["name"] for p in fleet.load(FLEET)["pods"]}


def test_an_unknown_release_stops_the_cluster_commands_with_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tests.cluster", "build"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "KUBEGPU_KUBERNETES": "1.35", "KUBEGPU_CACHE": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == f"error: KUBEGPU_KUBERNETES='1.35' is not a release the local cluster builds: {versions.supported()}"
    )
    assert not list(tmp_path.iterdir())
