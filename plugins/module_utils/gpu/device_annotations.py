# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pod annotations that ask a container runtime or a device injector for devices."""

from __future__ import annotations

import re

# CDI (cdi.k8s.io/<name>), NVIDIA's NRI plugin (nvidia.cdi.k8s.io/container.<name>, set by the GPU
# Operator's setNRIPluginAnnotation), NRI device injection (devices.nri.io/...) and CRI-O's own key.
DEVICE_ANNOTATION_PREFIXES = ("cdi.k8s.io/", "nvidia.cdi.k8s.io/", "devices.nri.io/")
DEVICE_ANNOTATION_KEYS = ("io.kubernetes.cri-o.Devices",)
# GKE's NRI device injector (GoogleCloudPlatform/container-engine-accelerators, nri_device_injector):
# `devices.gke.io/container.<name>` lists device nodes (`- path: /dev/nvidia0`) to create in that container.
GKE_DEVICE_ANNOTATION_PREFIX = "devices.gke.io/container."
NVIDIA_DEVICE_NODE = re.compile(r"/dev/nvidia[\w-]*")
# A CDI device name of a GPU kind in an annotation's comma-separated list: vendor/class=name, the class
# naming GPUs or MIG devices (nvidia.com/gpu=all, management.nvidia.com/gpu=all, nvidia.com/pgpu=0,
# amd.com/gpu=1). RE2 syntax too: the admission policy matches the same expression.
CDI_GPU_DEVICE_PATTERN = r"(?i)(?:^|,)\s*([a-z0-9.-]+/[a-z0-9._-]*(?:gpu|mig)[a-z0-9._-]*)=([^,\s]+)"
CDI_GPU_DEVICE = re.compile(CDI_GPU_DEVICE_PATTERN)
