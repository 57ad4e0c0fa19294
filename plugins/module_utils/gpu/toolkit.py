# Copyright: kubegpu.scheduling contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA container toolkit's configuration keys that decide who may ask for GPUs."""

from __future__ import annotations

DEVICE_LIST_MOUNT_ROOTS = ("/var/run/nvidia-container-devices", "/run/nvidia-container-devices")
ENVVAR_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
VOLUME_MOUNTS_KEY = "accept-nvidia-visible-devices-as-volume-mounts"

# The toolkit's defaults when a key is absent (nvidia-container-toolkit api/config/v1): both insecure.
TOOLKIT_DEFAULTS = {ENVVAR_KEY: True, VOLUME_MOUNTS_KEY: False}
