"""The collection as a user gets it: built, installed, and run from the installed copy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

BIN = os.path.dirname(sys.executable)


def run(*argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, **kwargs)


@pytest.mark.cluster
def test_playbook_runs_from_the_installed_collection(tmp_path, cluster):
    build = run(f"{BIN}/ansible-galaxy", "collection", "build", str(REPO_ROOT), "--output-path", str(tmp_path))
    assert build.returncode == 0, build.stderr
    collections = tmp_path / "collections"
    tarball = next(tmp_path.glob("kubegpu-scheduling-*.tar.gz"))
    assert (
        run(
            f"{BIN}/ansible-galaxy", "collection", "install", "--force", str(tarball), "-p", str(collections)
        ).returncode
        == 0
    )
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), K8S_AUTH_KUBECONFIG=str(cluster.kubeconfig))
    result = run(f"{BIN}/ansible-playbook", "kubegpu.scheduling.fleet_facts", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "GPU fleet" in result.stdout
    assert "NVIDIA-H100-80GB-HBM3" in result.stdout
