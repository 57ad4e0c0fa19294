"""Make this checkout importable as ansible_collections.kubegpu.scheduling.

Ansible finds collections only under an `ansible_collections/<namespace>/<name>` path, so
the checkout is linked into one in the temporary folder (one link per checkout).
"""

import hashlib
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def collections_root() -> Path:
    digest = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"kubegpu-collections-{digest}"
    link = root / "ansible_collections" / "kubegpu" / "scheduling"
    if not link.is_symlink() or link.resolve() != REPO:
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp = link.with_name(f".scheduling-{os.getpid()}")
        tmp.symlink_to(REPO, target_is_directory=True)
        os.replace(tmp, link)
    return root


def activate() -> Path:
    """Put the collection on sys.path and on ANSIBLE_COLLECTIONS_PATH for subprocesses."""
    root = collections_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = str(root)
    return root


if __name__ == "__main__":
    print(collections_root())
