"""Where ansible and Python find this checkout as the collection kubegpu.scheduling.

`make venv` links the checkout into the virtual environment's site-packages as
ansible_collections/kubegpu/scheduling: Python imports the collection from there, and ansible
finds it there through ANSIBLE_COLLECTIONS_PATH.
"""

import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def collections_root() -> Path:
    """The venv's site-packages, the folder to name in ANSIBLE_COLLECTIONS_PATH."""
    root = Path(sysconfig.get_paths()["purelib"])
    link = root / "ansible_collections" / "kubegpu" / "scheduling"
    if link.resolve() != REPO:
        raise RuntimeError(f"{link} is not a link to {REPO}: run `make venv`")
    return root


if __name__ == "__main__":
    print(collections_root())
