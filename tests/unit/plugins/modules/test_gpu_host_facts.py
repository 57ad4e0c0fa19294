"""gpu_host_facts against a fake host tree and a fake nvidia-smi that prints real captured output."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.modules import gpu_host_facts
from tests.module_args import patch_module_args

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "host"
POD_PID, DOCKER_PID, GONE_PID = 11327, 11328, 11345  # the pids of smi-apps-h100-590.48.01.csv

# The fake runs on this interpreter so that it needs nothing from PATH, which holds only the fake.
FAKE_SMI = """#!{python}
import sys
with open("{log}", "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
outputs = {{"--query-gpu": "{gpus}", "--query-compute-apps": "{apps}"}}
query = sys.argv[1].split("=", 1)[0] if len(sys.argv) > 1 else ""
if query not in outputs:
    sys.exit("unexpected arguments: " + " ".join(sys.argv[1:]))
with open(outputs[query]) as output:
    sys.stdout.write(output.read())
"""

# Constructed: the message nvidia-smi prints when the kernel module does not answer.
BROKEN_SMI = """#!{python}
import sys
sys.stderr.write("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\\n")
sys.exit(9)
"""


def fake_smi(**paths):
    return FAKE_SMI.format(python=sys.executable, **paths)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def copy_fixture(name: str, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / name, dest)
    return dest


def install_program(bin_dir: Path, text: str) -> Path:
    program = write(bin_dir / "nvidia-smi", text)
    program.chmod(0o755)
    return program


@pytest.fixture
def empty_path(tmp_path, monkeypatch):
    """PATH holding only an empty directory, so no real nvidia-smi is found."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


@pytest.fixture
def gpu_host(tmp_path, empty_path):
    root = tmp_path / "host"
    copy_fixture("driver-version-open-565.57.01.txt", root / "proc/driver/nvidia/version")
    copy_fixture("proc-modules-nvidia-580.txt", root / "proc/modules")
    copy_fixture("cgroup-v1-containerd-systemd-kubepods.txt", root / f"proc/{POD_PID}/cgroup")
    copy_fixture("cgroup-v1-docker-run.txt", root / f"proc/{DOCKER_PID}/cgroup")
    copy_fixture("toolkit-config-default-legacy.toml", root / "etc/nvidia-container-runtime/config.toml")
    for node in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia-modeset"):
        write(root / "dev" / node, "")
    log = tmp_path / "smi-calls.log"
    install_program(
        empty_path,
        fake_smi(log=log, gpus=FIXTURES / "smi-gpu-h100-590.48.01.csv", apps=FIXTURES / "smi-apps-h100-590.48.01.csv"),
    )
    return root, log


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_host_facts.main()
    return json.loads(capsys.readouterr().out)


def test_reads_a_gpu_host(gpu_host, capsys):
    root, log = gpu_host
    result = run_module(capsys, root=str(root))

    assert result["changed"] is False
    assert result["driver_found"] is True and result["driver_working"] is True, result["nvidia_smi"]
    assert result["message"] is None
    assert result["driver_version"] == "590.48.01"
    assert result["kernel_module"] == {
        "version_file": {"version": "565.57.01", "flavor": "open", "arch": "x86_64"},
        "loaded": ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"],
    }
    assert result["device_nodes"] == {"nvidiactl": True, "nvidia_uvm": True, "gpus": ["/dev/nvidia0"]}
    assert result["gpu_count"] == 1
    assert result["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert result["models"] == ["NVIDIA-H100-80GB-HBM3"]
    assert [(p["pid"], p["where"]) for p in result["processes"]] == [
        (POD_PID, "pod"),
        (DOCKER_PID, "container"),
        (GONE_PID, "unknown"),
    ]
    [outside] = result["processes_outside_pods"]
    assert outside["pid"] == DOCKER_PID and outside["runtime"] == "docker"
    assert result["ansible_facts"]["gpu_host"]["processes_outside_pods"] == result["processes_outside_pods"]

    configs = {c["path"]: c for c in result["toolkit"]["configs"]}
    assert configs["/etc/nvidia-container-runtime/config.toml"]["hardened"] is False
    assert configs["/usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml"] == {
        "path": "/usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml",
        "exists": False,
    }
    assert result["toolkit"]["hardened"] is False
    assert any("envvar-when-unprivileged is true" in p for p in result["problems"])
    assert any(p.startswith(f"GPU used outside Kubernetes pods: pid {DOCKER_PID} ") for p in result["problems"])

    calls = log.read_text().splitlines()
    assert calls == [
        "--query-gpu=index,name,uuid,memory.total,driver_version,pci.bus_id --format=csv,noheader,nounits",
        "--query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv,noheader,nounits",
    ]


def test_check_mode_reads_the_same(gpu_host, capsys):
    root, _bin = gpu_host
    result = run_module(capsys, root=str(root), _ansible_check_mode=True)
    assert result["changed"] is False
    assert result["gpu_count"] == 1


def test_hardened_toolkit_under_the_gpu_operator_path(gpu_host, capsys):
    root, _bin = gpu_host
    operator_config = "/usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml"
    # constructed hardened config (NVIDIA's recommended values), not a captured file
    write(
        root / operator_config.lstrip("/"),
        "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
        "accept-nvidia-visible-devices-as-volume-mounts = true\n",
    )
    result = run_module(capsys, root=str(root), toolkit_config_paths=[operator_config])
    assert result["toolkit"]["hardened"] is True
    assert not any("accept-nvidia" in p for p in result["problems"])


def test_host_without_driver_is_not_a_failure(tmp_path, empty_path, capsys):
    root = tmp_path / "host"
    root.mkdir()
    result = run_module(capsys, root=str(root))
    assert result.get("failed") is not True
    assert result["driver_found"] is False
    assert result["message"] == "no driver found"
    assert result["gpus"] == []
    assert any("nvidia-smi on PATH" in item for item in result["looked_for"])
    assert str(root / "proc/driver/nvidia/version") in result["looked_for"]
    assert result["problems"][0].startswith("no driver found (looked for: ")
    # no toolkit complaint on a host without GPUs
    assert len(result["problems"]) == 1


def test_require_driver_fails_without_one(tmp_path, empty_path, capsys):
    root = tmp_path / "host"
    root.mkdir()
    result = run_module(capsys, root=str(root), require_driver=True)
    assert result["failed"] is True
    assert result["msg"].startswith("require_driver: no driver found")


def test_broken_nvidia_smi_with_the_module_loaded(tmp_path, empty_path, capsys):
    root = tmp_path / "host"
    copy_fixture("proc-modules-nvidia-580.txt", root / "proc/modules")
    install_program(empty_path, BROKEN_SMI.format(python=sys.executable))
    result = run_module(capsys, root=str(root))
    assert result["driver_found"] is True
    assert result["driver_working"] is False
    assert "exited with 9: NVIDIA-SMI has failed" in result["nvidia_smi"]["error"]
    assert result["problems"][0].startswith("the NVIDIA kernel module is present but nvidia-smi does not work")
    failed = run_module(capsys, root=str(root), require_driver=True)
    assert failed["failed"] is True


def test_explicit_nvidia_smi_path_and_missing_root(tmp_path, empty_path, capsys):
    smi = install_program(
        tmp_path / "elsewhere",
        fake_smi(
            log=tmp_path / "log",
            gpus=FIXTURES / "smi-gpu-h200-580.173.02.csv",
            apps=FIXTURES / "smi-apps-h200-580.173.02-idle.csv",
        ),
    )
    root = tmp_path / "host"
    root.mkdir()
    result = run_module(capsys, root=str(root), nvidia_smi=str(smi))
    assert result["nvidia_smi"]["path"] == str(smi)
    assert result["gpus"][0]["memory_total_mib"] == 143771
    assert result["processes"] == []
    missing = run_module(capsys, root=str(tmp_path / "nope"))
    assert missing["failed"] is True
    assert "is not a directory" in missing["msg"]
