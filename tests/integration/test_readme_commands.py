"""The commands of docs/local-cluster.md for the local cluster, run as written (the default folders replaced by the ones
this session uses): kubectl against it."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest
from conftest import REPO_ROOT, LocalCluster

from tests.cluster import versions

pytestmark = pytest.mark.cluster

DEFAULT_CACHE = "~/.cache/kubegpu"


def readme_command(starting: str) -> str:
    [line] = [
        m
        for m in re.findall(r"^(\S.*)$", (REPO_ROOT / "docs" / "local-cluster.md").read_text(), re.M)
        if m.startswith(starting)
    ]
    return line


def test_kubectl_against_the_local_cluster_as_the_readme_gives_it(cluster: LocalCluster):
    line = readme_command(f"{DEFAULT_CACHE}/bin-")
    argv = shlex.split(line)
    assert (
        argv[0] == f"{DEFAULT_CACHE}/{versions.bin_dir().name}/kubectl" or versions.bin_dir() != versions.cache_root()
    )
    argv[0] = str(versions.bin_dir() / "kubectl")
    argv = [str(cluster.kubeconfig) if a == f"{DEFAULT_CACHE}/cluster/admin.kubeconfig" else a for a in argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split()[-1] == "ACCELERATOR"
    assert {row.split()[0] for row in rows} == {n["metadata"]["name"] for n in cluster.get("/api/v1/nodes")["items"]}
