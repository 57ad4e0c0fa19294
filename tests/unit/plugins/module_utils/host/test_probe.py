"""Host parsers against real outputs (tests/unit/fixtures/host/README.md names each source)."""

from pathlib import Path

import pytest

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import ENVVAR_KEY, VOLUME_MOUNTS_KEY
from ansible_collections.kubegpu.scheduling.plugins.module_utils.host import probe as host_probe
from ansible_collections.kubegpu.scheduling.plugins.module_utils.host.probe import (
    classify_cgroup,
    describe_process,
    loaded_nvidia_modules,
    parse_compute_apps,
    parse_driver_version,
    parse_gpu_query,
    parse_proc_modules,
    parse_query_csv,
    parse_toolkit_config,
    place_processes,
    toolkit_findings,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "host"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# --- nvidia-smi --query-gpu ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "smi-gpu-h100-590.48.01.csv",
            {
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                "memory_total_mib": 81559,
                "driver_version": "590.48.01",
                "pci_bus_id": "00000000:00:09.0",
                "product_label": "NVIDIA-H100-80GB-HBM3",
                "model_label_value": "NVIDIA-H100-80GB-HBM3",
            },
        ),
        (
            "smi-gpu-h200-580.173.02.csv",
            {
                "index": 0,
                "name": "NVIDIA H200",
                "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                "memory_total_mib": 143771,
                "driver_version": "580.173.02",
                "pci_bus_id": "00000000:83:00.0",
                "product_label": "NVIDIA-H200",
                "model_label_value": "NVIDIA-H200",
            },
        ),
        (
            "smi-gpu-tesla-p100.csv",
            {
                "index": None,
                "name": "Tesla P100-PCIE-16GB",
                "uuid": "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6",
                "memory_total_mib": None,
                "driver_version": None,
                "pci_bus_id": None,
                "product_label": "Tesla-P100-PCIE-16GB",
                "model_label_value": "Tesla-P100-PCIE-16GB",
            },
        ),
    ],
)
def test_gpu_query_with_header_reads_columns_by_name(name, expected):
    assert parse_gpu_query(fixture(name)) == [expected]


def test_gpu_query_without_header_uses_the_queried_fields():
    fields = (
        "power.limit",
        "power.min_limit",
        "power.max_limit",
        "memory.total",
        "vbios_version",
        "driver_version",
        "name",
        "gpu_uuid",
        "power.draw",
        "temperature.gpu",
        "temperature.memory",
        "clocks.current.graphics",
        "clocks.sm",
        "clocks.mem",
        "utilization.gpu",
        "utilization.memory",
        "fan.speed",
        "pcie.link.width.current",
        "pstate",
    )
    [gpu] = parse_gpu_query(fixture("smi-gpu-rtx2080-440.64-noheader.csv"), fields)
    assert gpu["name"] == "GeForce RTX 2080"
    assert gpu["uuid"] == "GPU-22b2c6ac-2d49-4863-197c-9c469071178a"
    assert gpu["memory_total_mib"] == 7979
    assert gpu["driver_version"] == "440.64"
    assert gpu["product_label"] == "GeForce-RTX-2080"


def test_gpu_query_name_only():
    [gpu] = parse_gpu_query(fixture("smi-gpu-h100nvl-noheader.csv"), ("name", "pci.device_id"))
    assert gpu["name"] == "NVIDIA H100 NVL"
    assert gpu["model_label_value"] == "NVIDIA-H100-NVL"


def test_gpu_query_absent_values_are_none():
    row = parse_query_csv(fixture("smi-gpu-h100-590.48.01.csv"), ())[0]
    assert row["vgpu_driver_capability.heterogenous_multivGPU"] is None  # [N/A]
    assert row["fan.speed"] is None  # [N/A]
    assert row["display_mode"] == "[Requested functionality has been deprecated]"
    assert row["platform.chassis_serial_number"] is None  # empty cell


@pytest.mark.parametrize("text", ["", "\n\n", "garbage that is not csv", "1, 2"])
def test_gpu_query_tolerates_nonsense(text):
    gpus = parse_gpu_query(text)
    assert gpus == []


def test_gpu_query_with_fewer_cells_than_fields_skips_the_row():
    assert parse_gpu_query("0, Tesla T4") == []


# --- nvidia-smi --query-compute-apps ---------------------------------------------------------


def test_compute_apps_with_header():
    apps = parse_compute_apps(fixture("smi-apps-h100-590.48.01.csv"))
    assert apps == [
        {
            "pid": 11327,
            "process_name": "/root/tools/memhog",
            "gpu_uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "used_memory_mib": 2566,
        },
        {
            "pid": 11328,
            "process_name": "/root/tools/memhog",
            "gpu_uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "used_memory_mib": 1542,
        },
        {
            "pid": 11345,
            "process_name": "./gpu_burn",
            "gpu_uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "used_memory_mib": 15690,
        },
    ]


def test_compute_apps_idle_header_only():
    assert parse_compute_apps(fixture("smi-apps-h200-580.173.02-idle.csv")) == []


def test_compute_apps_queried_by_alias():
    # `--query-compute-apps=gpu_uuid,name` prints the header `gpu_uuid, process_name`
    apps = parse_compute_apps(fixture("smi-apps-vgpu.csv"))
    assert [a["process_name"] for a in apps] == ["vgpu", "vgpu", "vgpu"]
    assert apps[0]["gpu_uuid"] == "GPU-d0180485-9584-433c-6782-c335d5df2cb3"
    assert apps[0]["pid"] is None


def test_compute_apps_noheader_name_with_commas_and_permissions():
    # the module's own query, noheader/nounits; a process name may hold commas
    text = (
        "4242, /opt/app/run, --x, GPU-22b2c6ac-2d49-4863-197c-9c469071178a, 512\n"
        "17, [Insufficient Permissions], GPU-22b2c6ac-2d49-4863-197c-9c469071178a, [N/A]\n"
    )
    apps = parse_compute_apps(text)
    assert apps[0] == {
        "pid": 4242,
        "process_name": "/opt/app/run, --x",
        "gpu_uuid": "GPU-22b2c6ac-2d49-4863-197c-9c469071178a",
        "used_memory_mib": 512,
    }
    assert apps[1]["process_name"] is None
    assert apps[1]["used_memory_mib"] is None


# --- /proc/driver/nvidia/version -------------------------------------------------------------


@pytest.mark.parametrize(
    "name, version, flavor, arch",
    [
        ("driver-version-384.98.txt", "384.98", "proprietary", "x86_64"),
        ("driver-version-open-525.60.11.txt", "525.60.11", "open", "x86_64"),
        ("driver-version-open-555.58.txt", "555.58", "open", "x86_64"),
        ("driver-version-open-565.57.01.txt", "565.57.01", "open", "x86_64"),
        ("driver-version-jetson-35.3.1.txt", "35.3.1", "open", "aarch64"),
    ],
)
def test_driver_version_file(name, version, flavor, arch):
    assert parse_driver_version(fixture(name)) == {"version": version, "flavor": flavor, "arch": arch}


@pytest.mark.parametrize("text", ["", "GCC version:  gcc version 7.2.0", "NVRM version: something else"])
def test_driver_version_file_without_version(text):
    assert parse_driver_version(text) is None


# --- /proc/modules ---------------------------------------------------------------------------


def test_proc_modules():
    modules = parse_proc_modules(fixture("proc-modules-nvidia-580.txt"))
    assert modules["nvidia"] == {
        "size": 111489024,
        "use_count": 8,
        "used_by": ["nvidia_uvm", "nvidia_drm", "nvidia_modeset"],
        "state": "Live",
    }
    assert modules["nvidia_uvm"]["used_by"] == []
    assert loaded_nvidia_modules(modules) == ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"]


def test_proc_modules_without_nvidia_and_garbage():
    assert loaded_nvidia_modules(parse_proc_modules("")) == []
    assert parse_proc_modules("not a module line\nx y\n") == {}


# --- /proc/<pid>/cgroup ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, pod_uid, container_id, runtime",
    [
        (
            "cgroup-v1-docker-cgroupfs-kubepods.txt",
            "c101fead-5fa2-4525-97af-5894973b336e",
            "2b7a2f7fb72575bb50a46d68cceaf43a12a597184714cb33af2f6420f5314293",
            None,
        ),
        (
            "cgroup-v1-containerd-systemd-kubepods.txt",
            "b96a7488-3ee1-4bdc-9c98-155cc887b417",
            "6ef14b5a76df7b5d24285e3a04ccbc6fd323620272b3787b5dc440fc1b75d294",
            "containerd",
        ),
        (
            "cgroup-v1-crio-systemd-kubepods.txt",
            "a5c1f8d5-1919-434d-add7-4afaafdaef89",
            "5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c",
            "cri-o",
        ),
        (
            "cgroup-v1-docker-systemd-kubepods.txt",
            "7d4424e6-bb13-42f4-a47a-45a4828bf54d",
            "d0b3604b67ac7930dd34ba3a796627e3e4717d12309e90a4afe3f38b6816ac98",
            "docker",
        ),
    ],
)
def test_cgroup_of_a_pod(name, pod_uid, container_id, runtime):
    place = classify_cgroup(fixture(name))
    assert place["where"] == "pod"
    assert (place["pod_uid"], place["container_id"], place["runtime"]) == (pod_uid, container_id, runtime)


def test_cgroup_v2_pod_on_kind():
    path = fixture("cgroup-v2-kind-containerd-path.txt").strip().removeprefix("/sys/fs/cgroup")
    place = classify_cgroup(f"0::{path}\n")
    assert place["where"] == "pod"
    assert place["pod_uid"] == "1e597579-417e-482f-bf65-5fe170c3aebd"
    assert place["container_id"] == "a09bc17f5aa29b0dbdec9ede5f46cf1396d2405917ab02e6f1eb1019f388396e"
    assert place["runtime"] == "containerd"


@pytest.mark.parametrize(
    "name, container_id",
    [
        ("cgroup-v1-docker-run.txt", "2403ccfe427f1dc7b6120dccb9ac58c2f8456950380d587a9f33ea7f00dd303d"),
        ("cgroup-v1-docker-systemd-run.txt", "b33dda97580e721a69fa81742190341f858ea809ec4a9d74a8cfd411b0ee7c26"),
    ],
)
def test_cgroup_of_a_docker_run_container(name, container_id):
    place = classify_cgroup(fixture(name))
    assert place["where"] == "container"
    assert place["pod_uid"] is None
    assert (place["container_id"], place["runtime"]) == (container_id, "docker")


def test_cgroup_of_a_host_process():
    place = classify_cgroup(fixture("cgroup-v1-host-service.txt"))
    assert place == {"where": "host", "pod_uid": None, "container_id": None, "runtime": None, "cgroup": "/system.slice"}


def test_static_pod_uid_is_a_hash():
    # mirror pods of static manifests carry a 32-digit config hash as their UID (netdata#4868 tree)
    place = classify_cgroup(
        "0::/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-pod187bff14cccb94f179e943eacce55bb3.slice/"
        "cri-containerd-c203a2647ef1ad78e990157c50331f3b6ef0b03336cf08535d6bf7faa5421415.scope\n"
    )
    assert place["pod_uid"] == "187bff14cccb94f179e943eacce55bb3"


@pytest.mark.parametrize("text", ["", "garbage", "0::/"])
def test_cgroup_unreadable_or_root(text):
    place = classify_cgroup(text)
    assert place["where"] in ("unknown", "host")
    assert place["pod_uid"] is None


# --- toolkit config --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["toolkit-config-default-legacy.toml", "toolkit-config-default-1.18.toml", "toolkit-config-gpu-operator.toml"],
)
def test_real_configs_use_the_insecure_defaults(name):
    config = parse_toolkit_config(fixture(name))
    assert config == {
        "error": None,
        "envvar_when_unprivileged": True,
        "volume_mounts": False,
        "explicit": [],
        "hardened": False,
    }
    assert len(toolkit_findings(name, config)) == 2


# Constructed for the test: NVIDIA's recommended setting (gpu-operator#372), not a captured file.
HARDENED = """accept-nvidia-visible-devices-envvar-when-unprivileged = false
accept-nvidia-visible-devices-as-volume-mounts = true
disable-require = false

[nvidia-container-cli]
environment = []
"""


def test_hardened_config():
    config = parse_toolkit_config(HARDENED)
    assert config["hardened"] is True
    assert config["explicit"] == [ENVVAR_KEY, VOLUME_MOUNTS_KEY]
    assert toolkit_findings("/etc/nvidia-container-runtime/config.toml", config) == []


def test_hardened_config_without_tomllib(monkeypatch):
    monkeypatch.setattr(host_probe, "HAS_TOMLLIB", False)
    assert parse_toolkit_config(HARDENED)["hardened"] is True
    assert parse_toolkit_config(fixture("toolkit-config-default-legacy.toml"))["hardened"] is False


@pytest.mark.parametrize(
    "text, error",
    [
        ("accept-nvidia-visible-devices-envvar-when-unprivileged = ", "not valid TOML"),
        ('accept-nvidia-visible-devices-envvar-when-unprivileged = "false"', "not true or false"),
    ],
)
def test_broken_config_is_reported(text, error):
    config = parse_toolkit_config(text)
    assert error in config["error"]
    assert config["hardened"] is None
    assert toolkit_findings("c.toml", config) == [f"c.toml: {config['error']}"]


# --- processes -------------------------------------------------------------------------------


def test_place_processes_maps_pids_through_cgroups():
    apps = parse_compute_apps(fixture("smi-apps-h100-590.48.01.csv"))
    gpus = parse_gpu_query(fixture("smi-gpu-h100-590.48.01.csv"))
    cgroups = {
        11327: fixture("cgroup-v1-containerd-systemd-kubepods.txt"),
        11328: fixture("cgroup-v1-docker-run.txt"),
        11345: None,  # the process ended before its cgroup was read
    }
    placed = place_processes(apps, cgroups, gpus)
    assert [p["where"] for p in placed] == ["pod", "container", "unknown"]
    assert placed[0]["pod_uid"] == "b96a7488-3ee1-4bdc-9c98-155cc887b417"
    assert placed[0]["gpu_index"] == 0
    assert "docker container 2403ccfe427f" in describe_process(placed[1])
