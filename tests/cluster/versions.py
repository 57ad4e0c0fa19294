"""Pinned versions of the local control plane, and where their binaries live."""

import os
from pathlib import Path

KUBERNETES = "v1.37.2"
ETCD = "v3.6.16"
KWOK = "v0.8.0"

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")


def cache_root() -> Path:
    """Folder for Go caches, binaries and cluster state; never inside the repository."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubegpu"
    return Path(os.environ.get("KUBEGPU_CACHE", default))


def bin_dir() -> Path:
    """Where the binaries are: KUBEGPU_CLUSTER_BIN_DIR, or the cache folder keyed by the versions."""
    given = os.environ.get("KUBEGPU_CLUSTER_BIN_DIR")
    if given:
        return Path(given)
    return cache_root() / f"bin-k8s-{KUBERNETES}-etcd-{ETCD}-kwok-{KWOK}"
