"""Run `ansible-test sanity` on this checkout.

ansible-test must run from an `ansible_collections/<namespace>/<name>` folder and reads the
files git knows, so the tracked (and untracked, not ignored) files are copied into one in a
temporary folder, as a fresh git repository, and the tests run there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def checkout_files() -> list[str]:
    listing = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout.decode()
    return [name for name in listing.split("\0") if name and (REPO / name).is_file()]


def copy_collection(target: Path) -> None:
    for name in checkout_files():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, destination)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)


def pip_version(python: str) -> str:
    """The pip release the installed ansible-test bootstraps into its venvs (24.2 with ansible-core 2.18 and
    2.19, 25.2 with 2.21): the name of the bootstrap script it looks for in its cache."""
    from ansible_test._internal.python_requirements import get_venv_packages

    return get_venv_packages(types.SimpleNamespace(version=python))["pip"]


def install_pip_bootstrap(python: str) -> None:
    """ansible-test fetches get-pip.py from a download site; use the local stand-in instead."""
    version = pip_version(python)
    cache = Path.home() / ".ansible" / "test" / "cache" / f"get_pip_{version.replace('.', '_')}.py"
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(__file__).with_name("get_pip.py"), cache)


def main(argv: list[str]) -> int:
    ansible_test = Path(sys.executable).with_name("ansible-test")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    install_pip_bootstrap(python)
    with tempfile.TemporaryDirectory(prefix="kubegpu-sanity-") as tmp:
        target = Path(tmp) / "ansible_collections" / "kubegpu" / "scheduling"
        copy_collection(target)
        return subprocess.run(
            [str(ansible_test), "sanity", "--venv", "--python", python, "--color", "no", *argv], cwd=target, check=False
        ).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
