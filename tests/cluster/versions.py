"""Pinned versions of the local control plane, and where their binaries live.

The local control plane runs one of the Kubernetes releases of KUBERNETES_RELEASES, each built from
its own Go module under go/; KUBEGPU_KUBERNETES picks one (a full version, v1.34.4, or a minor, 1.34),
the newest by default.
"""

import os
import re
from pathlib import Path

# Release to the Go module folder under go/ that pins it; the newest first.
KUBERNETES_RELEASES = {"v1.37.2": "kubernetes", "v1.34.4": "kubernetes-v1.34"}
NEWEST_KUBERNETES = next(iter(KUBERNETES_RELEASES))
# The default release: what `make test` and the benchmarks run on.
KUBERNETES = NEWEST_KUBERNETES
ETCD = "v3.6.16"
KWOK = "v0.8.0"

# What a release does not serve with its default feature gates, as the clouds run it, and so what
# the local cluster leaves out there. Sources, k8s.io/kubernetes@v1.34.4 pkg/features/kube_features.go
# (DRADeviceTaints alpha since 1.33, DRAExtendedResource alpha in 1.34) and
# k8s.io/apiserver@v0.34.4 pkg/features/kube_features.go (MutatingAdmissionPolicy beta in 1.34,
# off by default like every beta API).
DEVICE_TAINT_RULES = "device_taint_rules"
DRA_EXTENDED_RESOURCES = "dra_extended_resources"
MUTATING_ADMISSION_POLICY = "mutating_admission_policy"
NOT_SERVED: dict[str, dict[str, str]] = {
    "v1.34.4": {
        DEVICE_TAINT_RULES: "resource.k8s.io/v1 DeviceTaintRules (feature gate DRADeviceTaints, alpha and off in 1.34)",
        DRA_EXTENDED_RESOURCES: (
            "extended resources served by DRA (DeviceClass spec.extendedResourceName; feature gate "
            "DRAExtendedResource, alpha and off in 1.34)"
        ),
        MUTATING_ADMISSION_POLICY: (
            "admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (beta in 1.34, served as v1beta1 only "
            "when enabled; off by default)"
        ),
    },
}

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")


class UnknownRelease(ValueError):
    pass


def choose_release(requested: str | None) -> str:
    """The release of KUBERNETES_RELEASES that `requested` names: a full version (v1.34.4 or 1.34.4)
    or a minor (1.34 or v1.34); the newest when nothing is asked for."""
    if not requested or not requested.strip():
        return NEWEST_KUBERNETES
    wanted = requested.strip().lstrip("v")
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", wanted):
        raise UnknownRelease(f"KUBEGPU_KUBERNETES={requested!r} is not a version: {supported()}")
    for release in KUBERNETES_RELEASES:
        number = release.lstrip("v")
        if wanted == number or (wanted.count(".") == 1 and number.startswith(wanted + ".")):
            return release
    raise UnknownRelease(f"KUBEGPU_KUBERNETES={requested!r} is not a release the local cluster builds: {supported()}")


def supported() -> str:
    return "use one of " + ", ".join(KUBERNETES_RELEASES) + " (or its minor, such as 1.34)"


def kubernetes() -> str:
    """The release this run uses: the one KUBEGPU_KUBERNETES names, the newest without it."""
    return choose_release(os.environ.get("KUBEGPU_KUBERNETES"))


def kubernetes_module(release: str | None = None) -> str:
    """The Go module folder under go/ that builds the release."""
    return KUBERNETES_RELEASES[release or kubernetes()]


def not_served(release: str | None = None) -> dict[str, str]:
    """Feature to what the release does not serve by default, in words (empty for the newest)."""
    return NOT_SERVED.get(release or kubernetes(), {})


def serves(feature: str, release: str | None = None) -> bool:
    return feature not in not_served(release)


def cache_root() -> Path:
    """Folder for Go caches, binaries and cluster state; never inside the repository."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubegpu"
    return Path(os.environ.get("KUBEGPU_CACHE", default))


def bin_dir(release: str | None = None) -> Path:
    """Where the binaries are: KUBEGPU_CLUSTER_BIN_DIR, or the cache folder keyed by the versions."""
    given = os.environ.get("KUBEGPU_CLUSTER_BIN_DIR")
    if given:
        return Path(given)
    return cache_root() / f"bin-k8s-{release or kubernetes()}-etcd-{ETCD}-kwok-{KWOK}"
