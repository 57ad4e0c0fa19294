"""Another instance of the local control plane beside the shared one, on its own ports and state folder
(`python -m tests.cluster` with KUBEGPU_CLUSTER_DIR and KUBEGPU_*_PORT set): started with a fleet file,
stopped and its state removed whatever happens. Used by the fleet-report integration test and the
fleet-report benchmark. An instance runs the newest release of tests/cluster/versions.py unless told
otherwise, whatever KUBEGPU_KUBERNETES says: beside the shared cluster at 1.34 (`make test-k8s-1.34`) it
is the other release."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.cluster import cluster as local_cluster
from tests.cluster import versions

REPO_ROOT = local_cluster.HERE.parents[1]
SECOND_FLEET = local_cluster.HERE / "fleet-second.yaml"
# Ports apart from the shared cluster's defaults (etcd uses the next port for peers too); each can be
# moved with KUBEGPU_SECOND_<NAME>_PORT (say KUBEGPU_SECOND_APISERVER_PORT) where two checkouts test at once.
SECOND_PORTS = {
    name: int(os.environ.get(name.replace("KUBEGPU_", "KUBEGPU_SECOND_"), default))
    for name, default in {
        "KUBEGPU_ETCD_PORT": 33379,
        "KUBEGPU_APISERVER_PORT": 37443,
        "KUBEGPU_KWOK_PORT": 31250,
    }.items()
}


class InstanceError(RuntimeError):
    pass


class Instance:
    def __init__(self, root: Path, ports: Mapping[str, int], fleet: Path, release: str = versions.NEWEST_KUBERNETES):
        self.root = root
        self.fleet = fleet
        self.release = release
        self.env = dict(
            os.environ,
            KUBEGPU_CLUSTER_DIR=str(root),
            KUBEGPU_KUBERNETES=release,
            **{k: str(v) for k, v in ports.items()},
        )
        self.layout = local_cluster.Layout(root, ports["KUBEGPU_APISERVER_PORT"])

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    def command(self, *args: str, timeout: int = 400) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "tests.cluster", *args]
        return subprocess.run(
            argv, cwd=REPO_ROOT, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def up(self, timeout: int = 300) -> Path:
        """Start the instance and its fleet; its admin kubeconfig."""
        started = self.command("up", "--fleet", str(self.fleet), "--timeout", str(timeout), timeout=timeout + 100)
        if started.returncode != 0:
            raise InstanceError(f"the local cluster in {self.root} did not start: {started.stderr[-3000:]}")
        return self.kubeconfig

    def down(self) -> subprocess.CompletedProcess:
        return self.command("down")


@contextmanager
def started(
    fleet: Path = SECOND_FLEET,
    ports: Mapping[str, int] | None = None,
    prefix: str = "kubegpu-second-",
    release: str = versions.NEWEST_KUBERNETES,
) -> Iterator[Instance]:
    """A started instance in a fresh state folder; stopped and removed on the way out, however it is left."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    instance = Instance(root, SECOND_PORTS if ports is None else ports, fleet, release)
    try:
        instance.up()
        yield instance
    finally:
        instance.down()
        shutil.rmtree(instance.root, ignore_errors=True)
