# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device-list variables of the NVIDIA container toolkit, read as the toolkit reads them."""

from __future__ import annotations

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


DEVICE_VARIABLES = {
    VISIBLE_DEVICES: "selects",
    "NVIDIA_MIG_CONFIG_DEVICES": "grants MIG configuration of",
    "NVIDIA_MIG_MONITOR_DEVICES": "grants MIG monitoring of",
}


CUDA_VERSION = "CUDA_VERSION"


REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"


def device_selection(value: str) -> str:
    """void, none, all or devices: how the NVIDIA toolkit reads a device-list variable."""
    entries = [entry.strip() for entry in value.split(",")]
    entries = [entry for entry in entries if entry]
    if not entries or "void" in entries:
        return "void"
    if "none" in entries:
        return "none"
    if "all" in entries:
        return "all"
    return "devices"


def selects_gpus(value: str) -> bool:
    return device_selection(value) in ("all", "devices")


def requests_no_gpu(value: str) -> bool:
    """Whether an NVIDIA_VISIBLE_DEVICES value asks for no GPU (the toolkit: void > none > all)."""
    entries = [entry.strip().lower() for entry in value.split(",")]
    return "void" in entries or all(entry in ("", "none") for entry in entries)
