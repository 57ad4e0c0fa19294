# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a node's GPUs and their driver live on the host, besides the device nodes under /dev:
a hostPath volume on one of these reaches the GPUs without asking the scheduler for them."""

from __future__ import annotations

# Directories (and everything under them): the driver root of the GPU Operator and GKE's driver installer.
GPU_HOST_DIRS = ("/dev/char", "/run/nvidia", "/var/run/nvidia", "/home/kubernetes/bin/nvidia", "/usr/local/nvidia")
# File names that are the driver's libraries or tools, wherever they are mounted from.
DRIVER_FILE_PREFIXES = ("libnvidia", "libcuda", "nvidia-smi")
