# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubernetes.core collection, for the benchmark's peer rows only, kept outside the project.

kubernetes.core is what an Ansible user reaches for today (`k8s_info`, `k8s`). It is not a
dependency of this collection and is not installed into the project's `.venv`: the benchmark
takes it from the `ansible` community package on the Python package index (the last release
for this Python, which bundles kubernetes.core), downloaded with pip, and unpacks only that
collection into its own collections folder (~/.cache/kubegpu/bench-collections). Its Python
needs (the `kubernetes` library) are the project's own.

    python -m bench.peers        # make it (once); prints the collections folder
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests.cluster import versions

ANSIBLE_PACKAGE = "ansible==12.3.0"  # the newest release for Python 3.11; bundles kubernetes.core 6.2.0
COLLECTION = "ansible_collections/kubernetes/core/"
ROOT = versions.cache_root() / "bench-collections"


def kubernetes_core_version(root: Path = ROOT) -> str | None:
    manifest = root / COLLECTION / "MANIFEST.json"
    if not manifest.exists():
        return None
    return str(json.loads(manifest.read_text())["collection_info"]["version"])


def ensure_kubernetes_core(root: Path = ROOT) -> Path:
    """The collections folder that holds kubernetes.core, made from the package when missing."""
    if kubernetes_core_version(root):
        return root
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", scratch]
            + [ANSIBLE_PACKAGE],
            check=True,
        )
        wheel = next(Path(scratch).glob("ansible-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(root, [n for n in archive.namelist() if n.startswith(COLLECTION)])
    if not kubernetes_core_version(root):
        raise RuntimeError(f"{wheel.name} has no {COLLECTION}")
    return root


if __name__ == "__main__":
    print(ensure_kubernetes_core())
