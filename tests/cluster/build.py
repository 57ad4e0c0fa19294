"""Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok with `go build`.

The wrapper modules under go/ pin the versions; binaries and Go caches go to the cache
folder (see versions.py) and are reused when present.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import versions

GO_DIR = Path(__file__).resolve().parent / "go"
# What the first build takes on a machine of 2 cores, the Go modules downloaded on the way.
FIRST_BUILD_ESTIMATE = "about 8 to 25 minutes on 2 cores, less on more"
HEARTBEAT_SECONDS = 60


def _kubernetes_ldflags(release: str) -> str:
    major, minor = release.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={release}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def build_steps(out: Path) -> list[tuple[str, str, list[str]]]:
    """(binary, module folder, go build arguments): one build a binary, so that each says how long it took
    (the Kubernetes binaries share the Go build cache, so the later ones reuse the earlier ones' packages).
    The Kubernetes binaries come from the module of the release KUBEGPU_KUBERNETES picks (versions.py)."""
    release = versions.kubernetes()
    common = ["go", "build", "-mod=readonly", "-trimpath", "-pgo=off"]
    plain = ["-ldflags=-s -w"]
    kubernetes = [f"-ldflags={_kubernetes_ldflags(release)}"]
    return [
        ("etcd", "etcd", common + plain + ["-o", str(out / "etcd"), "go.etcd.io/etcd/server/v3"]),
        ("kwok", "kwok", common + plain + ["-o", str(out / "kwok"), "sigs.k8s.io/kwok/cmd/kwok"]),
    ] + [
        (
            name,
            versions.kubernetes_module(release),
            common + kubernetes + ["-o", str(out / name), f"k8s.io/kubernetes/cmd/{name}"],
        )
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    ]


def required_go() -> tuple[int, ...]:
    """The newest `go` directive of the wrapper modules: the oldest Go that builds them all."""
    found = []
    for mod in sorted(GO_DIR.glob("*/go.mod")):
        match = re.search(r"^go (\d+(?:\.\d+)*)\s*$", mod.read_text(), re.M)
        if match:
            found.append(go_version(match.group(1)))
    return max(found, default=(0,))


def go_version(text: str) -> tuple[int, ...]:
    """(1, 26, 8) of "1.26.8", "go1.26.8" or "go version go1.26.8 linux/amd64"; () when there is none."""
    match = re.search(r"(?:go)?(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(part) for part in match.groups() if part is not None) if match else ()


def go_problem(found: str | None, required: tuple[int, ...]) -> str | None:
    """Why the `go` on PATH cannot build the binaries (`found`: what `go version` printed, None: no `go`)."""
    wanted = ".".join(map(str, required))
    where = (
        f"install Go {wanted} or newer from https://go.dev/dl/ (Debian's and Ubuntu's golang-go package is "
        "older) and put its bin folder first on PATH, or point KUBEGPU_CLUSTER_BIN_DIR at a folder with "
        f"the binaries ({', '.join(versions.BINARIES)}) built elsewhere"
    )
    if found is None:
        return f"no go command on PATH: {where}"
    have = go_version(found)
    if not have or have < required:
        return f"{found.strip() or 'go'} is older than Go {wanted}, which the pinned modules need: {where}"
    return None


def check_go() -> None:
    try:
        done = subprocess.run(["go", "version"], capture_output=True, text=True, timeout=60, check=False)
        found: str | None = done.stdout if done.returncode == 0 else None
    except OSError:
        found = None
    problem = go_problem(found, required_go())
    if problem:
        sys.exit(f"cannot build the local cluster: {problem}")


def run_step(name: str, args: list[str], cwd: Path, env: dict[str, str], heartbeat: float = HEARTBEAT_SECONDS) -> float:
    """Run one `go build`, saying every `heartbeat` seconds that it still runs; the seconds it took."""
    started = time.monotonic()
    say(f"building {name} ...")
    process = subprocess.Popen(args, cwd=cwd, env=env)
    while True:
        try:
            status = process.wait(timeout=heartbeat)
            break
        except subprocess.TimeoutExpired:
            say(f"  still building {name}: {elapsed(time.monotonic() - started)}")
    if status != 0:
        sys.exit(
            f"go build of {name} failed (exit {status}); if it could not download modules, see "
            "Troubleshooting in docs/testing.md (GOPROXY, or KUBEGPU_CLUSTER_BIN_DIR)"
        )
    took = time.monotonic() - started
    say(f"built {name} in {elapsed(took)}")
    return took


def say(text: str, end: str = "\n") -> None:
    """A line of progress, on standard error at once (standard output carries the result)."""
    print(text, end=end, file=sys.stderr, flush=True)


def elapsed(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def missing_binaries(out: Path) -> list[str]:
    return [name for name in versions.BINARIES if not os.access(out / name, os.X_OK)]


def build() -> Path:
    out = versions.bin_dir()
    if not missing_binaries(out):
        say(f"binaries present in {out}")
        return out
    if os.environ.get("KUBEGPU_CLUSTER_BIN_DIR"):
        sys.exit(f"KUBEGPU_CLUSTER_BIN_DIR={out} lacks: {', '.join(missing_binaries(out))}")
    check_go()
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
    steps = build_steps(tmp)
    say(
        f"building the local cluster's {len(steps)} binaries from source into {out} (first use only): "
        f"{FIRST_BUILD_ESTIMATE}; Go's module and build caches go to {cache} (several GB)"
    )
    began = time.monotonic()
    for number, (name, module, args) in enumerate(steps, 1):
        say(f"[{number}/{len(steps)}] ", end="")
        run_step(name, args, GO_DIR / module, env)
    say(f"built the {len(steps)} binaries in {elapsed(time.monotonic() - began)}")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out
