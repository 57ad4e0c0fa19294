# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reading at the edge of the host probe: files under a root, device nodes, and nvidia-smi run
through the function it is handed. The parsers in probe.py judge what is read."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Sequence

from ansible_collections.kubegpu.scheduling.plugins.module_utils.host.probe import (
    COMPUTE_APPS_FIELDS,
    GPU_QUERY_FIELDS,
    HostReadings,
    parse_compute_apps,
)

# Runs a command (argv) and returns its exit code, standard output and standard error.
RunCommand = Callable[[Sequence[str]], tuple[int, str, str]]

SMI = "nvidia-smi"
# Where the GPU Operator's validator looks for a host driver's nvidia-smi, plus its toolkit directory.
SMI_DIRS = ("/usr/bin", "/usr/sbin", "/bin", "/sbin", "/opt/bin", "/usr/local/nvidia/bin")
DEFAULT_TOOLKIT_CONFIGS = (
    "/etc/nvidia-container-runtime/config.toml",
    "/usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml",
)
VERSION_FILE = "/proc/driver/nvidia/version"
MODULES_FILE = "/proc/modules"


def under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def is_program(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK) and os.path.getsize(path) > 0


def smi_candidates(root: str) -> list[str]:
    on_path = [os.path.join(d, SMI) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    return on_path + [under(root, os.path.join(d, SMI)) for d in SMI_DIRS]


def find_smi(explicit: str | None, root: str) -> str | None:
    candidates = [explicit] if explicit else smi_candidates(root)
    return next((c for c in candidates if is_program(c)), None)


def run_query(run: RunCommand, smi: str, query: str, fields: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The CSV nvidia-smi prints for a query, or the reason it printed none."""
    try:
        rc, out, err = run([smi, f"{query}={','.join(fields)}", "--format=csv,noheader,nounits"])
    except OSError as exc:
        return None, f"{smi} could not run: {exc}"
    if rc != 0:
        reason = (err or out or "").strip().splitlines()
        return None, f"{smi} exited with {rc}: {reason[0] if reason else 'no output'}"
    return out, None


def read_cgroups(root: str, apps_output: str | None) -> dict[int, str | None]:
    pids = {app["pid"] for app in parse_compute_apps(apps_output or "") if isinstance(app["pid"], int)}
    return {pid: read_text(under(root, f"/proc/{pid}/cgroup")) for pid in sorted(pids)}


def looked_for(explicit: str | None, root: str) -> list[str]:
    smi = explicit or f"{SMI} on PATH and in {', '.join(under(root, d) for d in SMI_DIRS)}"
    return [smi, under(root, VERSION_FILE), f"nvidia in {under(root, MODULES_FILE)}", under(root, "/dev/nvidia*")]


def read_host(
    root: str, nvidia_smi: str | None, toolkit_config_paths: list[str], run: RunCommand, warn: Callable[[str], None]
) -> HostReadings:
    """Everything the host says, read once: nvidia-smi's two queries, procfs, device nodes and the
    toolkit's configuration files, all under ``root``."""
    smi = find_smi(nvidia_smi, root)
    gpu_output = apps_output = error = None
    if smi is not None:
        gpu_output, error = run_query(run, smi, "--query-gpu", GPU_QUERY_FIELDS)
        if error is None:
            apps_output, apps_error = run_query(run, smi, "--query-compute-apps", COMPUTE_APPS_FIELDS)
            if apps_error:
                warn(f"cannot list GPU processes: {apps_error}")
    return HostReadings(
        smi_path=smi,
        smi_gpu_output=gpu_output,
        smi_apps_output=apps_output,
        smi_error=error,
        version_text=read_text(under(root, VERSION_FILE)),
        modules_text=read_text(under(root, MODULES_FILE)),
        device_nodes=sorted(glob.glob(under(root, "/dev/nvidia*"))),
        toolkit_texts={path: read_text(under(root, path)) for path in toolkit_config_paths},
        cgroups=read_cgroups(root, apps_output),
        looked_for=looked_for(nvidia_smi, root),
    )
