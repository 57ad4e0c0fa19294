# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pod annotations that ask a container runtime or a device injector for devices."""

from __future__ import annotations

import re

# CDI (cdi.k8s.io/<name>), NRI device injection (devices.nri.io/...) and CRI-O's own key.
DEVICE_ANNOTATION_PREFIXES = ("cdi.k8s.io/", "devices.nri.io/")
DEVICE_ANNOTATION_KEYS = ("io.kubernetes.cri-o.Devices",)
# GKE's NRI device injector (GoogleCloudPlatform/container-engine-accelerators, nri_device_injector):
# `devices.gke.io/container.<name>` lists device nodes (`- path: /dev/nvidia0`) to create in that container.
GKE_DEVICE_ANNOTATION_PREFIX = "devices.gke.io/container."
NVIDIA_DEVICE_NODE = re.compile(r"/dev/nvidia[\w-]*")
