"""playbooks/site.yml checks each GPU host over that host's own connection, not on the controller.

The test starts a real sshd on 127.0.0.1 (an unprivileged port, a host key and an authorized key of its own in a
temporary directory), whose sessions find a fake nvidia-smi on their PATH that the controller's PATH lacks; the
inventory names one GPU node of the local cluster as a GPU host reached over SSH at 127.0.0.1, with no
ansible_connection of its own. The site playbook must report that host with the GPUs its nvidia-smi lists: run on
the controller, the driver check would find no driver. sshd is stopped after.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ANSIBLE_BIN, REPO_ROOT, LocalCluster, ansible_env
from test_device_plugin_check import fake_gpu_host, gpu_specs, printed_results, served_by_plugin

pytestmark = [pytest.mark.cluster]

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")
PLAYBOOK = REPO_ROOT / "playbooks" / "site.yml"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kubegpu-test", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"sshd exited with {process.returncode}: {process.stderr.read() if process.stderr else ''}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"sshd did not listen on 127.0.0.1:{port} within {timeout}s")


@pytest.fixture(scope="module")
def ssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A running sshd on 127.0.0.1 whose sessions have the fake GPU host's bin directory first on PATH."""
    if not SSHD.is_file() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server is not installed (apt-get install -y openssh-server)")
    if not PRIVSEP_DIR.is_dir():
        if os.geteuid() != 0:
            pytest.skip(f"sshd needs its privilege separation directory {PRIVSEP_DIR}")
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True)
    home = tmp_path_factory.mktemp("sshd")
    bin_dir, config = fake_gpu_host(home, 4, "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n")
    keygen(home / "host_key")
    keygen(home / "client_key")
    (home / "authorized_keys").write_text((home / "client_key.pub").read_text())
    port = free_port()
    sshd_config = home / "sshd_config"
    sshd_config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {home / 'host_key'}",
                f"PidFile {home / 'sshd.pid'}",
                f"AuthorizedKeysFile {home / 'authorized_keys'}",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "StrictModes no",
                "UsePAM no",
                # The GPU host's nvidia-smi is found by its sessions only.
                f"SetEnv PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin",
                "Subsystem sftp internal-sftp",
                "LogLevel ERROR",
                "",
            ]
        )
    )
    process = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(sshd_config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_port(port, process)
        yield {"port": port, "key": home / "client_key", "config": config, "bin": bin_dir, "gpus": 4, "home": home}
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def inventory(tmp_path: Path, host: str, ssh: dict[str, Any]) -> Path:
    """localhost local, as the runbooks' docs give it; one GPU host over SSH with no ansible_connection."""
    gpu_host = {
        "ansible_host": "127.0.0.1",
        "ansible_port": ssh["port"],
        "ansible_user": getpass.getuser(),
        "ansible_ssh_private_key_file": str(ssh["key"]),
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        "ansible_python_interpreter": sys.executable,
    }
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    path = tmp_path / "inventory.yml"
    path.write_text(
        yaml.safe_dump({"all": {"hosts": {"localhost": local}, "children": {"gpu_hosts": {"hosts": {host: gpu_host}}}}})
    )
    return path


def test_site_checks_each_gpu_host_over_its_own_connection(
    cluster: LocalCluster, node_labeling_kept: LocalCluster, ssh_host: dict[str, Any], tmp_path: Path
):
    node = next(s for s in gpu_specs(cluster) if served_by_plugin(cluster, s) and s["gpus"])
    assert shutil.which("nvidia-smi") is None or Path(shutil.which("nvidia-smi") or "").parent != ssh_host["bin"]
    # The sample workload is asked absent under a name of its own: the run writes no pod; the node labels it sets
    # where `make site` has not are taken back after.
    extra = {
        "device_plugin_check_toolkit_config_paths": [str(ssh_host["config"])],
        "sample_workload_state": "absent",
        "sample_workload_name": f"kubegpu-ssh-{uuid.uuid4().hex[:6]}",
    }
    command = [
        str(ANSIBLE_BIN / "ansible-playbook"),
        "-i",
        str(inventory(tmp_path, node["name"], ssh_host)),
        str(PLAYBOOK),
        "-e",
        json.dumps(extra),
    ]
    env = ansible_env(
        cluster.kubeconfig,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
        ANSIBLE_HOST_KEY_CHECKING="0",
        # No SSH master left running after the run.
        ANSIBLE_SSH_ARGS="-o ControlMaster=no",
    )
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

    checks = [r for r in printed_results(done.stdout) if "healthy" in r and "nodes" in r and "report" in r]
    assert checks, done.stdout[-4000:]
    host = next(n["host"] for n in checks[-1]["nodes"] if n["name"] == node["name"])
    # The host's own nvidia-smi answered, over SSH: on the controller there is none to answer.
    assert host is not None and host["driver_working"] is True, host
    assert host["gpu_count"] == ssh_host["gpus"], host
    kinds = {f.get("kind") for f in checks[-1]["findings"] if f.get("node") == node["name"]}
    assert "host_facts_failed" not in kinds, checks[-1]["findings"]
