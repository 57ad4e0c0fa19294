# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device-list variables of the NVIDIA container toolkit, read as the toolkit reads them.

This is the one reading of ``NVIDIA_VISIBLE_DEVICES`` in the collection: the fleet facts, the
validator and the live audit all judge a value here.
"""

from __future__ import annotations

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
# Variables through which a container can ask the toolkit for devices, with what they grant.
DEVICE_VARIABLES = {
    VISIBLE_DEVICES: "selects",
    "NVIDIA_MIG_CONFIG_DEVICES": "grants MIG configuration of",
    "NVIDIA_MIG_MONITOR_DEVICES": "grants MIG monitoring of",
}
CUDA_VERSION = "CUDA_VERSION"
REQUIRE_CUDA = "NVIDIA_REQUIRE_CUDA"
VOID = "void"
NONE = "none"
ALL = "all"
DEVICES = "devices"


def device_selection(value: str) -> str:
    """void, none, all or devices: how the toolkit reads a device-list value.

    The value is split on commas and each entry trimmed. Entries are case-sensitive, so ``VOID``
    names a device. void, or no entry at all, wins over none, and none over all
    (nvidia-container-toolkit ``internal/config/image``, ``NewVisibleDevices``).
    """
    entries = [entry for entry in (part.strip() for part in value.split(",")) if entry]
    if not entries or VOID in entries:
        return VOID
    if NONE in entries:
        return NONE
    if ALL in entries:
        return ALL
    return DEVICES


def selects_gpus(value: str) -> bool:
    """Whether a device-list value gives the container GPUs (all of them, or some by index or id)."""
    return device_selection(value) in (ALL, DEVICES)
