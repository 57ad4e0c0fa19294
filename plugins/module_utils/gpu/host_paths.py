# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a node's GPUs and their driver live on the host, besides the device nodes under /dev:
a hostPath volume on one of these reaches the GPUs without asking the scheduler for them."""

from __future__ import annotations

# Directories (and everything under them): the driver root of the GPU Operator and GKE's driver installer.
GPU_HOST_DIRS = ("/dev/char", "/run/nvidia", "/var/run/nvidia", "/home/kubernetes/bin/nvidia", "/usr/local/nvidia")
# File names that are the driver's libraries or tools, wherever they are mounted from.
DRIVER_FILE_PREFIXES = ("libnvidia", "libcuda", "nvidia-smi")


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(len(parts))]


# The directories above the device nodes and the driver roots ("/" and up to /home/kubernetes/bin):
# a hostPath of one of these holds the GPU paths under it. /dev itself is a GPU path.
GPU_PATH_PARENTS = tuple(
    sorted({a for d in ("/dev", *GPU_HOST_DIRS) for a in _ancestors(d)} - {"/dev", *GPU_HOST_DIRS})
)
