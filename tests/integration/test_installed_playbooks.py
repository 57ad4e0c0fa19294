"""Every playbook the collection ships, run by its full name (`ansible-playbook kubegpu.scheduling.<name>`) from the
collection installed from its built tarball, with no checkout in sight: the working folder is a temporary one and
Ansible is told not to look for collections on Python's path (where `make venv` links the checkout). With the
ansible-playbook of .venv, and of .venv-oldest and .venv-newest (ansible-core 2.18 and 2.21) where
`make test-versions` has made them: the `module_defaults` group and the roles resolve with each.

The playbooks run as docs/runbooks.md gives them; those that write where the other tests expect the fleet as it
was run in check mode (the options of tests/versions/smoke.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from tests.versions import smoke

pytestmark = pytest.mark.cluster

PLAYBOOKS = sorted(p.stem for p in (REPO_ROOT / "playbooks").glob("*.yml"))
# The runbooks that write: check mode here, as the cluster is shared with the other tests.
IN_CHECK_MODE = {"site", "node_labels", "sample_workload", "device_plugin"}
# The device plugin, planned in a namespace every cluster has, on no node.
DEVICE_PLUGIN = {"device_plugin_namespace": "default", "device_plugin_node_selector": {"kubegpu.io/no-node": "here"}}


def venv_bins() -> list[Path]:
    """.venv's bin folder, then those of .venv-oldest and .venv-newest where they exist."""
    found = [Path(sys.executable).parent]
    for name in (".venv-oldest", ".venv-newest"):
        folder = REPO_ROOT / name / "bin"
        if (folder / "ansible-playbook").exists():
            found.append(folder)
    return found


def run(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The collections folder the tarball was installed into."""
    folder = tmp_path_factory.mktemp("installed")
    bin_dir = Path(sys.executable).parent
    build = run(str(bin_dir / "ansible-galaxy"), "collection", "build", str(REPO_ROOT), "--output-path", str(folder))
    assert build.returncode == 0, build.stderr
    tarball = next(folder.glob("kubegpu-scheduling-*.tar.gz"))
    collections = folder / "collections"
    install = run(
        str(bin_dir / "ansible-galaxy"), "collection", "install", "--force", str(tarball), "-p", str(collections)
    )
    assert install.returncode == 0, install.stderr
    assert (collections / "ansible_collections" / "kubegpu" / "scheduling" / "playbooks" / "site.yml").is_file()
    return collections


def planned_runs(kubeconfig: str, report_dir: Path, inventory: Path) -> list[tuple[str, list[str], dict]]:
    """(playbook name, options, extra vars) for every shipped playbook, once each."""
    device = smoke.first_device(kubeconfig, smoke.DRA_NODE)
    by_name: dict[str, tuple[list[str], dict]] = {}
    for playbook, options, extra in smoke.runs(report_dir, inventory, device):
        name = playbook.removesuffix(".yml")
        if name in by_name:
            continue
        if name == "device_plugin":
            extra = DEVICE_PLUGIN
        if name in IN_CHECK_MODE and "--check" not in options:
            options = [*options, "--check", "--diff"]
        by_name[name] = (options, extra)
    assert sorted(by_name) == PLAYBOOKS, "tests/versions/smoke.py does not run every shipped playbook"
    return [(name, *by_name[name]) for name in PLAYBOOKS]


@pytest.mark.parametrize("bin_dir", venv_bins(), ids=lambda p: p.parent.name)
def test_every_shipped_playbook_runs_by_its_full_name_from_the_installed_tarball(
    bin_dir: Path, installed: Path, cluster, tmp_path: Path
):
    python = str(bin_dir / "python")
    kubeconfig = str(cluster.kubeconfig)
    inventory = tmp_path / "clusters.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": python, "kubegpu_kubeconfig": kubeconfig}
    inventory.write_text(json.dumps({"all": {"hosts": {"local": local}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("K8S_AUTH_", "ANSIBLE_")) and k != "KUBECONFIG"}
    env.update(
        K8S_AUTH_KUBECONFIG=kubeconfig,
        ANSIBLE_COLLECTIONS_PATH=str(installed),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
    )
    failed = []
    for name, options, extra in planned_runs(kubeconfig, tmp_path / "report", inventory):
        extra = {"ansible_python_interpreter": python, **extra}
        done = run(
            str(bin_dir / "ansible-playbook"),
            f"kubegpu.scheduling.{name}",
            *options,
            "-e",
            json.dumps(extra),
            env=env,
            cwd=tmp_path,
        )
        problems = smoke.recap_failures(done.stdout)
        if done.returncode != 0 or problems:
            failed.append(f"{name}: {problems} rc={done.returncode}\n{done.stdout[-3000:]}{done.stderr[-1500:]}")
        assert str(REPO_ROOT) not in done.stdout, f"{name} ran from the checkout, not the installed collection"
    assert failed == [], "\n\n".join(failed)
