# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for what a GPU host says about its driver, its GPUs and who uses them.

Inputs are the texts of ``nvidia-smi`` query output (with or without the header line, with or
without units), ``/proc/driver/nvidia/version``, ``/proc/modules``, ``/proc/<pid>/cgroup`` and the
NVIDIA container toolkit's ``config.toml``. Nothing here touches the machine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.models import sanitize_label_value
from ansible_collections.kubegpu.scheduling.plugins.module_utils.gpu.toolkit import (
    ENVVAR_KEY,
    TOOLKIT_DEFAULTS,
    VOLUME_MOUNTS_KEY,
)

try:
    import tomllib

    HAS_TOMLLIB = True
except ImportError:  # Python < 3.11 on the managed host: the line reader below still works
    HAS_TOMLLIB = False


GPU_QUERY_FIELDS: tuple[str, ...] = ("index", "name", "uuid", "memory.total", "driver_version", "pci.bus_id")
COMPUTE_APPS_FIELDS: tuple[str, ...] = ("pid", "process_name", "gpu_uuid", "used_memory")

# nvidia-smi prints the canonical field name in the header, whatever alias was queried.
_GPU_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "gpu_serial": "serial"}
_APPS_ALIASES = {"name": "process_name", "used_gpu_memory": "used_memory", "uuid": "gpu_uuid"}
_HEADER_CELL = re.compile(r"^(?P<name>[a-z_][A-Za-z0-9_.]*)(?:\s+\[[^\]]*\])?$")
_NUMBER = re.compile(r"^\s*(\d+)")
_ABSENT = re.compile(r"^\[?(N/A|Not Supported|Insufficient Permissions|Unknown Error|Not Available)\]?$", re.IGNORECASE)
NVIDIA_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem")


def _cell(value: str) -> str | None:
    value = value.strip()
    return None if not value or _ABSENT.match(value) else value


def _header_names(cells: Sequence[str], aliases: Mapping[str, str]) -> list[str] | None:
    """Field names if `cells` is nvidia-smi's header line, else None."""
    names = []
    for cell in cells:
        match = _HEADER_CELL.match(cell.strip())
        if not match:
            return None
        names.append(aliases.get(match["name"], match["name"]))
    return names


def _fit(cells: list[str], fields: Sequence[str], merge_field: str | None) -> list[str] | None:
    """Cells matched to fields; a process name may itself hold commas, so extra cells go back into it."""
    extra = len(cells) - len(fields)
    if extra == 0:
        return cells
    if extra < 0 or merge_field is None or merge_field not in fields:
        return None
    at = list(fields).index(merge_field)
    return cells[:at] + [",".join(cells[at : at + extra + 1])] + cells[at + extra + 1 :]


def parse_query_csv(
    text: str,
    fields: Sequence[str],
    aliases: Mapping[str, str] | None = None,
    merge_field: str | None = None,
) -> list[dict[str, str | None]]:
    """Rows of `nvidia-smi --query-*` CSV as dicts keyed by canonical field name.

    With a header line the columns are taken from it (so any field list or order works);
    without one they are the queried `fields`. Absent values (`[N/A]`, `[Not Supported]`, ...)
    become None; rows that do not fit are skipped.
    """
    aliases = aliases or {}
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return []
    header = _header_names(lines[0].split(","), aliases)
    columns = header if header is not None else [aliases.get(f, f) for f in fields]
    rows = lines[1:] if header is not None else lines
    merge = aliases.get(merge_field, merge_field) if merge_field else None
    records = []
    for line in rows:
        cells = _fit(line.split(","), columns, merge)
        if cells is not None:
            records.append({name: _cell(value) for name, value in zip(columns, cells, strict=False)})
    return records


def _int(value: str | None) -> int | None:
    match = _NUMBER.match(value) if value else None
    return int(match[1]) if match else None


def gfd_product_label(name: str | None) -> str | None:
    """The value GPU Feature Discovery and ACK put in their product labels: spaces become dashes."""
    return name.strip().replace(" ", "-") if name else None


def parse_gpu_query(text: str, fields: Sequence[str] = GPU_QUERY_FIELDS) -> list[dict[str, Any]]:
    """GPUs from `nvidia-smi --query-gpu=...` output."""
    gpus = []
    for row in parse_query_csv(text, fields, _GPU_ALIASES):
        name = row.get("name")
        gpus.append(
            {
                "index": _int(row.get("index")),
                "name": name,
                "uuid": row.get("uuid"),
                "memory_total_mib": _int(row.get("memory.total")),
                "driver_version": row.get("driver_version"),
                "pci_bus_id": row.get("pci.bus_id"),
                "product_label": gfd_product_label(name),
                "model_label_value": sanitize_label_value(name) or None,
            }
        )
    return gpus


def parse_compute_apps(text: str, fields: Sequence[str] = COMPUTE_APPS_FIELDS) -> list[dict[str, Any]]:
    """Processes from `nvidia-smi --query-compute-apps=...` output."""
    apps = []
    for row in parse_query_csv(text, fields, _APPS_ALIASES, merge_field="process_name"):
        apps.append(
            {
                "pid": _int(row.get("pid")),
                "process_name": row.get("process_name"),
                "gpu_uuid": row.get("gpu_uuid"),
                "used_memory_mib": _int(row.get("used_memory")),
            }
        )
    return apps


_NVRM = re.compile(
    r"NVRM version:\s+NVIDIA UNIX\s+"
    r"(?:(?P<open>Open\s+)?Kernel Module(?:\s+for\s+(?P<arch_open>\S+))?|(?P<arch>\S+)\s+Kernel Module)"
    r"\s+(?P<version>\d+(?:\.\d+)+)"
)


def parse_driver_version(text: str) -> dict[str, Any] | None:
    """The kernel module's version line, or None when the text holds none."""
    match = _NVRM.search(text or "")
    if not match:
        return None
    return {
        "version": match["version"],
        "flavor": "open" if match["open"] else "proprietary",
        "arch": match["arch_open"] or match["arch"],
    }


def parse_proc_modules(text: str) -> dict[str, dict[str, Any]]:
    """Loaded kernel modules by name: size, use count, users and state."""
    modules = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 5 or not parts[1].isdigit():
            continue
        users = [u for u in parts[3].split(",") if u and u != "-"]
        modules[parts[0]] = {
            "size": int(parts[1]),
            "use_count": _int(parts[2]),
            "used_by": users,
            "state": parts[4],
        }
    return modules


def loaded_nvidia_modules(modules: Mapping[str, Any]) -> list[str]:
    return [name for name in NVIDIA_MODULES if name in modules]


_POD_SYSTEMD = re.compile(r"kubepods(?:-[a-z]+)?-pod(?P<uid>[0-9a-fA-F_]{32,36})\.slice")
_POD_CGROUPFS = re.compile(r"/kubepods(?:/[a-z]+)?/pod(?P<uid>[0-9a-fA-F-]{32,36})(?:/|$)")
_CONTAINER_PATTERNS = (
    (re.compile(r"cri-containerd[-:](?P<id>[0-9a-f]{64})"), "containerd"),
    (re.compile(r"crio-(?:conmon-)?(?P<id>[0-9a-f]{64})"), "cri-o"),
    (re.compile(r":crio:(?P<id>[0-9a-f]{64})"), "cri-o"),
    (re.compile(r"docker[-:/](?P<id>[0-9a-f]{64})"), "docker"),
    (re.compile(r"libpod-(?:conmon-)?(?P<id>[0-9a-f]{64})"), "podman"),
    (re.compile(r"nerdctl-(?P<id>[0-9a-f]{64})"), "nerdctl"),
    (re.compile(r"/(?P<id>[0-9a-f]{64})(?:\.scope)?$"), None),
)


def _cgroup_paths(text: str) -> list[str]:
    paths = []
    for line in (text or "").splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) == 3 and parts[2]:
            paths.append(parts[2])
    return paths


def _pod_uid(path: str) -> str | None:
    match = _POD_SYSTEMD.search(path)
    if match:
        return match["uid"].replace("_", "-").lower()
    match = _POD_CGROUPFS.search(path)
    return match["uid"].lower() if match else None


def _container(path: str) -> tuple[str | None, str | None]:
    for pattern, runtime in _CONTAINER_PATTERNS:
        match = pattern.search(path)
        if match:
            return match["id"], runtime
    return None, None


def classify_cgroup(text: str) -> dict[str, Any]:
    """Where a process runs, from its /proc/<pid>/cgroup (cgroup v1 or v2).

    `where` is `pod` (a Kubernetes pod: kubepods cgroup, systemd or cgroupfs driver), `container`
    (a container outside Kubernetes such as `docker run --gpus`), `host` (anything else) or
    `unknown` (nothing readable).
    """
    paths = _cgroup_paths(text)
    if not paths:
        return {"where": "unknown", "pod_uid": None, "container_id": None, "runtime": None, "cgroup": None}
    for path in paths:
        uid = _pod_uid(path)
        if uid:
            container_id, runtime = _container(path)
            return {"where": "pod", "pod_uid": uid, "container_id": container_id, "runtime": runtime, "cgroup": path}
    for path in paths:
        container_id, runtime = _container(path)
        if container_id:
            return {
                "where": "container",
                "pod_uid": None,
                "container_id": container_id,
                "runtime": runtime,
                "cgroup": path,
            }
    unified = [p for p in paths if p != "/"]
    return {
        "where": "host",
        "pod_uid": None,
        "container_id": None,
        "runtime": None,
        "cgroup": unified[0] if unified else paths[0],
    }


_TOP_LEVEL_BOOL = re.compile(r"^\s*(?P<key>[A-Za-z0-9_-]+)\s*=\s*(?P<value>\S+)\s*(?:#.*)?$")


def _read_top_level_lines(text: str) -> dict[str, object]:
    """Top-level `key = value` pairs, for hosts whose Python has no tomllib."""
    values: dict[str, object] = {}
    for line in text.splitlines():
        if line.strip().startswith("["):
            break
        match = _TOP_LEVEL_BOOL.match(line)
        if match:
            raw = match["value"]
            values[match["key"]] = {"true": True, "false": False}.get(raw, raw)
    return values


def _top_level(text: str) -> dict[str, object]:
    if HAS_TOMLLIB:
        return tomllib.loads(text)
    return _read_top_level_lines(text)


def parse_toolkit_config(text: str) -> dict[str, Any]:
    """The two accept-* settings of a toolkit config.toml, with the toolkit's defaults where absent.

    `hardened` is true when unprivileged containers cannot get GPUs through NVIDIA_VISIBLE_DEVICES
    and device lists come from volume mounts (NVIDIA's recommended setting).
    """
    try:
        document = _top_level(text or "")
    except (ValueError, TypeError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        return {
            "error": f"not valid TOML: {exc}",
            "envvar_when_unprivileged": None,
            "volume_mounts": None,
            "explicit": [],
            "hardened": None,
        }
    settings: dict[str, bool] = {}
    explicit = []
    for key, default in TOOLKIT_DEFAULTS.items():
        value = document.get(key, default)
        if not isinstance(value, bool):
            return {
                "error": f"{key} is {value!r}, not true or false",
                "envvar_when_unprivileged": None,
                "volume_mounts": None,
                "explicit": [],
                "hardened": None,
            }
        settings[key] = value
        if key in document:
            explicit.append(key)
    envvar, volume_mounts = settings[ENVVAR_KEY], settings[VOLUME_MOUNTS_KEY]
    return {
        "error": None,
        "envvar_when_unprivileged": envvar,
        "volume_mounts": volume_mounts,
        "explicit": explicit,
        "hardened": not envvar and volume_mounts,
    }


def toolkit_findings(path: str, config: Mapping[str, Any]) -> list[str]:
    """What a toolkit config leaves open, one sentence each."""
    if config.get("error"):
        return [f"{path}: {config['error']}"]
    findings = []
    if config.get("envvar_when_unprivileged"):
        findings.append(
            f"{path}: {ENVVAR_KEY} is true, so unprivileged containers get GPUs through NVIDIA_VISIBLE_DEVICES"
        )
    if not config.get("volume_mounts"):
        findings.append(f"{path}: {VOLUME_MOUNTS_KEY} is false, so device lists are not read from volume mounts")
    return findings


def gpu_index_by_uuid(gpus: Sequence[Mapping[str, Any]]) -> dict[str, int | None]:
    return {gpu["uuid"]: gpu.get("index") for gpu in gpus if gpu.get("uuid")}


def place_processes(
    apps: Sequence[Mapping[str, Any]],
    cgroups: Mapping[int, str | None],
    gpus: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Compute processes with where they run, given the text of each one's /proc/<pid>/cgroup."""
    index_of = gpu_index_by_uuid(gpus)
    placed = []
    for app in apps:
        pid = app.get("pid")
        text = cgroups.get(pid) if isinstance(pid, int) else None
        placed.append({**app, "gpu_index": index_of.get(app.get("gpu_uuid") or ""), **classify_cgroup(text or "")})
    return placed


def describe_process(process: Mapping[str, Any]) -> str:
    where = process["where"]
    detail = {
        "container": f"{process.get('runtime') or 'container'} container {str(process.get('container_id'))[:12]}",
        "host": f"cgroup {process.get('cgroup')}",
        "unknown": "cgroup not readable",
    }.get(where, f"pod {process.get('pod_uid')}")
    return f"pid {process.get('pid')} {process.get('process_name') or '?'} on GPU {process.get('gpu_uuid')} ({detail})"


NO_DRIVER = "no driver found"


@dataclass
class HostReadings:
    """What the module read from the host, as text; None where a file or command was absent."""

    smi_path: str | None = None
    smi_gpu_output: str | None = None
    smi_apps_output: str | None = None
    smi_error: str | None = None
    version_text: str | None = None
    modules_text: str | None = None
    device_nodes: Sequence[str] = ()
    toolkit_texts: Mapping[str, str | None] = field(default_factory=dict)
    cgroups: Mapping[int, str | None] = field(default_factory=dict)
    looked_for: Sequence[str] = ()


def _device_summary(device_nodes: Sequence[str]) -> dict[str, Any]:
    names = sorted(path.rsplit("/", 1)[-1] for path in device_nodes)
    return {
        "nvidiactl": "nvidiactl" in names,
        "nvidia_uvm": "nvidia-uvm" in names,
        "gpus": [f"/dev/{n}" for n in names if re.fullmatch(r"nvidia\d+", n)],
    }


def _toolkit_summary(texts: Mapping[str, str | None]) -> dict[str, Any]:
    configs: list[dict[str, Any]] = []
    for path, text in texts.items():
        if text is None:
            configs.append({"path": path, "exists": False})
        else:
            configs.append({"path": path, "exists": True, **parse_toolkit_config(text)})
    present = [c for c in configs if c["exists"]]
    return {
        "configs": configs,
        "hardened": all(c["hardened"] for c in present) if present else None,
        "findings": [f for c in present for f in toolkit_findings(c["path"], c)],
    }


def host_report(readings: HostReadings) -> dict[str, Any]:
    """Facts about one host's driver, GPUs, toolkit hardening and GPU processes outside pods."""
    gpus = parse_gpu_query(readings.smi_gpu_output or "") if readings.smi_error is None else []
    apps = parse_compute_apps(readings.smi_apps_output or "") if readings.smi_error is None else []
    processes = place_processes(apps, readings.cgroups, gpus)
    version = parse_driver_version(readings.version_text or "")
    modules = loaded_nvidia_modules(parse_proc_modules(readings.modules_text or ""))
    smi_works = readings.smi_path is not None and readings.smi_error is None
    driver_found = smi_works or version is not None or bool(modules)
    driver_version = next((g["driver_version"] for g in gpus if g["driver_version"]), None)
    toolkit = _toolkit_summary(readings.toolkit_texts)
    outside = [p for p in processes if p["where"] in ("container", "host")]
    problems = []
    if not driver_found:
        problems.append(f"{NO_DRIVER} (looked for: {', '.join(readings.looked_for)})")
    elif not smi_works:
        problems.append(
            f"the NVIDIA kernel module is present but nvidia-smi does not work: "
            f"{readings.smi_error or 'nvidia-smi not found'}"
        )
    if driver_found and not any(c["exists"] for c in toolkit["configs"]):
        problems.append("no NVIDIA container toolkit config found at " + ", ".join(readings.toolkit_texts))
    problems += toolkit["findings"]
    problems += [f"GPU used outside Kubernetes pods: {describe_process(p)}" for p in outside]
    return {
        "driver_found": driver_found,
        "driver_working": smi_works,
        "message": None if driver_found else NO_DRIVER,
        "looked_for": list(readings.looked_for) if not driver_found else [],
        "driver_version": driver_version or (version or {}).get("version"),
        "kernel_module": {"version_file": version, "loaded": modules},
        "nvidia_smi": {"path": readings.smi_path, "works": smi_works, "error": readings.smi_error},
        "device_nodes": _device_summary(readings.device_nodes),
        "gpus": gpus,
        "gpu_count": len(gpus),
        "models": sorted({g["product_label"] for g in gpus if g["product_label"]}),
        "toolkit": {"configs": toolkit["configs"], "hardened": toolkit["hardened"]},
        "processes": processes,
        "processes_outside_pods": outside,
        "problems": problems,
    }
