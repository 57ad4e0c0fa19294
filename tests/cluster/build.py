"""Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok with `go build`.

The wrapper modules under go/ pin the versions; binaries and Go caches go to the cache
folder (see versions.py) and are reused when present.
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import versions

GO_DIR = Path(__file__).resolve().parent / "go"


def _kubernetes_ldflags() -> str:
    major, minor = versions.KUBERNETES.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={versions.KUBERNETES}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def build_steps(out: Path) -> list[tuple[str, list[str]]]:
    """(module folder, go build arguments) for each wrapper module."""
    common = ["go", "build", "-mod=readonly", "-trimpath", "-pgo=off"]
    return [
        ("etcd", common + ["-ldflags=-s -w", "-o", str(out / "etcd"), "go.etcd.io/etcd/server/v3"]),
        ("kwok", common + ["-ldflags=-s -w", "-o", str(out / "kwok"), "sigs.k8s.io/kwok/cmd/kwok"]),
        (
            "kubernetes",
            common
            + [
                f"-ldflags={_kubernetes_ldflags()}",
                "-o",
                str(out) + "/",
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-scheduler",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kubectl",
            ],
        ),
    ]


def missing_binaries(out: Path) -> list[str]:
    return [name for name in versions.BINARIES if not os.access(out / name, os.X_OK)]


def build() -> Path:
    out = versions.bin_dir()
    if not missing_binaries(out):
        print(f"binaries present in {out}", file=sys.stderr)
        return out
    if os.environ.get("KUBEGPU_CLUSTER_BIN_DIR"):
        sys.exit(f"KUBEGPU_CLUSTER_BIN_DIR={out} lacks: {', '.join(missing_binaries(out))}")
    cache = versions.cache_root() / "go"
    env = dict(
        os.environ,
        CGO_ENABLED="0",
        GOFLAGS="-buildvcs=false",
        GOTOOLCHAIN="local",
        GOMODCACHE=str(cache / "mod"),
        GOCACHE=str(cache / "build"),
    )
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    for module, args in build_steps(tmp):
        started = time.monotonic()
        print(f"building {module} ...", file=sys.stderr, flush=True)
        result = subprocess.run(args, cwd=GO_DIR / module, env=env, check=False)
        if result.returncode != 0:
            sys.exit(f"go build of {module} failed (exit {result.returncode})")
        print(f"built {module} in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out
